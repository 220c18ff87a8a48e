"""Core types (as jax.core): abstract values, tracers, traces and jaxpr evaluation."""
from __future__ import annotations

from typing import Any

from meshax._src.api_extra import ensure_compile_time_eval
from meshax._src.core import ShapedArray, Trace, Tracer
from meshax._src.core import aval_of as get_aval
from meshax._src.jaxpr import Jaxpr, Literal, Var, eval_jaxpr
from meshax.extend.core import (ClosedJaxpr, Primitive, find_top_trace, get_opaque_trace_state, jaxpr_as_fun,
                                jaxprs_in_params, mapped_aval, subjaxprs, unmapped_aval, valid_jaxtype)

__all__ = ["AbstractValue", "Atom", "ClosedJaxpr", "Jaxpr", "Literal", "ParamDict", "Primitive", "ShapedArray", "Trace",
           "Tracer", "Value", "Var", "ensure_compile_time_eval", "eval_context", "eval_jaxpr", "find_top_trace",
           "get_aval", "get_opaque_trace_state", "jaxpr_as_fun", "jaxprs_in_params", "mapped_aval",
           "raise_to_shaped", "subjaxprs", "unmapped_aval", "valid_jaxtype"]

AbstractValue = ShapedArray  # meshax has one kind of abstract value
Atom = Var | Literal
Value = Any
ParamDict = dict
eval_context = ensure_compile_time_eval


def raise_to_shaped(aval: ShapedArray, weak_type: bool | None = None) -> ShapedArray:
    """`aval` itself (every meshax abstract value is already shaped), optionally with another weak type."""
    return aval if weak_type is None else aval.update(weak_type=weak_type)
