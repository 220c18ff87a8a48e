"""JAX 0.10's sharding-in-types entry points: jax.typeof, reshard, auto_axes and explicit_axes.

meshax evaluates every operation with a concrete layout, so these read and move layouts:
`typeof` shows the Explicit mesh axes of an array's sharding in its type (float32[8@X,4]),
`reshard` places values as a PartitionSpec (on the mesh in use) or a Sharding says, and the
`auto_axes`/`explicit_axes` wrappers reshard the results (arguments) of a function.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .api import device_put
from .array import Array
from .core import ShapedArray, aval_of
from .mesh import AxisType, current_mesh
from .sharding import NamedSharding, PartitionSpec, Sharding
from .tree_util import tree_flatten, tree_unflatten


def typeof(x: Any) -> ShapedArray:
    """The abstract value of `x`; for an array on a mesh with Explicit axes, with the axes splitting each
    dimension (as JAX prints them: float32[8@X,4])."""
    return aval_of(x)


def _target(spec: Any) -> Sharding:
    if isinstance(spec, Sharding):
        return spec
    if isinstance(spec, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"reshard got the PartitionSpec {spec!r} but no mesh is in use; call it inside `with "
                             "meshax.set_mesh(mesh):` or pass NamedSharding(mesh, spec).")
        return NamedSharding(mesh, spec)
    raise TypeError(f"reshard needs a PartitionSpec or a Sharding; got {spec!r} of type {type(spec).__name__}.")


def reshard(xs: Any, out_shardings: Any) -> Any:
    """`xs` laid out as `out_shardings` (one PartitionSpec/Sharding for all leaves, or a tree of them)."""
    leaves, tree = tree_flatten(xs)
    if isinstance(out_shardings, (PartitionSpec, Sharding)):
        targets = [out_shardings] * len(leaves)
    else:
        targets = tree_flatten(out_shardings, is_leaf=lambda s: isinstance(s, (PartitionSpec, Sharding)))[0]
        if len(targets) != len(leaves):
            raise ValueError(f"reshard got {len(targets)} shardings for {len(leaves)} arrays; give one, or one per "
                             "array in the same tree.")
    return tree_unflatten(tree, [device_put(x, _target(t)) for x, t in zip(leaves, targets)])


def auto_axes(fun: Callable[..., Any], *, axes: Any = None, out_sharding: Any = None) -> Callable[..., Any]:
    """`fun`, its results resharded as `out_sharding` (meshax propagates layouts the same way for Auto and Explicit
    axes, so only the results' placement differs)."""

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = fun(*args, **kwargs)
        return result if out_sharding is None else reshard(result, out_sharding)

    return wrapped


def explicit_axes(fun: Callable[..., Any], *, axes: Any = None, in_sharding: Any = None) -> Callable[..., Any]:
    """`fun` on its arguments resharded as `in_sharding`."""

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return fun(*(args if in_sharding is None else reshard(args, in_sharding)), **kwargs)

    return wrapped
