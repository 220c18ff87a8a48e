"""JAX 0.10's sharding-in-types entry points: jax.typeof, reshard, auto_axes and explicit_axes.

`typeof` is a value's type, with the Explicit mesh axes splitting each dimension (float32[8@X,4]; see
explicit_types.py); `reshard` places values as a PartitionSpec (on the mesh in use) or a Sharding says (a
sharding constraint under jit, which retypes); `auto_axes`/`explicit_axes` run a function with mesh axes retyped.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .api import device_put
from .array import Array
from .core import ShapedArray, Tracer, aval_of
from .explicit_rules import format_spec
from .explicit_types import retyped_axes
from .primitives import sharding_constraint
from .mesh import AxisType, current_mesh
from .sharding import NamedSharding, PartitionSpec, Sharding
from .tree_util import tree_flatten, tree_map, tree_unflatten


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


def _axes(axes: Any, wanted: AxisType, what: str) -> tuple[str, ...]:
    """The mesh axes an auto_axes/explicit_axes call retypes: `axes` (a name or names), else every axis of the
    mesh in use of type `wanted` (Explicit for auto_axes, Auto for explicit_axes)."""
    if axes is not None:
        return (axes,) if isinstance(axes, str) else tuple(axes)
    mesh = current_mesh()
    if mesh is None:
        raise ValueError(f"{what} needs the mesh axes to retype: pass axes=, or call it inside `with "
                         "meshax.set_mesh(mesh):`.")
    return tuple(n for n, t in zip(mesh.axis_names, mesh.axis_types) if t is wanted)


def _retyped(tree: Any) -> Any:
    """Traced values of `tree` typed anew under the axis types in effect (a no-op on their layout)."""

    def retype(leaf: Any) -> Any:
        aval = getattr(leaf, "aval", None)
        if not isinstance(leaf, Tracer) or aval.mesh is None:
            return leaf
        spec = PartitionSpec(*format_spec(aval.explicit or ((),) * aval.ndim))
        return sharding_constraint.bind(leaf, sharding=NamedSharding(aval.mesh, spec))

    return tree_map(retype, tree)


def auto_axes(fun: Callable[..., Any], *, axes: Any = None, out_sharding: Any = None) -> Callable[..., Any]:
    """`fun` run with the mesh axes `axes` (default: the Explicit ones of the mesh in use) typed Auto: shardings
    over them leave its values' types and propagate as meshax decides; its results are then laid out as
    `out_sharding` says, with Explicit types again."""

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with retyped_axes(_axes(axes, AxisType.Explicit, "auto_axes"), AxisType.Auto):
            result = fun(*_retyped(args), **_retyped(kwargs))
        return _retyped(result) if out_sharding is None else reshard(result, out_sharding)

    return wrapped


def explicit_axes(fun: Callable[..., Any], *, axes: Any = None, in_sharding: Any = None) -> Callable[..., Any]:
    """`fun` run with the mesh axes `axes` (default: the Auto ones of the mesh in use) typed Explicit, on its
    arguments laid out as `in_sharding`; its results leave with those axes Auto again."""

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with retyped_axes(_axes(axes, AxisType.Auto, "explicit_axes"), AxisType.Explicit):
            args = _retyped(args) if in_sharding is None else reshard(args, in_sharding)
            result = fun(*args, **kwargs)
        return _retyped(result)

    return wrapped
