"""The shardings an exported function records for its inputs and outputs, and their placement on a mesh."""
from __future__ import annotations

from typing import Any, Sequence

from ..core.core import ShapedArray
from ..sharding.shardings import NamedSharding, PartitionSpec
from ..tree.tree_util import prefix_leaves


def on_mesh(sharding: NamedSharding | None, mesh: Any) -> NamedSharding | None:
    """`sharding`'s spec on `mesh` (None stays None; without a mesh, the exported mesh)."""
    if sharding is None or mesh is None:
        return sharding
    if tuple(mesh.shape.items()) != tuple(sharding.mesh.shape.items()):
        raise ValueError(f"The exported function's shardings are over a mesh of axes {dict(sharding.mesh.shape)}, "
                         f"and the mesh given has axes {dict(mesh.shape)}; pass a mesh with the same axis names "
                         "and sizes.")
    return NamedSharding(mesh, sharding.spec)


def _typed(aval: ShapedArray) -> NamedSharding | None:
    """The sharding a type over Explicit mesh axes carries (None for other types)."""
    if not aval.explicit or aval.mesh is None:
        return None
    return NamedSharding(aval.mesh, PartitionSpec(*[(e[0] if len(e) == 1 else tuple(e)) if e else None
                                                    for e in aval.explicit]))


def _named(value: Any) -> NamedSharding | None:
    sharding = value if isinstance(value, NamedSharding) else getattr(value, "sharding", None)
    if isinstance(sharding, NamedSharding) and getattr(value, "committed", True):
        return sharding
    return None


def input_shardings(jit_in_shardings: Any, args: tuple, leaves: Sequence[Any],
                    avals: Sequence[ShapedArray]) -> tuple[NamedSharding | None, ...]:
    """Each flat input's sharding: jit's in_shardings where given, else the argument's own (a committed Array's or
    a ShapeDtypeStruct's), else its type's; None where there is none."""
    given: list[Any] = [None] * len(leaves)
    if jit_in_shardings is not None:
        prefix = tuple(jit_in_shardings) if isinstance(jit_in_shardings, list) else jit_in_shardings
        positional = prefix_leaves(prefix, args, is_leaf=lambda s: s is None or isinstance(s, (NamedSharding,
                                                                                                 PartitionSpec)))
        given[:len(positional)] = positional
    return tuple(_named(g) or _named(x) or _typed(a) for g, x, a in zip(given, leaves, avals))


def output_shardings(jit_out_shardings: Any, out_tree: Any,
                     avals: Sequence[ShapedArray]) -> tuple[NamedSharding | None, ...]:
    """Each flat output's sharding: jit's out_shardings where given, else its type's, else None."""
    given: list[Any] = [None] * len(avals)
    if jit_out_shardings is not None:
        placeholders = out_tree.unflatten([0] * out_tree.num_leaves)
        given = prefix_leaves(jit_out_shardings, placeholders,
                              is_leaf=lambda s: s is None or isinstance(s, (NamedSharding, PartitionSpec)))
    return tuple(_named(g) or _typed(a) for g, a in zip(given, avals))


def device_count(shardings: Sequence[NamedSharding | None]) -> int:
    """The number of devices the shardings span (1 where there are none)."""
    return max([s.mesh.devices.size for s in shardings if s is not None], default=1)
