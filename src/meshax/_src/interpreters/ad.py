"""Automatic differentiation: forward mode (JVPTrace), linearization and transposition.

`jvp` runs a function in a JVPTrace whose tracers carry a primal and a tangent; each
primitive's rule in `jvp_rules` computes both by binding primitives in the parent trace.
`linearize` runs that JVPTrace on top of a PartialEvalTrace whose own tracers are the
tangents: primal work happens at once (in the parent), tangent work is staged into a
linear jaxpr. `backward_pass` transposes such a jaxpr with the rules in
`transpose_rules`, giving vjp and grad. Zero tangents and cotangents stay symbolic.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..arrays.placement import sharding_constraint
from ..sharding import placement_rules as rules
from ..sharding.shardings import NamedSharding, PartitionSpec
from ..core.core import (Primitive, ShapedArray, Trace, Tracer, aval_of, current_trace, define_primitive, manual_axes,
                         pvary_p, set_current_trace, vma_checked)
from ..core.dtypes import float0
from ..core.jaxpr import Jaxpr, Literal
from .staging import PartialEvalTrace, inline_rules
from ..core.dtypes import issubdtype

jvp_rules: dict[Primitive, Callable[..., Any]] = {}  # rule(primals, tangents, **params) -> (primal_out, tangent_out)
transpose_rules: dict[Primitive, Callable[..., Any]] = {}  # rule(ct, *args, **params) -> cts of args


# ---- symbolic zeros and linear-input markers --------------------------------------------------------------


class Zero:
    """A tangent or cotangent known to be zero (never materialised unless a rule needs it)."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"Zero({self.aval})"


