"""The IR: jaxprs (variables, literals, equations), their printing and their evaluation.

A Jaxpr is a closed-converted function: `constvars` hold values it captured (arrays,
tracers of enclosing traces), `invars` its arguments; small scalars appear inline as
Literals. A ClosedJaxpr pairs a Jaxpr with the values of its constvars.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .core import Primitive, ShapedArray

_var_ids = itertools.count()


class Var:
    """A value in a Jaxpr."""

    __slots__ = ("aval", "id")

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval
        self.id = next(_var_ids)

    def __repr__(self) -> str:
        return f"v{self.id}:{self.aval.str_short()}"


class Literal:
    """A scalar constant written inline in a Jaxpr."""

    __slots__ = ("value", "aval")

    def __init__(self, value: Any, aval: ShapedArray) -> None:
        self.value = value
        self.aval = aval

    def __repr__(self) -> str:
        value = self.value.item() if isinstance(self.value, (np.ndarray, np.generic)) else self.value
        return f"{value}:{self.aval.str_short()}"


@dataclass
class Equation:
    primitive: Primitive
    inputs: list[Any]  # Var or Literal
    outputs: list[Var]
    params: dict[str, Any]


@dataclass
class Jaxpr:
    """A traced function: constants (captured values), inputs, equations and outputs."""

    constvars: list[Var]
    invars: list[Var]
    equations: list[Equation]
    outvars: list[Any]  # Var or Literal
    consts: list[Any] = field(default_factory=list)  # the constvars' values (a closed jaxpr)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def __str__(self) -> str:
        return _Printer().jaxpr(self, 0)

    __repr__ = __str__

    def pretty_print(self) -> str:
        return str(self)


class ClosedJaxpr:
    """A Jaxpr and the values of its constvars, printed as JAX prints `make_jaxpr`'s result."""

    def __init__(self, jaxpr: Jaxpr) -> None:
        self.jaxpr = jaxpr

    consts = property(lambda self: self.jaxpr.consts)
    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.equations)

    def __str__(self) -> str:
        return str(self.jaxpr)

    __repr__ = __str__

    def pretty_print(self) -> str:
        return str(self.jaxpr)


class _Printer:
    """Names variables a, b, ..., z, ba, bb, ... in order of appearance (as JAX prints jaxprs)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def name(self, var: Any) -> str:
        if isinstance(var, Literal):
            return repr(var)
        if var.id not in self.names:
            n, letters = len(self.names), ""
            while True:
                letters = chr(ord("a") + n % 26) + letters
                n //= 26
                if not n:
                    break
            self.names[var.id] = letters
        return self.names[var.id]

    def binder(self, var: Var) -> str:
        return f"{self.name(var)}:{var.aval.str_short()}"

    def jaxpr(self, jaxpr: Jaxpr, indent: int) -> str:
        pad = " " * indent
        head = f"{{ lambda {' '.join(map(self.binder, jaxpr.constvars))}; {' '.join(map(self.binder, jaxpr.invars))}. let"
        lines = [head]
        for eq in jaxpr.equations:
            outs = " ".join(map(self.binder, eq.outputs)) or "_"
            params = self.params(eq.params, indent + 4)
            args = " ".join(map(self.name, eq.inputs))
            lines.append(f"{pad}    {outs} = {eq.primitive.name}{params} {args}".rstrip())
        outs = ", ".join(map(self.name, jaxpr.outvars))
        lines.append(f"{pad}  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}")
        return "\n".join(lines)

    def params(self, params: dict[str, Any], indent: int) -> str:
        shown = sorted((k, v) for k, v in params.items() if not k.startswith("_"))
        if not shown:
            return ""
        if any(isinstance(v, (Jaxpr, ClosedJaxpr)) for _, v in shown):
            lines = [f"{' ' * (indent + 2)}{k}={self.param_value(v, indent)}" for k, v in shown]
            return "[\n" + "\n".join(lines) + f"\n{' ' * indent}]"
        return "[" + " ".join(f"{k}={self.param_value(v, indent)}" for k, v in shown) + "]"

    def param_value(self, value: Any, indent: int) -> str:
        if isinstance(value, (Jaxpr, ClosedJaxpr)):
            return self.jaxpr(value if isinstance(value, Jaxpr) else value.jaxpr, indent + 2)
        if isinstance(value, np.dtype):
            return value.name
        if isinstance(value, type) and issubclass(value, np.generic):
            return np.dtype(value).name
        return str(value)


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any],
               bind: Callable[[Equation, list[Any]], Any] | None = None) -> list[Any]:
    """Evaluate `jaxpr` by binding each equation in the current trace (through `bind(equation, inputs)` where
    given: an interpreter that runs some equations its own way)."""
    env: dict[int, Any] = {}

    def read(x: Any) -> Any:
        return x.value if isinstance(x, Literal) else env[x.id]

    for var, value in zip(jaxpr.constvars, consts):
        env[var.id] = value
    for var, value in zip(jaxpr.invars, args):
        env[var.id] = value
    for eq in jaxpr.equations:
        inputs = list(map(read, eq.inputs))
        out = eq.primitive.bind(*inputs, **eq.params) if bind is None else bind(eq, inputs)
        for var, value in zip(eq.outputs, out if eq.primitive.multiple_results else [out]):
            env[var.id] = value
    return [read(v) for v in jaxpr.outvars]
