"""JAX 0.10's sharding-in-types entry points: jax.typeof, reshard, auto_axes and explicit_axes.

`typeof` is a value's type, with the Explicit mesh axes splitting each dimension (float32[8@X,4]; see
explicit_types.py); `reshard` places values as a PartitionSpec (on the mesh in use) or a Sharding says (a
sharding constraint under jit, which retypes); `auto_axes`/`explicit_axes` run a function with mesh axes retyped.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ..arrays.key_arrays import KEY_DTYPE, KeyArray
from ..arrays.out_sharding import reshard  # noqa: F401  (jax.reshard)
from ..core.core import (Primitive, ShapedArray, Tracer, abstract_eval_rules, aval_of, current_trace, eager_trace,
                   keeps_own_vma, vma_rules)
from ..sharding.explicit_types import retyped_axes, spec_of, typed
from ..interpreters.staging import consts_as_inputs, inline_rules, trace_to_jaxpr
from ..core.jaxpr import eval_jaxpr
from ..sharding.mesh import AxisType, current_mesh
from ..sharding.shardings import NamedSharding
from ..tree.tree_util import tree_flatten, tree_unflatten
from .refs import Ref


def typeof(x: Any) -> ShapedArray:
    """The abstract value of `x`; for an array on a mesh with Explicit axes, with the axes splitting each
    dimension (as JAX prints them: float32[8@X,4]). An Array's type knows its mesh (`typeof(x).sharding`)."""
    if isinstance(x, Ref):
        return RefType(x.aval)
    if isinstance(x, KeyArray):
        return ShapedArray(x.shape, KEY_DTYPE)  # key<fry>[...]
    aval = aval_of(x)
    sharding = getattr(x, "sharding", None) if not isinstance(x, Tracer) else None
    if aval.mesh is None and isinstance(sharding, NamedSharding):
        return aval.update(mesh=sharding.mesh)  # for display: typing still follows the mesh's axis types
    return aval


class RefType:
    """The type of an array Ref, printed as JAX prints it: Ref{float32[3]}."""

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RefType) and self.aval == other.aval

    def __hash__(self) -> int:
        return hash(("Ref", self.aval))

    def __repr__(self) -> str:
        return f"Ref{{{self.aval}}}"


def _axes(axes: Any, wanted: AxisType) -> tuple[str, ...]:
    """The mesh axes an auto_axes/explicit_axes call retypes: `axes` (a name or names), else every axis of the
    mesh in use of type `wanted` (Explicit for auto_axes, Auto for explicit_axes); none without a mesh in use."""
    if axes is not None:
        return (axes,) if isinstance(axes, str) else tuple(axes)
    mesh = current_mesh()
    if mesh is None:
        return ()
    return tuple(n for n, t in zip(mesh.axis_names, mesh.axis_types) if t is wanted)


def _retyped_call(fun: Callable[..., Any], axes: tuple[str, ...], axis_type: AxisType, args: tuple,
                  kwargs: dict) -> Any:
    """`fun(*args, **kwargs)` with the mesh axes `axes` typed `axis_type`: run so eagerly; under a transformation,
    traced so (its inputs retyped) and bound as one call whose every evaluation runs with the axes so typed."""
    leaves, structure = tree_flatten((args, kwargs))
    if current_trace() is eager_trace() and not any(isinstance(x, Tracer) for x in leaves):
        with retyped_axes(axes, axis_type):  # eagerly every operation reads the axis types as it runs
            return fun(*args, **kwargs)
    out_structure = []

    def flat(*xs: Any) -> list[Any]:
        a, k = tree_unflatten(structure, list(xs))
        out, tree = tree_flatten(fun(*a, **k))
        out_structure.append(tree)
        return out

    with retyped_axes(axes, axis_type):
        avals = [typed(aval_of(x), spec_of(aval_of(x)), aval_of(x).mesh) for x in leaves]
        jaxpr, _ = trace_to_jaxpr(flat, avals)
    outs = retyped_p.bind(*jaxpr.consts, *leaves, jaxpr=consts_as_inputs(jaxpr), axes=axes, axis_type=axis_type)
    return tree_unflatten(out_structure[0], outs)


def _retyped_eval(*args: Any, jaxpr: Any, axes: tuple[str, ...], axis_type: AxisType) -> list[Any]:
    with retyped_axes(axes, axis_type):
        return eval_jaxpr(jaxpr, (), args)


def _retyped_avals(*avals: Any, jaxpr: Any, axes: tuple[str, ...], axis_type: AxisType) -> list[Any]:
    """The call's outputs are typed with the axes as they are outside it."""
    return [typed(v.aval, spec_of(v.aval), v.aval.mesh) for v in jaxpr.outvars]


retyped_p = Primitive("retyped_axes", multiple_results=True)
abstract_eval_rules[retyped_p] = _retyped_avals
inline_rules[retyped_p] = _retyped_eval
vma_rules[retyped_p] = keeps_own_vma


def auto_axes(fun: Callable[..., Any] | None = None, /, *, axes: Any = None, out_sharding: Any = None) -> Any:
    """`fun` run with the mesh axes `axes` (default: the Explicit ones of the mesh in use) typed Auto: shardings
    over them leave its values' types and propagate as meshax decides; its results are then laid out as
    `out_sharding` says (given here or as the call's keyword `out_sharding=`), with Explicit types again.
    Without `fun`, a decorator."""
    if fun is None:
        return lambda f: auto_axes(f, axes=axes, out_sharding=out_sharding)

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        target = kwargs.pop("out_sharding") if out_sharding is None and "out_sharding" in kwargs else out_sharding
        result = _retyped_call(fun, _axes(axes, AxisType.Explicit), AxisType.Auto, args, kwargs)
        return result if target is None else reshard(result, target)

    return wrapped


def explicit_axes(fun: Callable[..., Any] | None = None, /, *, axes: Any = None, in_sharding: Any = None) -> Any:
    """`fun` run with the mesh axes `axes` (default: the Auto ones of the mesh in use) typed Explicit, on its
    arguments laid out as `in_sharding` (given here or as the call's keyword `in_sharding=`); its results leave
    with those axes Auto again. Without `fun`, a decorator."""
    if fun is None:
        return lambda f: explicit_axes(f, axes=axes, in_sharding=in_sharding)

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        placement = kwargs.pop("in_sharding") if in_sharding is None and "in_sharding" in kwargs else in_sharding

        def placed(*a: Any, **k: Any) -> Any:
            return fun(*(a if placement is None else reshard(a, placement)), **k)

        return _retyped_call(placed, _axes(axes, AxisType.Auto), AxisType.Explicit, args, kwargs)

    return wrapped