class UndefinedPrimal:
    """A linear input of an equation being transposed: only its aval is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval


def is_undefined(x: Any) -> bool:
    return isinstance(x, UndefinedPrimal)


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """Integer and boolean values have float0 tangents, as in JAX."""
    if issubdtype(aval.dtype, np.inexact):
        return aval
    return aval.update(dtype=float0, weak_type=False)


def zeros(aval: ShapedArray) -> Any:
    """A materialised zero of `aval`: a broadcast host constant, laid out as its type says where that type
    names Explicit mesh axes (or unreduced/reduced ones), and marked varying over the manual axes that `aval`
    varies over (inside shard_map with check_vma: the zero tangent of a varying scan carry must vary too)."""
    value = np.broadcast_to(np.zeros((), aval.dtype), aval.shape)
    varying = tuple(sorted(aval.vma & frozenset(manual_axes()))) if aval.vma and vma_checked() else ()
    if varying:
        value = pvary_p.bind(value, axes=varying)
    if aval.mesh is None or not (any(aval.explicit) or aval.unreduced or aval.reduced):
        return value
    spec = PartitionSpec.from_entries(aval.explicit, unreduced=aval.unreduced, reduced=aval.reduced)
    return sharding_constraint.bind(value, sharding=NamedSharding(aval.mesh, spec))


def instantiate(t: Any) -> Any:
    return zeros(t.aval) if isinstance(t, Zero) else t


def _add_any(x: Any, y: Any, **_: Any) -> np.ndarray:
    return np.add(x, y)


_add_any.into = np.add  # as array_primitives' plain NumPy implementations
add_any_p = define_primitive("add_any", _add_any, lambda x, y, **_: x, rules.elementwise)


def add_tangents(x: Any, y: Any) -> Any:
    if isinstance(x, Zero):
        return y
    if isinstance(y, Zero):
        return x
    return add_any_p.bind(x, y)


# ---- forward mode ----------------------------------------------------------------------------------------------


class JVPTrace(Trace):
    """Tracers carry (primal, tangent); primitives run through their jvp rules in the parent trace."""

    def describe(self, tracer: Tracer) -> str:
        """GradTracer under grad/vjp/linearize (the tangent is being staged), JVPTracer under jvp."""
        primal, tangent = tracer.payload
        if isinstance(tangent, Zero) or isinstance(tangent, Tracer) and isinstance(tangent._trace, PartialEvalTrace):
            return f"GradTracer(primal={primal}, typeof(tangent)={tangent.aval.str_short()})"
        return f"JVPTracer(primal={primal}, tangent={tangent})"

    def pair(self, x: Any) -> tuple[Any, Any]:
        if self.is_own(x):
            return x.payload
        return x, Zero(tangent_aval(aval_of(x)))

    def new(self, primal: Any, tangent: Any) -> Any:
        if isinstance(tangent, Zero) and not issubdtype(aval_of(primal).dtype, np.inexact):
            return primal  # integer results carry no derivative
        return Tracer(self, aval_of(primal), (primal, tangent))

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        primals, tangents = zip(*(self.pair(a) for a in args)) if args else ((), ())
        if all(isinstance(t, Zero) for t in tangents):
            with set_current_trace(self.parent):
                return primitive.bind(*primals, **params)
        rule = jvp_rules.get(primitive)
        if rule is None:
            if primitive in inline_rules:
                with set_current_trace(self):
                    return inline_rules[primitive](*args, **params)
            raise NotImplementedError(f"Differentiation rule for '{primitive.name}' not implemented")
        with set_current_trace(self.parent):
            primal_out, tangent_out = rule(list(primals), list(tangents), **params)
        if primitive.multiple_results:
            return [self.new(p, t) for p, t in zip(primal_out, tangent_out)]
        return self.new(primal_out, tangent_out)

    def to_concrete_value(self, tracer: Tracer) -> Any:
        primal = tracer.payload[0]
        return primal.to_concrete_value() if isinstance(primal, Tracer) else primal


def jvp_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any], tangents: Sequence[Any]
             ) -> tuple[list[Any], list[Any]]:
    """Primal and tangent outputs of `fun` (flat lists in and out); tangents may be Zero."""
    trace = JVPTrace(current_trace())
    inputs = [Tracer(trace, aval_of(p), (p, t)) for p, t in zip(primals, tangents)]
    with set_current_trace(trace, finish=True):
        outputs = list(fun(*inputs))
        pairs = [trace.pair(o) for o in outputs]
    return [p for p, _ in pairs], [t for _, t in pairs]


# ---- linearize and transpose ---------------------------------------------------------------------------------


class LinearFunction:
    """The linear map from input tangents to output tangents, as a jaxpr whose consts are residuals."""

    def __init__(self, jaxpr: Jaxpr, in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray]) -> None:
        self.jaxpr = jaxpr
        self.in_avals = list(in_avals)
        self.out_avals = list(out_avals)

    def __call__(self, tangents: Sequence[Any]) -> list[Any]:
        from ..core.jaxpr import eval_jaxpr

        outs = eval_jaxpr(self.jaxpr, self.jaxpr.consts, [instantiate(t) for t in tangents])
        return [zeros(a) if isinstance(v, Literal) else o for o, v, a in zip(outs, self.jaxpr.outvars, self.out_avals)]

    def transpose(self, cotangents: Sequence[Any]) -> list[Any]:
        return backward_pass(self.jaxpr, self.jaxpr.consts, cotangents)


def linearize_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any]
                   ) -> tuple[list[Any], LinearFunction]:
    """Primal outputs of `fun` and its linearization at `primals` (flat lists)."""
    tangent_trace = PartialEvalTrace(current_trace())
    in_avals = [tangent_aval(aval_of(p)) for p in primals]
    tangents_in = [tangent_trace.new_arg(a) for a in in_avals]
    with set_current_trace(tangent_trace, finish=True):
        primals_out, tangents_out = jvp_flat(fun, primals, tangents_in)
        out_avals = [tangent_aval(aval_of(p)) for p in primals_out]
        outs = [tangent_trace.input_of(t) if not isinstance(t, Zero) else Literal(0, t.aval) for t in tangents_out]
        jaxpr = tangent_trace.to_jaxpr(tangents_in, [])
        jaxpr.outvars = outs
    return primals_out, LinearFunction(jaxpr, in_avals, out_avals)


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], cotangents: Sequence[Any]) -> list[Any]:
    """Cotangents of `jaxpr`'s inputs given its outputs' (transposing it equation by equation). Equations whose
    inputs are all known (recomputed primal values) are evaluated forward first."""
    known: dict[int, Any] = {v.id: c for v, c in zip(jaxpr.constvars, consts)}
    linear = {v.id for v in jaxpr.invars}
    for eq in jaxpr.equations:
        if any(isinstance(x, Literal) is False and x.id in linear for x in eq.inputs):
            linear.update(v.id for v in eq.outputs)
        else:
            values = eq.primitive.bind(*[_read(x, known) for x in eq.inputs], **eq.params)
            known.update(zip((v.id for v in eq.outputs), values if eq.primitive.multiple_results else [values]))
    cts: dict[int, Any] = {}

    def accumulate(var: Any, ct: Any) -> None:
        if isinstance(var, Literal) or var.id not in linear or isinstance(ct, Zero) or ct is None:
            return
        cts[var.id] = add_tangents(cts[var.id], ct) if var.id in cts else ct

    for var, ct in zip(jaxpr.outvars, cotangents):
        accumulate(var, ct)
    for eq in reversed(jaxpr.equations):
        if not any(v.id in linear for v in eq.outputs):
            continue
        outs = [_pop(cts, v) for v in eq.outputs]
        if all(isinstance(c, Zero) for c in outs):
            continue
        args = [UndefinedPrimal(x.aval) if not isinstance(x, Literal) and x.id in linear else _read(x, known)
                for x in eq.inputs]
        rule = transpose_rules.get(eq.primitive)
        if rule is None:
            raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for "
                                      f"'{eq.primitive.name}' not implemented")
        in_cts = rule(outs if eq.primitive.multiple_results else outs[0], *args, **eq.params)
        for x, ct in zip(eq.inputs, in_cts):
            accumulate(x, ct)
    return [_pop(cts, v) for v in jaxpr.invars]


def _pop(cts: dict[int, Any], var: Any) -> Any:
    ct = cts.pop(var.id, None)
    return Zero(var.aval) if ct is None else ct


def _read(x: Any, known: dict[int, Any]) -> Any:
    return x.value if isinstance(x, Literal) else known[x.id]


# ---- helpers for writing rules -------------------------------------------------------------------------------


def defjvp(primitive: Primitive, *contributions: Callable[..., Any] | None) -> None:
    """A jvp rule summing, over inputs with nonzero tangents, contribution_i(tangent_i, ans, *primals)."""

    def rule(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
        ans = primitive.bind(*primals, **params)
        out: Any = Zero(tangent_aval(aval_of(ans)))
        for t, contribution in zip(tangents, contributions):
            if contribution is not None and not isinstance(t, Zero):
                out = add_tangents(out, contribution(t, ans, *primals, **params))
        return ans, out

    jvp_rules[primitive] = rule


def defzero(primitive: Primitive) -> None:
    """Outputs with no derivative (integer results, comparisons): zero tangents."""

    def rule(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
        ans = primitive.bind(*primals, **params)
        if primitive.multiple_results:
            return ans, [Zero(tangent_aval(aval_of(a))) for a in ans]
        return ans, Zero(tangent_aval(aval_of(ans)))

    jvp_rules[primitive] = rule


def deflinear(primitive: Primitive, transpose: Callable[..., Any]) -> None:
    """A primitive linear in all its inputs: its jvp applies it to the tangents."""

    def rule(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
        ans = primitive.bind(*primals, **params)
        return ans, primitive.bind(*map(instantiate, tangents), **params)

    jvp_rules[primitive] = rule
    transpose_rules[primitive] = transpose


transpose_rules[add_any_p] = lambda ct, x, y: [ct, ct]
jvp_rules[add_any_p] = lambda primals, tangents: (add_any_p.bind(*primals),
                                                  add_tangents(*tangents))
