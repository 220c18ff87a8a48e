"""Sharding in types (JAX 0.10) for Explicit mesh axes: which axes split each dimension of a value's type.

An Array on a mesh with Explicit axes has them in its aval (`ShapedArray.explicit`, printed float32[8@X,4]), and
so do the tracers of `jit`, `grad` and `vmap` made from it. Abstract evaluation types each primitive's outputs
(`explicit_rules.py`: a rule per primitive family, else the primitive's sharding rule read on the Explicit axes),
raising ShardingTypeError where JAX's typing is ambiguous; `out_sharding=` decides those. Eager results are laid
out as their types say (`target_spec`), so eager and jit agree. `auto_axes`/`explicit_axes` retype mesh axes for
the code they wrap (`retyped_axes`).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..core import core
from ..core.core import Primitive, ShapedArray, sharding_rules
from . import aval_sharding  # noqa: F401  (installs typeof(x).sharding and .manual_axis_type)
from .explicit_rules import RULES as explicit_rules, broadcasting, partial_sum_types
from .placement_rules import elementwise
from .mesh import AxisType, Mesh, current_mesh, explicit_names, retyped_axes  # noqa: F401  (for their users)
from .placement_rules import Spec
from .shardings import NamedSharding, PartitionSpec, Sharding


def entries(spec: PartitionSpec, ndim: int, names: frozenset) -> Spec:
    """The Explicit axes of each dimension in `spec` (padded to `ndim` dimensions)."""
    normalized = list(spec.normalized())[:ndim]
    return tuple(tuple(a for a in entry if a in names) for entry in normalized) + ((),) * (ndim - len(normalized))


def typed(aval: ShapedArray, spec: Spec, mesh: Any) -> ShapedArray:
    """`aval` with the Explicit axes `spec` in its type (and their mesh, when it has Explicit axes)."""
    names = explicit_names(mesh)
    if not names:
        return aval.update(explicit=(), mesh=None) if aval.mesh is not None or aval.explicit else aval
    spec = tuple(tuple(a for a in e if a in names) for e in spec)
    return aval.update(explicit=spec if any(spec) else (), mesh=mesh)


def sharding_aval(aval: ShapedArray, sharding: Any) -> ShapedArray:
    """The type of a value of shape `aval` laid out as `sharding` (with its unreduced and reduced axes)."""
    named = isinstance(sharding, NamedSharding)
    names = explicit_names(sharding.mesh) if named else frozenset()
    out = typed(aval, (), None) if not names else typed(aval, entries(sharding.spec, aval.ndim, names), sharding.mesh)
    unreduced, reduced = (sharding.spec.unreduced, sharding.spec.reduced) if named else (frozenset(), frozenset())
    if (unreduced, reduced) != (out.unreduced, out.reduced):
        out = out.update(unreduced=unreduced, reduced=reduced, mesh=out.mesh or sharding.mesh)
    return out


def spec_of(aval: ShapedArray) -> Spec:
    """The Explicit axes of each dimension of `aval` (empty entries when it has none)."""
    if not aval.explicit:
        return ((),) * aval.ndim
    names = explicit_names(aval.mesh)
    return tuple(tuple(a for a in e if a in names) for e in aval.explicit)


def _param_mesh(params: dict[str, Any]) -> Any:
    for key in ("sharding", "out_sharding"):
        value = params.get(key)
        if isinstance(value, NamedSharding):
            return value.mesh
    return current_mesh() if params.get("out_sharding") is not None else None


def type_outputs(primitive: Primitive, avals: Sequence[ShapedArray], outs: list[ShapedArray],
                 params: dict[str, Any]) -> list[ShapedArray]:
    """The outputs `outs` of `primitive` on `avals`, with the Explicit axes that split them and the axes over which
    they are unreduced (partial sums) or reduced."""
    typed_outs = _split_outputs(primitive, avals, outs, params)
    target = params.get("sharding", params.get("out_sharding"))
    spec = target.spec if isinstance(target, NamedSharding) else target if isinstance(target, PartitionSpec) else None
    if spec is None and not any(a.unreduced or a.reduced for a in avals):
        return typed_outs
    if spec is None and (primitive.name not in explicit_rules and primitive not in sharding_rules
                         or any(o.unreduced or o.reduced for o in outs)):
        return typed_outs  # call-like and fused primitives: their outputs' types come from their bodies
    return partial_sum_types(primitive.name, avals, typed_outs, spec)


def _split_outputs(primitive: Primitive, avals: Sequence[ShapedArray], outs: list[ShapedArray],
                   params: dict[str, Any]) -> list[ShapedArray]:
    """The outputs `outs` of `primitive` on `avals`, with the Explicit axes that split them."""
    mesh = _param_mesh(params) or next((a.mesh for a in avals if a.mesh is not None), None)
    names = explicit_names(mesh)
    if not names:
        return [typed(o, (), None) for o in outs]
    target = params.get("sharding", params.get("out_sharding"))
    if isinstance(target, Sharding):
        return [sharding_aval(o, target) for o in outs]
    if isinstance(target, PartitionSpec):
        return [typed(o, entries(target, o.ndim, names), mesh) for o in outs]
    specs = [spec_of(a) for a in avals]
    rule = explicit_rules.get(primitive.name) or (broadcasting if sharding_rules.get(primitive) is elementwise else None)
    if rule is not None:
        out_specs = rule(primitive.name, specs, avals, outs, mesh, **params)
    elif primitive in sharding_rules:
        out_specs = _from_sharding_rule(primitive, specs, avals, outs, mesh, params)
    else:  # call-like primitives: their outputs' types come from their bodies
        return outs
    return [typed(o, s, mesh) for o, s in zip(outs, out_specs)]


def _from_sharding_rule(primitive: Primitive, specs: list[Spec], avals: Sequence[ShapedArray],
                        outs: list[ShapedArray], mesh: Mesh, params: dict[str, Any]) -> list[Spec]:
    """Where the primitive's (eager) sharding rule puts its outputs, read on the Explicit axes."""
    layout = sharding_rules[primitive](specs, avals, mesh_shape=dict(mesh.shape), out_ndims=[o.ndim for o in outs],
                                       **params)
    return list(layout.result_specs if layout.result_specs is not None else layout.out_specs)


def target_spec(aval: ShapedArray, current: Spec, names: frozenset) -> Spec:
    """Where an eager result of type `aval` goes on a mesh whose Explicit axes are `names`: its type's axes, and
    the Auto axes it was computed with where its type leaves them free."""
    typed_spec = spec_of(aval) if aval.explicit else ((),) * aval.ndim
    used = {a for e in typed_spec for a in e}
    free = [tuple(a for a in e if a not in names and a not in used) for e in current]
    return tuple(t + f for t, f in zip(typed_spec, free))


def array_aval(shape: tuple[int, ...], dtype: Any, weak_type: bool, sharding: Any) -> ShapedArray:
    """The type of an Array: on a mesh with Explicit axes, with the ones splitting each dimension."""
    aval = ShapedArray(shape, dtype, weak_type)
    return sharding_aval(aval, sharding) if isinstance(sharding, NamedSharding) else aval


core.explicit_typing[:] = [type_outputs]
