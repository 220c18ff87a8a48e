"""Primitives, jaxprs and trace queries (as jax.extend.core), on meshax's one trace mechanism.

A `Primitive` made here is a meshax core primitive: `def_impl` gives the function every interpreter expands it
into when it has no rule of its own (so it runs eagerly, under jit, in shard_map and differentiates/vmaps
through its implementation), `def_abstract_eval` its output types, and the jvp, transpose and batching rules go
into the tables `meshax.interpreters.{ad,batching}` expose.
"""
from __future__ import annotations

from collections.abc import Set
from typing import Any, Callable, Sequence

import numpy as np

from meshax._src.core import core as _core
from meshax._src.core.core import ShapedArray, Tracer, aval_of
from meshax._src.interpreters.staging import inline_rules
from meshax._src.core.jaxpr import ClosedJaxpr, Equation as JaxprEqn, Jaxpr, Literal, Var, eval_jaxpr as _eval_jaxpr

__all__ = ["ClosedJaxpr", "Effect", "Effects", "Jaxpr", "JaxprEqn", "Literal", "Primitive", "Var", "find_top_trace",
           "get_opaque_trace_state", "jaxpr_as_fun", "jaxprs_in_params", "mapped_aval", "no_effects",
           "primal_dtype_to_tangent_dtype", "subjaxprs", "unmapped_aval", "valid_jaxtype"]


class Effect:
    """The base class of a primitive's side effects (libraries subclass it to name theirs); meshax runs every
    effect in program order, so it tracks no effect types."""


Effects = Set[Effect]
no_effects: Effects = frozenset()


class _PrimitiveType(type):
    """`isinstance(lax.add_p, Primitive)` holds for every meshax primitive, as for JAX's."""

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _core.Primitive) if cls is Primitive else super().__instancecheck__(obj)


class Primitive(_core.Primitive, metaclass=_PrimitiveType):
    """A user-defined primitive (as jax.extend.core.Primitive): `p = Primitive("name"); p.def_impl(f);
    p.def_abstract_eval(g); p.bind(*args, **params)`; set `p.multiple_results = True` before binding for a
    primitive with several outputs."""

    def __init__(self, name: str) -> None:
        super().__init__(name)

    def def_impl(self, impl: Callable[..., Any]) -> Callable[..., Any]:
        """`impl(*args, **params)`: the primitive's meaning in terms of other operations."""
        inline_rules[self] = impl
        return impl

    def def_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """`rule(*avals, **params)`: the output aval (a list of them for multiple results)."""
        _core.abstract_eval_rules[self] = rule
        return rule

    def def_effectful_abstract_eval(self, rule: Callable[..., Any]) -> Callable[..., Any]:
        """`rule(*avals, **params) -> (avals, effects)`: meshax runs effects in program order, so they are dropped."""
        _core.abstract_eval_rules[self] = lambda *avals, **params: rule(*avals, **params)[0]
        return rule

    def impl(self, *args: Any, **params: Any) -> Any:
        try:
            impl = inline_rules[self]
        except KeyError:
            raise NotImplementedError(f"Evaluation rule for '{self.name}' not implemented") from None
        return impl(*args, **params)

    def abstract_eval(self, *avals: Any, **params: Any) -> Any:
        return _core.abstract_eval_rules[self](*avals, **params)


def jaxprs_in_params(params: dict[str, Any]) -> list[Jaxpr]:
    """The jaxprs among an equation's parameters (the bodies of call-like primitives)."""
    found: list[Jaxpr] = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, Jaxpr):
                found.append(item)
    return found


def subjaxprs(jaxpr: Jaxpr) -> list[Jaxpr]:
    """The jaxprs directly inside `jaxpr`'s equations."""
    return [sub for eq in jaxpr.equations for sub in jaxprs_in_params(eq.params)]


def jaxpr_as_fun(closed_jaxpr: ClosedJaxpr, *args: Any) -> Any:
    """The function a closed jaxpr computes (flat arguments to a list of outputs)."""
    jaxpr = closed_jaxpr.jaxpr
    if args:
        return _eval_jaxpr(jaxpr, jaxpr.consts, args)
    return lambda *xs: _eval_jaxpr(jaxpr, jaxpr.consts, xs)


class _OpaqueTraceState:
    """The current trace, comparable by identity and nothing else."""

    def __init__(self, trace: _core.Trace) -> None:
        self._trace = trace

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _OpaqueTraceState) and other._trace is self._trace

    def __hash__(self) -> int:
        return id(self._trace)


def get_opaque_trace_state(convention: str | None = None) -> _OpaqueTraceState:
    """An opaque token of the current trace: equal tokens mean the same transformation context."""
    return _OpaqueTraceState(_core.current_trace())


def find_top_trace(xs: Sequence[Any]) -> _core.Trace:
    """The innermost trace among those of the tracers in `xs` (the current trace when there are none)."""
    traces = [x._trace for x in xs if isinstance(x, Tracer)]
    if not traces:
        return _core.eager_trace()
    return max(traces, key=lambda trace: sum(1 for _ in trace.ancestors()))


def mapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """`aval` without its mapped dimension `axis` (of `size`)."""
    if axis is None:
        return aval
    if aval.shape[axis] != size:
        raise ValueError(f"mapped axis {axis} of {aval} has size {aval.shape[axis]}, not {size}")
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size: int, axis: int | None, aval: ShapedArray, explicit_mesh_axis: Any = None) -> ShapedArray:
    """`aval` with a dimension of `size` inserted at `axis`."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


def primal_dtype_to_tangent_dtype(primal_dtype: Any) -> np.dtype:
    """The dtype of tangents of values of `primal_dtype`: float0 for integers and booleans."""
    from meshax._src.core.dtypes import float0, issubdtype

    dtype = np.dtype(primal_dtype)
    return dtype if issubdtype(dtype, np.inexact) else np.dtype(float0)


def valid_jaxtype(x: Any) -> bool:
    """Whether `x` can be an array value (an Array, tracer, NumPy value or Python scalar)."""
    try:
        aval_of(x)
    except (TypeError, ValueError):
        return False
    return True


def __getattr__(name: str):
    """Names of jax.extend.core that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.extend.core", name)
