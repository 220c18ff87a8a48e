"""The primitive core: abstract values, primitives, traces and a small IR (jaxprs).

Every operation on arrays is a Primitive applied with `bind`. The innermost active
trace decides what binding means: the eager trace partitions the operation over the
devices of its (global) inputs right away; a tracing trace records it as an equation
of a Jaxpr, which jit and shard_map later evaluate. One mechanism for all of them.
"""
from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class ShapedArray:
    """What tracing knows of a value: shape, dtype and whether its type is weak (a Python scalar)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def strip_weak(self) -> "ShapedArray":
        return ShapedArray(self.shape, self.dtype, False)


class Primitive:
    """An operation with a NumPy implementation, an abstract evaluation rule and a sharding rule."""

    def __init__(self, name: str, impl: Callable[..., Any], abstract_eval: Callable[..., Any],
                 sharding_rule: Callable[..., Any], multiple_results: bool = False) -> None:
        self.name = name
        self.impl = impl
        self.abstract_eval = abstract_eval
        self.sharding_rule = sharding_rule
        self.multiple_results = multiple_results
        self.needs_local_shape = False  # impl gets `local_shapes=` (its outputs' shard shapes)
        self.needs_local_box = False  # impl gets `local_box=` (its first input's block on the device)
        self.parallel_devices = False  # heavy kernel: local devices run it side by side (device_pool)
        self.eager: Callable[..., Any] | None = None  # replaces partitioned execution outside traces
        # replaces device-by-device evaluation inside shard_map: device_impl(device_trace, *args, **params)
        self.device_impl: Callable[..., Any] | None = None

    def bind(self, *args: Any, **params: Any) -> Any:
        return current_trace().process(self, args, params)

    def __repr__(self) -> str:
        return self.name


# ---- traces ------------------------------------------------------------------------------------


class Trace:
    """How binding a primitive is carried out in the current context."""

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        raise NotImplementedError


class _TraceStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[Trace] = []


_traces = _TraceStack()
_eager: Trace | None = None


def set_eager_trace(trace: Trace) -> None:
    global _eager
    _eager = trace


def current_trace() -> Trace:
    if _traces.stack:
        return _traces.stack[-1]
    assert _eager is not None
    return _eager


class new_trace:
    """Context manager making `trace` the innermost trace."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def __enter__(self) -> Trace:
        _traces.stack.append(self.trace)
        return self.trace

    def __exit__(self, *exc: Any) -> None:
        _traces.stack.pop()


# ---- jaxprs: the IR -----------------------------------------------------------------------------

_var_ids = itertools.count()


class Var:
    """A value in a Jaxpr."""

    __slots__ = ("aval", "id")

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval
        self.id = next(_var_ids)

    def __repr__(self) -> str:
        return f"v{self.id}:{self.aval}"


@dataclass
class Equation:
    primitive: Primitive
    inputs: list[Any]  # Var, or a literal constant
    outputs: list[Var]
    params: dict[str, Any]


