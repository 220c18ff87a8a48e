"""The older spelling `jax.experimental.shard_map.shard_map(f, mesh, in_specs, out_specs, check_rep=True)`.

The seeds use it with the older replication rules, under which an all_gather result may be
returned with a replicated out_spec; JAX 0.10's varying-axes typing refuses that. The seeds
win: this spelling maps without varying-axes typing (as check_vma=False), whatever check_rep, and its
out_specs may hold trailing Nones beyond an output's rank (seed 003's psum_scatter example).
"""
from typing import Any, Callable

from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.transforms.shard_map import older_shard_map


def shard_map(f: Callable[..., Any], mesh: Any = None, in_specs: Any = None, out_specs: Any = None,
              check_rep: bool = True, auto: Any = frozenset()) -> Any:
    """Map `f` over the shards of its inputs (see meshax.shard_map)."""
    return older_shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


__all__ = ["shard_map"]
