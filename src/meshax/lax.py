"""Lower-level operations (as jax.lax): collectives over mesh axes and sharding constraints."""
from meshax._src import methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.jit import with_sharding_constraint
from meshax._src.lax_parallel import (
    all_gather, all_to_all, axis_index, axis_size, pmax, pmean, pmin, ppermute, psum, psum_scatter,
)

__all__ = ["all_gather", "all_to_all", "axis_index", "axis_size", "pmax", "pmean", "pmin", "ppermute", "psum",
           "psum_scatter", "with_sharding_constraint"]