@dataclass
class Jaxpr:
    """A traced function: inputs, constants (captured values), equations and outputs."""

    invars: list[Var]
    constvars: list[Var]
    equations: list[Equation]
    outvars: list[Any]
    consts: list[Any] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{{ lambda {' '.join(map(repr, self.constvars))} ; {' '.join(map(repr, self.invars))} . let"]
        for eq in self.equations:
            params = " ".join(f"{k}={v}" for k, v in eq.params.items())
            lines.append(f"    {' '.join(map(repr, eq.outputs))} = {eq.primitive.name}[{params}] "
                         f"{' '.join(map(repr, eq.inputs))}")
        lines.append(f"  in ({', '.join(map(repr, self.outvars))}) }}")
        return "\n".join(lines)


def eval_jaxpr(jaxpr: Jaxpr, args: Sequence[Any]) -> list[Any]:
    """Evaluate `jaxpr` on `args` by binding each equation in the current trace."""
    env: dict[int, Any] = {}

    def read(x: Any) -> Any:
        return env[x.id] if isinstance(x, Var) else x

    for var, value in zip(jaxpr.constvars, jaxpr.consts):
        env[var.id] = value
    for var, value in zip(jaxpr.invars, args):
        env[var.id] = value
    for eq in jaxpr.equations:
        out = eq.primitive.bind(*map(read, eq.inputs), **eq.params)
        outs = out if eq.primitive.multiple_results else [out]
        for var, value in zip(eq.outputs, outs):
            env[var.id] = value
    return [read(v) for v in jaxpr.outvars]


class Tracer:
    """A value being traced: it has an abstract value and belongs to a JaxprTrace."""

    __array_priority__ = 200

    def __init__(self, trace: "JaxprTrace", aval: ShapedArray) -> None:
        self._trace = trace
        self.aval = aval
        self.var = Var(aval)

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d traced array)")
        return self.shape[0]

    def _concrete(self, what: str) -> Any:
        raise TypeError(
            f"{what} needs a concrete value, but this array is traced ({self.aval}) inside jit or shard_map; "
            "use meshax.numpy.where / lax functions instead of Python control flow on traced values, or mark "
            "the argument static (static_argnums)."
        )

    def __bool__(self) -> bool:
        return self._concrete("bool()")

    def __float__(self) -> float:
        return self._concrete("float()")

    def __int__(self) -> int:
        return self._concrete("int()")

    def __index__(self) -> int:
        return self._concrete("using it as an index")

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        return self._concrete("converting to a NumPy array")

    def __repr__(self) -> str:
        return f"Traced<{self.aval}>"


class JaxprTrace(Trace):
    """Records primitives into a Jaxpr instead of running them."""

    def __init__(self) -> None:
        self.equations: list[Equation] = []
        self.consts: dict[int, tuple[Var, Any]] = {}

    def new_arg(self, aval: ShapedArray) -> Tracer:
        return Tracer(self, aval)

    def lift(self, value: Any) -> Any:
        """An input of an equation: our own tracer's var, a captured constant's var, or a literal scalar."""
        if isinstance(value, Tracer):
            if value._trace is not self:
                raise TypeError(
                    "a traced value escaped its jit/shard_map (it belongs to another trace); return it from the "
                    "function instead of storing it outside."
                )
            return value.var
        if isinstance(value, (bool, int, float, complex, np.generic)) or (
                isinstance(value, np.ndarray) and value.ndim == 0):
            return value
        key = id(value)
        if key not in self.consts:
            self.consts[key] = (Var(aval_of(value)), value)
        return self.consts[key][0]

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        inputs = [self.lift(a) for a in args]
        out_avals = primitive.abstract_eval(*[aval_of(a) for a in args], **params)
        multiple = primitive.multiple_results
        outs = [Tracer(self, aval) for aval in (out_avals if multiple else [out_avals])]
        self.equations.append(Equation(primitive, inputs, [t.var for t in outs], params))
        return outs if multiple else outs[0]

    def to_jaxpr(self, inputs: Sequence[Tracer], outputs: Sequence[Any]) -> Jaxpr:
        outvars = [self.lift(o) for o in outputs]
        constvars = [var for var, _ in self.consts.values()]
        consts = [value for _, value in self.consts.values()]
        return Jaxpr([t.var for t in inputs], constvars, self.equations, outvars, consts)


def aval_of(x: Any) -> ShapedArray:
    """The abstract value of an Array, a Tracer, a NumPy value or a Python scalar."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(tuple(x.shape), np.dtype(x.dtype), bool(getattr(x, "weak_type", False)))
    from .dtypes import dtype_of

    dtype, weak = dtype_of(x)
    return ShapedArray(tuple(np.shape(x)), dtype, weak)


def trace_to_jaxpr(fun: Callable[..., Any], avals: Sequence[ShapedArray]) -> tuple[Jaxpr, Any]:
    """Trace `fun` on abstract inputs; returns the Jaxpr and `fun`'s raw (flat list) output."""
    trace = JaxprTrace()
    inputs = [trace.new_arg(aval) for aval in avals]
    with new_trace(trace):
        outputs = fun(*inputs)
    return trace.to_jaxpr(inputs, outputs), outputs
