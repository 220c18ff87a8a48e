"""jax.vmap: map a function over an axis of its arguments (the batching interpreter's public entry)."""
from __future__ import annotations

import functools
from typing import Any, Callable

from ..core.core import aval_of
from ..interpreters.batching import batch_flat
from ..primitives.batch_dims import move_to, move_to_front
from ..lax import batching_rules  # noqa: F401  (registers the batching rules)
from ..tree.tree_util import tree_flatten, tree_unflatten


def _broadcast_prefix(axes: Any, tree: Any, what: str) -> list[Any]:
    """One axis per leaf of `tree` from `axes`, an int/None or a tree prefix of it (as JAX's in_axes)."""
    if axes is None or isinstance(axes, int):
        return [axes] * tree.num_leaves
    axes_leaves, axes_tree = tree_flatten(axes, is_leaf=lambda x: x is None)
    try:
        parts = axes_tree.flatten_up_to(tree_unflatten(tree, [0] * tree.num_leaves))
    except ValueError:
        raise ValueError(f"vmap {what} specification must be a tree prefix of the corresponding value, got "
                         f"specification {axes!r} for value tree {tree}.") from None
    out = []
    for axis, part in zip(axes_leaves, parts):
        out.extend([axis] * tree_flatten(part)[1].num_leaves)
    return out


def mapped_axes(leaves: list[Any], axes: list[Any], axis_size: int | None, inconsistent: str,
                none_mapped: str) -> tuple[list[Any], int]:
    """The mapped axis of each leaf (negative ones counted from the end) and the size they all share;
    `inconsistent` (followed by the sizes) or `none_mapped` is the error when there is not exactly one."""
    axes = [None if a is None else a % max(aval_of(x).ndim, 1) for a, x in zip(axes, leaves)]
    sizes = {aval_of(x).shape[a] for a, x in zip(axes, leaves) if a is not None}
    if axis_size is not None:
        sizes.add(axis_size)
    if len(sizes) != 1:
        raise ValueError(f"{inconsistent}: {sorted(sizes)}" if sizes else none_mapped)
    return axes, sizes.pop()


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None,
         axis_size: int | None = None, spmd_axis_name: Any = None) -> Callable[..., Any]:
    """`fun` mapped over axis `in_axes` of its arguments, results stacked along `out_axes`; with `spmd_axis_name`,
    sharding constraints inside split the batch dimension over those mesh axes (as JAX's)."""
    if not callable(fun):
        raise TypeError(f"vmap requires a callable, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    spmd = () if spmd_axis_name is None else (spmd_axis_name,) if isinstance(spmd_axis_name, str) else \
        tuple(spmd_axis_name)

    @functools.wraps(fun, updated=())
    def mapped(*args: Any, **kwargs: Any) -> Any:
        leaves, tree = tree_flatten(args)
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                             f"positional arguments passed to the function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        axes, size = mapped_axes(leaves, _broadcast_prefix(in_axes, tree, "in_axes"), axis_size,
                                 "vmap got inconsistent sizes for the array axes to be mapped",
                                 "vmap must have at least one non-None value in in_axes")
        _check_spmd_axes(spmd, leaves, axes)
        out_tree = []

        def flat(*xs: Any) -> list[Any]:
            out, structure = tree_flatten(fun(*tree_unflatten(tree, list(xs)), **kwargs))
            out_tree.append(structure)
            return out

        outs, dims = batch_flat(flat, leaves, axes, size, axis_name, spmd)
        targets = _broadcast_prefix(out_axes, out_tree[0], "out_axes")
        results = []
        for value, dim, target in zip(outs, dims, targets):
            if target is None:
                if dim is not None:
                    raise ValueError("vmap has mapped output but out_axes is None")
                results.append(value)
                continue
            value = move_to_front(value, dim, size) if dim is None else value
            dim = 0 if dim is None else dim
            results.append(move_to(value, dim, target % aval_of(value).ndim))
        return tree_unflatten(out_tree[0], results)

    return mapped


def _check_spmd_axes(spmd: tuple, leaves: list[Any], axes: list[Any]) -> None:
    """A batch dimension already split over Explicit mesh axes must be split over spmd_axis_name, if given."""
    if not spmd:
        return
    for x, axis in zip(leaves, axes):
        explicit = aval_of(x).explicit
        if axis is not None and explicit and explicit[axis] and tuple(explicit[axis]) != spmd:
            raise ValueError(
                "Only one of spmd_axis_name or arrays sharded on `Explicit` mesh axis type is allowed. Got "
                f"spmd_axis_name={spmd} and arrays sharded on explicit_mesh_axis={tuple(explicit[axis])}")
