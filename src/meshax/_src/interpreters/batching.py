"""Batching (vmap): tracers carry a value with one extra, batched dimension and its position.

Each primitive's rule in `batching_rules` maps batched operands to a batched result by
binding primitives in the parent trace. A primitive without a rule is evaluated once per
batch element and the results stacked (correct, if slower), so every primitive can be
vmapped. Call-like primitives (jit, control flow, custom derivatives) are expanded in place.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Sequence

from ..core.core import AxisFrame, Primitive, Trace, Tracer, aval_of, extend_axis_env, set_current_trace
from .staging import inline_rules

batching_rules: dict[Primitive, Callable[..., Any]] = {}  # rule(values, dims, **params) -> (out, out_dims)
# collectives over the vmapped axis itself: rule(size, axis_name, values, dims, **params) -> (out, out_dim)
named_axis_rules: dict[Primitive, Callable[..., Any]] = {}
# primitives whose batching depends on vmap's spmd_axis_name: rule(spmd_axis_name, values, dims, **params)
spmd_rules: dict[Primitive, Callable[..., Any]] = {}
not_mapped = None
_fallback: list[Callable[[Primitive], Callable[..., Any]]] = []  # installed by lax/batch_dims.py


def set_fallback_rule(make_rule: Callable[[Primitive], Callable[..., Any]]) -> None:
    """Install how a primitive without a batching rule is batched: lax/batch_dims.py runs it once per batch element
    with the structural primitives, which this interpreter does not know."""
    _fallback[:] = [make_rule]


def _fallback_rule(primitive: Primitive) -> Callable[..., Any]:
    assert _fallback, "meshax._src.primitives.batch_dims must be imported before batching"
    return _fallback[0](primitive)


class BatchTrace(Trace):
    """Tracers hold (value, dim): `value` has the batch dimension at `dim` (None: not batched)."""

    def __init__(self, parent: Trace | None, axis_name: Any, size: int, spmd_axis_name: tuple = ()) -> None:
        super().__init__(parent)
        self.axis_name = axis_name
        self.size = size
        self.spmd_axis_name = spmd_axis_name  # mesh axes that split the batch dimension of sharding constraints

    def describe(self, tracer: Tracer) -> str:
        return f"VmapTracer(aval={tracer.aval}, batched={aval_of(tracer.payload[0])})"

    def pair(self, x: Any) -> tuple[Any, int | None]:
        return x.payload if self.is_own(x) else (x, not_mapped)

    def new(self, value: Any, dim: int | None) -> Any:
        if dim is None:
            return value
        aval = aval_of(value)
        explicit = tuple(e for d, e in enumerate(aval.explicit) if d != dim)
        logical = aval.update(shape=tuple(n for d, n in enumerate(aval.shape) if d != dim),
                              explicit=explicit if any(explicit) else ())
        return Tracer(self, logical, (value, dim))

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        values, dims = zip(*(self.pair(a) for a in args)) if args else ((), ())
        if self.axis_name is not None and self.axis_name in params.get("axes", ()) and primitive in named_axis_rules:
            with set_current_trace(self.parent):
                out, out_dim = named_axis_rules[primitive](self.size, self.axis_name, list(values), list(dims),
                                                           **params)
            return self.new(out, out_dim)
        if all(d is None for d in dims):
            with set_current_trace(self.parent):
                return primitive.bind(*values, **params)
        if primitive in inline_rules and primitive not in batching_rules:
            with set_current_trace(self):
                return inline_rules[primitive](*args, **params)
        rule = batching_rules.get(primitive) or _fallback_rule(primitive)
        if primitive in spmd_rules:
            rule = functools.partial(spmd_rules[primitive], self.spmd_axis_name)
        with set_current_trace(self.parent):
            out, out_dims = rule(list(values), list(dims), **params)
        if primitive.multiple_results:
            return [self.new(o, d) for o, d in zip(out, out_dims)]
        return self.new(out, out_dims)


def batch_flat(fun: Callable[..., Sequence[Any]], values: Sequence[Any], dims: Sequence[int | None], size: int,
               axis_name: Any = None, spmd_axis_name: tuple = ()) -> tuple[list[Any], list[int | None]]:
    """Run `fun` (flat lists in and out) on batched values; returns the outputs and their batch dimensions."""
    from ..core.core import current_trace

    trace = BatchTrace(current_trace(), axis_name, size, spmd_axis_name)
    inputs = [trace.new(v, d) for v, d in zip(values, dims)]
    frame = AxisFrame(None, (axis_name,), False, ((axis_name, size),)) if axis_name is not None else None
    with set_current_trace(trace, finish=True), _maybe(frame):
        outputs = list(fun(*inputs))
        pairs = [trace.pair(o) for o in outputs]
    return [p for p, _ in pairs], [d for _, d in pairs]


def _maybe(frame: AxisFrame | None) -> Any:
    return extend_axis_env(frame) if frame is not None else contextlib.nullcontext()
