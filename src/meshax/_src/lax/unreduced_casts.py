"""Unreduced and reduced values inside shard_map (JAX 0.10's manual partial sums), and the casts between them.

Over a manual mesh axis a value is varying (each device its own), invariant (the same everywhere), unreduced
(each device holds a partial sum; the value is their sum) or reduced (the same everywhere, its cotangent
unreduced). The casts change only the type, never the buffers, except `unreduced_psum`, which adds the partial
sums up. They transpose into one another: varying->unreduced with reduced->varying, invariant->reduced with
unreduced->invariant.
"""
from __future__ import annotations

from typing import Any, Callable

from ..arrays.collectives import allreduce_devices
from ..core.core import (Primitive, ShapedArray, abstract_eval, abstract_eval_rules, aval_of, axis_mesh, axis_size,
                         manual_axes, mesh_ordered, pvary_p, reduced_vary_cast_p, vma_checked, vma_rules)
from ..interpreters.ad import deflinear
from ..interpreters.shard_map import DeviceTrace, device_rules, same_values


def _cast(name: str, abstract: Callable[..., ShapedArray], vma: Callable[..., frozenset]) -> Primitive:
    primitive = Primitive(name)
    abstract_eval_rules[primitive] = abstract
    vma_rules[primitive] = lambda x, *, axes: vma(x, axes) & frozenset(manual_axes()) if vma_checked() \
        else frozenset()
    device_rules[primitive] = same_values(primitive)
    return primitive


def _with_mesh(x: ShapedArray, **changes: Any) -> ShapedArray:
    """`x` with its unreduced/reduced axes changed; typed on the shard_map's mesh, whose rules then apply."""
    return x.update(mesh=x.mesh or axis_mesh(), **changes)


def _vary_unreduced_eval(x: ShapedArray, *, axes: tuple[str, ...]) -> ShapedArray:
    axis_size(axes, "vary_unreduced_cast")
    named = frozenset(axes)
    if not x.vma & named:
        raise ValueError("vary_unreduced_cast is a Varying->Unreduced collective. This means that the axis names "
                         "mentioned in `axes` passed to `vary_unreduced_cast` must be present in "
                         f"`jax.typeof(x).mat.varying`. Got axes={axes} and jax.typeof(x).mat.varying={set(x.vma)}")
    if x.unreduced & named:
        raise ValueError(f"vary_unreduced_cast input cannot be unreduced across the axis_name provided. Got "
                         f"x={x.str_short()} and axis_name={axes}")
    return _with_mesh(x, unreduced=x.unreduced | named)


vary_unreduced_cast_p = _cast("vary_unreduced_cast_p", _vary_unreduced_eval, lambda x, axes: x.vma - frozenset(axes))


def _preduced_eval(x: ShapedArray, *, axes: tuple[str, ...]) -> ShapedArray:
    axis_size(axes, "preduced")
    named = frozenset(axes)
    if x.vma & named:
        raise ValueError("preduced is a Invariant->Reduced collective. This means that the axis names mentioned in "
                         "`axes` passed to `preduced` must not be present in `jax.typeof(inp).mat.varying`. Got "
                         f"axes={axes} and jax.typeof(inp).mat.varying={set(x.vma)}")
    if x.reduced & named:
        raise ValueError(f"preduced input cannot be reduced across the axis_name provided. Got x={x.str_short()} "
                         f"and axis_name={axes}")
    return _with_mesh(x, reduced=x.reduced | named)


preduced_p = _cast("preduced", _preduced_eval, lambda x, axes: x.vma)


def _unreduced_psum_eval(x: ShapedArray, *, axes: tuple[str, ...]) -> ShapedArray:
    axis_size(axes, "psum")
    if not x.unreduced & frozenset(axes):
        raise ValueError("unreduced_psum is a Unreduced -> Invariant collective. This means that the "
                         f"axes={axes} passed to `unreduced_psum` must be present in "
                         f"jax.typeof(x).mat.unreduced={set(x.unreduced)}")
    return x.update(unreduced=x.unreduced - frozenset(axes))


