"""Staging: trace a Python function into a Jaxpr (jit, make_jaxpr, shard_map bodies).

Values the function closes over (arrays, tracers of enclosing traces) become constvars;
small scalars become Literals. `PartialEvalTrace` stages only what depends on its own
(unknown) inputs and binds everything else in its parent at once: linearize uses it to
keep the tangent program as a jaxpr while primal values are computed.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import Primitive, ShapedArray, Trace, Tracer, abstract_eval, aval_of, current_trace, set_current_trace
from ..core.jaxpr import ClosedJaxpr, Equation, Jaxpr, Literal, Var

inline_rules: dict[Primitive, Callable[..., Any]] = {}  # call-like primitives that other traces expand in place
staging_rules: dict[Primitive, Callable[..., Any]] = {}  # rule(trace, *args, **params): staged in their own way
stage_observers: list[Callable[[Equation], None]] = []  # diagnostics (print_saved_residuals) seeing each equation


class _CompileTimeEval(threading.local):
    def __init__(self) -> None:
        self.active = False  # inside ensure_compile_time_eval: operations on concrete values are not staged


compile_time_eval = _CompileTimeEval()


def is_literal(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex, np.generic)) or (isinstance(x, np.ndarray) and x.ndim == 0)


class StagingTrace(Trace):
    """Records primitives into a Jaxpr instead of running them."""

    def __init__(self, parent: Trace | None) -> None:
        super().__init__(parent)
        self.equations: list[Equation] = []
        self.const_vars: dict[int, tuple[Var, Any]] = {}

    def new_arg(self, aval: ShapedArray) -> Tracer:
        return Tracer(self, aval, Var(aval))

    def describe(self, tracer: Tracer) -> str:
        return f"JitTracer({tracer.aval})"

    def input_of(self, x: Any) -> Any:
        """An input of an equation: our own tracer's var, a Literal scalar, or a captured value's constvar."""
        if self.is_own(x):
            return x.payload
        if is_literal(x):
            return Literal(x, aval_of(x))
        key = id(x)
        if key not in self.const_vars:
            self.const_vars[key] = (Var(aval_of(x)), x)
        return self.const_vars[key][0]

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        if compile_time_eval.active and not any(self.is_own(a) for a in args):
            with set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        rule = staging_rules.get(primitive)
        if rule is not None:
            return rule(self, *args, **params)
        return self.stage(primitive, args, params)

    def stage(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any],
              out_avals: Sequence[ShapedArray] | None = None) -> Any:
        inputs = [self.input_of(a) for a in args]
        if out_avals is None:
            out_avals = abstract_eval(primitive, [aval_of(a) for a in args], params)
        outs = [Tracer(self, aval, Var(aval)) for aval in out_avals]
        self.equations.append(Equation(primitive, inputs, [t.payload for t in outs], dict(params)))
        for observer in stage_observers:
            observer(self.equations[-1])
        return outs if primitive.multiple_results else outs[0]

    def to_jaxpr(self, inputs: Sequence[Tracer], outputs: Sequence[Any]) -> Jaxpr:
        outvars = [self.input_of(o) for o in outputs]
        constvars = [var for var, _ in self.const_vars.values()]
        consts = [value for _, value in self.const_vars.values()]
        return Jaxpr(constvars, [t.payload for t in inputs], self.equations, outvars, consts)


class PartialEvalTrace(StagingTrace):
    """Stages what depends on its own (unknown) tracers; binds the rest in its parent right away."""

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        if not any(self.is_own(a) for a in args):
            with set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        rule = partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, *args, **params)
        if primitive in inline_rules:
            with set_current_trace(self):
                return inline_rules[primitive](*args, **params)
        return self.stage(primitive, args, params)


partial_eval_rules: dict[Primitive, Callable[..., Any]] = {}


def trace_to_jaxpr(fun: Callable[..., Sequence[Any]], avals: Sequence[ShapedArray]) -> tuple[Jaxpr, list[Any]]:
    """Trace `fun` (flat arguments to a flat list of outputs) on abstract inputs into a Jaxpr whose consts are
    the values it captured; also returns the raw outputs (to inspect non-array results)."""
    trace = StagingTrace(current_trace())
    inputs = [trace.new_arg(aval) for aval in avals]
    with set_current_trace(trace, finish=True):
        outputs = list(fun(*inputs))
        jaxpr = trace.to_jaxpr(inputs, outputs)
    return jaxpr, outputs


def consts_as_inputs(jaxpr: Jaxpr) -> Jaxpr:
    """The same program with its constvars turned into leading inputs (closure conversion for call primitives)."""
    return Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.equations, jaxpr.outvars, [])


def make_jaxpr(fun: Callable[..., Any], static_argnums: Any = ()) -> Callable[..., Any]:
    """A function that traces `fun` on its arguments and returns the ClosedJaxpr (as jax.make_jaxpr)."""
    from ..tree.tree_util import tree_flatten, tree_unflatten

    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)

    def traced(*args: Any, **kwargs: Any) -> Any:
        dynamic = [a for i, a in enumerate(args) if i not in static]
        leaves, structure = tree_flatten((dynamic, kwargs))
        out_tree = []

        def flat(*xs: Any) -> list[Any]:
            dyn, kw = tree_unflatten(structure, list(xs))
            it = iter(dyn)
            full = [a if i in static else next(it) for i, a in enumerate(args)]
            out_leaves, tree = tree_flatten(fun(*full, **kw))
            out_tree.append(tree)
            return out_leaves

        jaxpr, _ = trace_to_jaxpr(flat, [aval_of(x) for x in leaves])
        return ClosedJaxpr(jaxpr)

    return traced
