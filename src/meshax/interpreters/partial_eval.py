"""Partial evaluation (as jax.interpreters.partial_eval): run what is known now, stage the rest into a jaxpr.

`trace_to_jaxpr_nounits(fun, pvals)` runs `fun` (a linear_util.WrappedFun of flat arguments) where each input is
a `PartialVal`: known inputs are values, unknown ones only an aval. Operations on known values run at once;
those depending on unknown inputs are staged (meshax's PartialEvalTrace, the one linearize uses)."""
from __future__ import annotations

from typing import Any, Sequence

from meshax._src.core.core import ShapedArray, Tracer, aval_of, current_trace, set_current_trace
from meshax._src.interpreters.staging import PartialEvalTrace, partial_eval_rules, trace_to_jaxpr
from meshax._src.core.jaxpr import Jaxpr

__all__ = ["DynamicJaxprTracer", "JaxprTracer", "PartialVal", "custom_partial_eval_rules", "trace_to_jaxpr_dynamic",
           "trace_to_jaxpr_nounits"]

JaxprTracer = DynamicJaxprTracer = Tracer  # meshax has one Tracer class
custom_partial_eval_rules = partial_eval_rules


class PartialVal(tuple):
    """(aval, None) for an unknown value, (None, value) for a known one."""

    def __new__(cls, xs: tuple[Any, Any]) -> "PartialVal":
        pv, const = xs
        if (pv is None) == (const is None) and not (pv is None and const is None):
            raise ValueError("a PartialVal is either known (None, value) or unknown (aval, None)")
        return tuple.__new__(cls, xs)

    @classmethod
    def known(cls, const: Any) -> "PartialVal":
        return cls((None, const))

    @classmethod
    def unknown(cls, aval: ShapedArray) -> "PartialVal":
        return cls((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self) -> Any:
        return self[1] if self[0] is None else None

    def get_aval(self) -> ShapedArray:
        return aval_of(self[1]) if self[0] is None else self[0]


def _call(fun: Any, args: Sequence[Any]) -> list[Any]:
    call = getattr(fun, "call_wrapped", fun)
    return list(call(*args))


def trace_to_jaxpr_nounits(fun: Any, pvals: Sequence[PartialVal], instantiate: bool | Sequence[bool] = False
                           ) -> tuple[Jaxpr, list[PartialVal], list[Any]]:
    """The jaxpr of what depends on the unknown inputs, the outputs as PartialVals, and the jaxpr's consts."""
    trace = PartialEvalTrace(current_trace())
    args = [pv.get_known() if pv.is_known() else trace.new_arg(pv.get_aval()) for pv in pvals]
    with set_current_trace(trace, finish=True):
        outs = _call(fun, args)
        forced = instantiate if isinstance(instantiate, (list, tuple)) else [instantiate] * len(outs)
        staged = []
        out_pvals = []
        for out, force in zip(outs, forced):
            if isinstance(out, Tracer) and trace.is_own(out) or force:
                staged.append(out)
                out_pvals.append(PartialVal.unknown(aval_of(out)))
            else:
                out_pvals.append(PartialVal.known(out))
        jaxpr = trace.to_jaxpr([a for a in args if isinstance(a, Tracer) and trace.is_own(a)], staged)
    return jaxpr, out_pvals, list(jaxpr.consts)


def trace_to_jaxpr_dynamic(fun: Any, in_avals: Sequence[ShapedArray], *_: Any, **__: Any
                           ) -> tuple[Jaxpr, list[ShapedArray], list[Any]]:
    """The jaxpr of `fun` on abstract inputs, its output avals and consts."""
    jaxpr, _outs = trace_to_jaxpr(lambda *xs: _call(fun, xs), list(in_avals))
    return jaxpr, [aval_of(v) for v in jaxpr.outvars], list(jaxpr.consts)


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool], instantiate: bool = False) -> tuple[Jaxpr, list[bool]]:
    """`jaxpr` without the equations none of the used outputs needs, and which inputs are still used."""
    outvars = [v for v, used in zip(jaxpr.outvars, used_outputs) if used]
    live = {v.id for v in outvars if hasattr(v, "id")}
    kept = []
    for eq in reversed(jaxpr.equations):
        if any(v.id in live for v in eq.outputs):
            kept.append(eq)
            live.update(x.id for x in eq.inputs if hasattr(x, "id"))
    used_inputs = [instantiate or v.id in live for v in jaxpr.invars]
    invars = [v for v, used in zip(jaxpr.invars, used_inputs) if used]
    return Jaxpr(jaxpr.constvars, invars, kept[::-1], outvars, jaxpr.consts), used_inputs


def __getattr__(name: str):
    """Names of jax.interpreters.partial_eval that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.interpreters.partial_eval", name)