def _unreduced_psum_device(trace: DeviceTrace, x: Any, *, axes: tuple[str, ...]) -> Any:
    x = trace.lift(x)
    aval = abstract_eval(unreduced_psum_p, [x.aval], {"axes": axes})[0]
    return trace.new(aval, allreduce_devices(trace.mesh, axes, x.payload, "sum"))


unreduced_psum_p = _cast("unreduced_psum", _unreduced_psum_eval, lambda x, axes: x.vma)
device_rules[unreduced_psum_p] = _unreduced_psum_device

deflinear(vary_unreduced_cast_p, lambda ct, x, *, axes: [reduced_vary_cast_p.bind(ct, axes=axes)])
deflinear(reduced_vary_cast_p, lambda ct, x, *, axes: [vary_unreduced_cast_p.bind(ct, axes=axes)])
deflinear(preduced_p, lambda ct, x, *, axes: [unreduced_psum_p.bind(ct, axes=axes)])
deflinear(unreduced_psum_p, lambda ct, x, *, axes: [preduced_p.bind(ct, axes=axes)])


def _state(aval: ShapedArray, axes: tuple[str, ...]) -> str:
    """Whether `aval` is varying, unreduced, reduced or invariant over `axes` (one of them for all)."""
    states = {"varying" if a in aval.vma else "unreduced" if a in aval.unreduced else
              "reduced" if a in aval.reduced else "invarying" for a in axes}
    if len(states) > 1:
        raise ValueError("jax.lax.pcast can only accept axis_name which corresponds to one of varying, unreduced, "
                         f"reduced or invarying state of the input. Got input type: {aval}, axes: {axes} and input "
                         f"state: {states}")
    return states.pop()


_PCASTS = {("varying", "unreduced"): vary_unreduced_cast_p, ("reduced", "varying"): reduced_vary_cast_p,
           ("invarying", "reduced"): preduced_p}
PCAST_TARGETS = ("unreduced", "reduced", "varying")


def pcast_leaf(x: Any, axes: tuple[str, ...], to: str) -> Any:
    """One value cast as `jax.lax.pcast(x, axes, to=to)` does."""
    source = _state(aval_of(x), axes)
    if (source, to) == ("invarying", "varying"):
        return pvary_p.bind(x, axes=axes)
    primitive = _PCASTS.get((source, to))
    if primitive is None:
        raise ValueError(f"Unsupported pcast from={source}, to={to!r}")
    return primitive.bind(x, axes=mesh_ordered(axes))


def psum_of_unreduced(x: Any, axes: tuple[str, ...]) -> Any:
    """psum of a value unreduced over `axes`: the sum of its partial sums (JAX's unreduced_psum), else None."""
    aval = aval_of(x)
    if not aval.unreduced & frozenset(axes):
        return None
    if _state(aval, axes) != "unreduced":
        raise ValueError(f"jax.lax.psum of a value unreduced over {sorted(aval.unreduced)} names axes {axes}; "
                         "psum it over exactly the axes it is unreduced over.")
    return unreduced_psum_p.bind(x, axes=mesh_ordered(axes))


def with_partial_sums(x: Any, unreduced: frozenset, reduced: frozenset) -> Any:
    """`x` cast to be unreduced and reduced over (at least) the given manual axes, as a shard_map output or a
    cotangent must be: a varying (or invariant: pvary first) value becomes unreduced, an invariant one reduced."""
    aval = aval_of(x)
    missing = unreduced - aval.unreduced
    if missing:
        invariant = missing - aval.vma
        if invariant:
            x = pvary_p.bind(x, axes=mesh_ordered(invariant))
        x = vary_unreduced_cast_p.bind(x, axes=mesh_ordered(missing))
    missing = reduced - aval_of(x).reduced - aval_of(x).vma
    return preduced_p.bind(x, axes=mesh_ordered(missing)) if missing else x
