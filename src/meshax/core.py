"""Core types (as jax.core): abstract values, tracers, traces and jaxpr evaluation."""
from __future__ import annotations

from typing import Any

import numpy as np

from meshax._src.compat.top_level import ensure_compile_time_eval
from meshax._src.core import core as _core
from meshax._src.core.core import Trace, Tracer
from meshax._src.core.core import aval_of as get_aval
from meshax._src.core.jaxpr import Jaxpr, Literal, Var, eval_jaxpr
from meshax.extend.core import (ClosedJaxpr, Primitive, find_top_trace, get_opaque_trace_state, jaxpr_as_fun,
                                jaxprs_in_params, mapped_aval, subjaxprs, unmapped_aval, valid_jaxtype)

__all__ = ["AbstractValue", "Atom", "ClosedJaxpr", "Jaxpr", "Literal", "ParamDict", "Primitive", "ShapedArray", "Trace",
           "Tracer", "Var", "ensure_compile_time_eval", "eval_context", "eval_jaxpr", "find_top_trace",
           "get_aval", "get_opaque_trace_state", "jaxpr_as_fun", "jaxprs_in_params", "mapped_aval", "max_dim", "min_dim",
           "raise_to_shaped", "subjaxprs", "unmapped_aval", "valid_jaxtype"]



class _ShapedArrayType(type):
    """Makes `ShapedArray(...)` build meshax's own abstract value and `isinstance(x, ShapedArray)` test for it."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _core.ShapedArray)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _core.ShapedArray)

    def __call__(cls, shape: Any, dtype: Any, weak_type: bool = False, *, sharding: Any = None, vma: Any = frozenset(),
                 memory_space: Any = None, manual_type: Any = None) -> _core.ShapedArray:
        """An abstract value; `sharding` (a type's sharding, as `x.aval.sharding` gives it) keeps its Explicit
        mesh axes."""
        aval = _core.ShapedArray(tuple(shape), np.dtype(dtype), bool(weak_type), frozenset(vma))
        mesh = getattr(sharding, "mesh", None)
        spec = getattr(sharding, "spec", None)
        explicit = _explicit_axes(mesh, spec, len(aval.shape))
        return aval.update(explicit=explicit, mesh=mesh) if explicit else aval


def _explicit_axes(mesh: Any, spec: Any, ndim: int) -> tuple:
    """Per dimension, the Explicit mesh axes of `spec` (empty when none is Explicit)."""
    if mesh is None or spec is None or not hasattr(mesh, "axis_types"):
        return ()
    explicit_names = {name for name, kind in zip(mesh.axis_names, mesh.axis_types) if "Explicit" in str(kind)}
    entries = list(spec) + [None] * (ndim - len(spec))
    axes = tuple(tuple(a for a in ((e,) if isinstance(e, str) else (e or ())) if a in explicit_names)
                 for e in entries[:ndim])
    return axes if any(axes) else ()


class ShapedArray(metaclass=_ShapedArrayType):
    """An array's abstract value: shape, dtype, weak type (meshax's `meshax._src.core.core.ShapedArray`)."""


AbstractValue = ShapedArray  # meshax has one kind of abstract value
Atom = Var | Literal
ParamDict = dict
eval_context = ensure_compile_time_eval


def max_dim(d1: Any, d2: Any) -> Any:
    """The larger of two dimension sizes."""
    return max(d1, d2)


def min_dim(d1: Any, d2: Any) -> Any:
    """The smaller of two dimension sizes."""
    return min(d1, d2)


def raise_to_shaped(aval: ShapedArray, weak_type: bool | None = None) -> ShapedArray:
    """`aval` itself (every meshax abstract value is already shaped), optionally with another weak type."""
    return aval if weak_type is None else aval.update(weak_type=weak_type)


def __getattr__(name: str):
    """Names of jax.core that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.core", name)
