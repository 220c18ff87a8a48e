"""numba source for the operations of a jaxpr: how numba_program.py writes a program as one function.

Each lowering adds the lines computing one equation's value into a local array of its shape and type (a fresh one,
or the function's output array where the value is an output): a loop nest per fused cluster or elementwise
operation (its value per element, integers wrapped as XLA's, a NaN winning max and min as in NumPy), per
reduction (accumulated in order, in float64 for floats), per gather or scatter (JAX's clamped or dropped
indices), per broadcast and iota; one BLAS call per product (numba's np.dot, a transposed operand as a view);
reshapes as views, transposes, slices and pads as copies; a scan as a loop over its body's lowerings. An operation
(or a type) with none raises Unsupported.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import numpy as np

from ..core.jaxpr import Equation, Jaxpr, Literal, Var
from .fusion import executable
from .numba_executor import element_index, integer_power

_FLOATS = frozenset(map(np.dtype, ("float32", "float64")))
_INTEGERS = frozenset(map(np.dtype, ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")))
TYPES = _FLOATS | _INTEGERS | {np.dtype(np.bool_)}
_ARITHMETIC = {"add": "+", "add_any": "+", "sub": "-", "mul": "*"}
_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LOGIC = {"and": "&", "or": "|", "xor": "^"}
_FLOAT_FUNCTIONS = {name: f"np.{name}" for name in (
    "exp", "log", "tanh", "sin", "cos", "tan", "sinh", "cosh", "exp2", "expm1", "log1p", "log2", "log10",
    "floor", "ceil", "trunc", "sqrt")}
_FLOAT_FUNCTIONS.update({"asin": "np.arcsin", "acos": "np.arccos", "atan": "np.arctan", "asinh": "np.arcsinh",
                         "acosh": "np.arccosh", "atanh": "np.arctanh", "erf": "math.erf"})
_PREDICATES = {"isnan": "np.isnan", "isinf": "np.isinf", "isfinite": "np.isfinite"}
# numba computes these with libm, one element at a time: ~10x NumPy's vectorized float32 kernels
TRANSCENDENTAL = frozenset({"exp", "log", "tanh", "logistic", "sin", "cos", "tan", "sinh", "cosh", "exp2", "expm1",
                             "log1p", "log2", "log10", "asin", "acos", "atan", "asinh", "acosh", "atanh", "erf", "pow"})
# but these of a float32, which numba_math.py computes in a form that vectorizes (its names, imported by the source)
VECTORIZED = {"exp": "exp32", "tanh": "tanh32", "logistic": "logistic32"}


def transcendental(eq: Equation) -> bool:
    """Whether `eq` computes a transcendental function through libm (see TRANSCENDENTAL)."""
    name = eq.primitive.name
    return name in TRANSCENDENTAL and not (name in VECTORIZED and np.dtype(eq.outputs[0].aval.dtype) == np.float32)
_REDUCTIONS = {"reduce_sum": "+", "reduce_prod": "*", "reduce_max": "max", "reduce_min": "min",
               "reduce_or": "|", "reduce_and": "&"}


class Unsupported(Exception):
    """An operation (or value) of the program with no translation here: the program is not compiled whole."""


def _scalar(value: Any, dtype: np.dtype) -> str:
    """Source for the scalar `value` of `dtype`, exactly."""
    value = np.asarray(value, dtype).reshape(())[()]
    if dtype == np.bool_:
        return "True" if value else "False"
    if dtype in _FLOATS:
        if np.isnan(value):
            text = "np.nan"
        elif np.isinf(value):
            text = "np.inf" if value > 0 else "-np.inf"
        else:
            text = repr(float(value))  # a float32 is a float64 exactly
        return f"np.{dtype.name}({text})"
    if dtype in _INTEGERS:
        return f"np.{dtype.name}({int(value)})"
    raise Unsupported(f"a constant of type {dtype}")


def _element(eq: Equation, args: list[str]) -> str:
    """Source computing `eq`'s value of one element from its operands' elements (`args`)."""
    name = eq.primitive.name
    types = [np.dtype(x.aval.dtype) for x in eq.inputs]
    out = np.dtype(eq.outputs[0].aval.dtype)
    if out not in TYPES or any(t not in TYPES for t in types):
        raise Unsupported(f"{name} of {types}")
    cast = f"np.{out.name}"
    if name == "select":
        return f"({args[1]} if {args[0]} else {args[2]})"
    if name == "convert_element_type":
        if out == np.bool_:
            return f"({args[0]} != 0)"
        if out in _INTEGERS and types[0] in _FLOATS:
            raise Unsupported("a float converted to an integer (saturated)")
        return f"{cast}({args[0]})"
    if name == "integer_pow":
        if out in _INTEGERS and eq.params["y"] < 0:
            raise Unsupported("a negative integer power of an integer")
        return f"{cast}({integer_power(args[0], eq.params['y'], out)})"
    if len(set(types)) != 1 and name != "pow":
        raise Unsupported(f"{name} of mixed types {types}")
    first = types[0]
    if name in _COMPARISONS:
        return f"({args[0]} {_COMPARISONS[name]} {args[1]})"
    if name in _LOGIC and first not in _FLOATS:
        return f"{cast}({args[0]} {_LOGIC[name]} {args[1]})" if first != np.bool_ else \
            f"({args[0]} {_LOGIC[name]} {args[1]})"
    if name == "not":
        return f"(not {args[0]})" if first == np.bool_ else f"{cast}(~{args[0]})"
    if first == np.bool_:
        raise Unsupported(f"{name} of booleans")
    if name in _ARITHMETIC:  # integers wrap as XLA's (numba widens them); floats keep their type
        value = f"({args[0]} {_ARITHMETIC[name]} {args[1]})"
        return value if first in _FLOATS else f"{cast}{value}"
    if name in ("max", "min"):
        a, b = args
        if first in _FLOATS:  # NumPy's maximum/minimum: a NaN operand wins
            return f"({a} if ({a} {'>' if name == 'max' else '<'} {b} or {a} != {a}) else {b})"
        return f"{name}({a}, {b})"
    if name in ("neg", "abs", "square"):
        value = {"neg": f"(-{args[0]})", "abs": f"abs({args[0]})", "square": f"({args[0]} * {args[0]})"}[name]
        return value if first in _FLOATS else f"{cast}({value})"
    if first not in _FLOATS:
        raise Unsupported(f"{name} of integers")
    x = args[0]
    if name == "div":
        return f"({args[0]} / {args[1]})"
    if name == "pow":
        return f"{cast}({args[0]} ** {args[1]})"
    if name == "reciprocal":
        return f"({cast}(1) / {x})"
    if name in VECTORIZED and out == np.float32:
        return f"{VECTORIZED[name]}({x})"
    if name == "logistic":
        return f"({cast}(1) / ({cast}(1) + np.exp(-{x})))"
    if name == "sign":
        return f"({cast}(1) if {x} > 0 else ({cast}(-1) if {x} < 0 else {x}))"
    if name in _FLOAT_FUNCTIONS:  # NumPy's functions keep a float32's type, math's do not
        value = f"{_FLOAT_FUNCTIONS[name]}({x})"
        return f"{cast}({value})" if value.startswith("math.") else value
    if name in _PREDICATES:
        return f"{_PREDICATES[name]}({x})"
    raise Unsupported(name)


@dataclasses.dataclass
class _Loop:
    """An open loop of a Writer: where its header line is, its depth, its values that are the same on every step,
    and the copies made before it of their transposes (by name)."""
    header: int
    indent: int
    invariant: frozenset[str]
    transposes: dict[str, str] = dataclasses.field(default_factory=dict)


class Writer:
    """The source of one program's function: its lines, its values' names and shapes, its constants."""

    def __init__(self, outvars: Sequence[Any]) -> None:
        self.lines: list[str] = []
        self.constants: list[str] = []  # module-level arrays (literals that are not scalars)
        self.names: dict[int, str] = {}
        self.count = 0
        self.outputs: dict[int, str] = {}  # var id -> the output array its value is computed into
        for k, var in enumerate(outvars):
            if isinstance(var, Var) and var.id not in self.outputs:
                self.outputs[var.id] = f"o{k}"
        self.indent = 0  # the loop depth of the lines added now (a scan's body is inside its loop)
        self._loops: list[_Loop] = []  # the scan loops open where lines are added now, innermost last

    def open_loop(self, header: str, invariant: Sequence[str]) -> None:
        """Add a loop's `header` line and enter its body, whose values named `invariant` are the same on every
        step."""
        self._loops.append(_Loop(len(self.lines), self.indent, frozenset(invariant)))
        self.add(header)
        self.indent += 1

    def close_loop(self) -> None:
        self.indent -= 1
        self._loops.pop()

    def transposed(self, name: str) -> str:
        """Source for the transpose of the 2-D array `name`: a C-ordered copy made once before the innermost
        loop where `name` is the same on every step of it (OpenBLAS multiplies by a transposed view at about
        half the speed: a GRU's backward step, 32x256 by 256x128, 92 against 157 GFLOP/s), else a view."""
        if not self._loops or name not in self._loops[-1].invariant:
            return f"{name}.T"
        loop = self._loops[-1]
        if name not in loop.transposes:
            loop.transposes[name] = self.fresh()
            line = "    " * (1 + loop.indent) + f"{loop.transposes[name]} = np.ascontiguousarray({name}.T)"
            self.lines.insert(loop.header, line)
            loop.header += 1
        return loop.transposes[name]

    def fresh(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def add(self, line: str, depth: int = 0) -> None:
        self.lines.append("    " * (depth + 1 + self.indent) + line)

    def array(self, x: Any) -> str:
        """The name of an operand's whole array."""
        if isinstance(x, Literal):
            value = np.asarray(x.value, x.aval.dtype)
            if value.size > 4096:
                raise Unsupported("a large literal")
            name = f"K{len(self.constants)}"
            dtype = np.dtype(x.aval.dtype)
            items = ", ".join(_scalar(v, dtype) for v in value.reshape(-1))
            self.constants.append(f"{name} = np.array([{items}], dtype=np.{dtype.name}).reshape({value.shape!r})")
            return name
        return self.names[x.id]

    def element(self, x: Any, out_shape: tuple[int, ...], axes: Sequence[int] | None = None) -> str:
        """Source reading operand `x` at the loop's element of `out_shape` (its axes following `axes`, else
        aligned on the right)."""
        if isinstance(x, Literal) and np.ndim(x.value) == 0:
            return _scalar(x.value, np.dtype(x.aval.dtype))
        shape = tuple(x.aval.shape)
        if not shape:
            return f"{self.array(x)}[()]"
        axes = range(len(out_shape) - len(shape), len(out_shape)) if axes is None else axes
        try:
            return self.array(x) + element_index(shape, axes, out_shape)
        except ValueError as error:
            raise Unsupported(str(error)) from None

    def result(self, var: Var, make: str | None = None) -> str:
        """A name for `var`'s value, bound to a new array of its type (or to `make`, an expression)."""
        name = self.outputs.pop(var.id, None) if make is None else None
        if name is None:
            name = self.fresh()
            shape, dtype = tuple(var.aval.shape), np.dtype(var.aval.dtype)
            self.add(f"{name} = " + (make or f"np.empty({shape!r}, np.{dtype.name})"))
        self.names[var.id] = name
        return name

    def loops(self, shape: tuple[int, ...], depth: int = 0) -> tuple[int, str]:
        """Open a loop nest over `shape`; returns the depth of its body and the element's index."""
        for axis, size in enumerate(shape):
            self.add(f"for i{axis} in range({size}):", depth + axis)
        return depth + len(shape), f"[{', '.join(f'i{k}' for k in range(len(shape)))}]" if shape else "[()]"


def _elementwise(w: Writer, eq: Equation) -> None:
    """A fused cluster or one elementwise operation: one loop nest over the output."""
    out = eq.outputs[0]
    shape = tuple(out.aval.shape)
    if eq.primitive.name == "fused":
        cluster: Jaxpr = eq.params["cluster"].jaxpr
        outer = dict(zip((v.id for v in cluster.invars), eq.inputs))
        equations = cluster.equations
        result_var = cluster.outvars[0]
    else:
        outer, equations, result_var = {}, [eq], out
    target = w.result(out)
    depth, index = w.loops(shape)
    scalars: dict[int, str] = {}

    def operand(x: Any) -> str:
        if isinstance(x, Var) and x.id in scalars:
            return scalars[x.id]
        return w.element(outer.get(x.id, x) if isinstance(x, Var) else x, shape)

    for inner in equations:
        if inner.primitive.name == "broadcast_in_dim":
            source = inner.inputs[0]
            source = outer.get(source.id, source) if isinstance(source, Var) else source
            value = w.element(source, shape, inner.params["broadcast_dimensions"]) if source.aval.shape else \
                w.element(source, shape)
        else:
            value = _element(inner, [operand(x) for x in inner.inputs])
        name = scalars[inner.outputs[0].id] = w.fresh()
        w.add(f"{name} = {value}", depth)
    if isinstance(result_var, Var) and result_var.id in scalars:
        w.add(f"{target}{index} = {scalars[result_var.id]}", depth)
    else:  # the cluster passes an input or a literal through
        w.add(f"{target}{index} = {operand(result_var)}", depth)


def _reduction(w: Writer, eq: Equation) -> None:
    x, out = eq.inputs[0], eq.outputs[0]
    axes, keepdims = tuple(a % max(1, len(x.aval.shape)) for a in eq.params["axes"]), eq.params.get("keepdims", False)
    dtype, out_dtype = np.dtype(x.aval.dtype), np.dtype(out.aval.dtype)
    operation = _REDUCTIONS[eq.primitive.name]
    if operation in "|&" and dtype != np.bool_ or operation not in "|&" and dtype == np.bool_:
        raise Unsupported(f"{eq.primitive.name} of {dtype}")
    shape = tuple(x.aval.shape)
    wide = np.dtype(np.float64) if dtype in _FLOATS and operation in "+*" else out_dtype
    if operation in "+*|":
        initial = {"+": 0, "*": 1, "|": False}[operation]
    elif operation == "&":
        initial = True
    elif dtype in _FLOATS:
        initial = -np.inf if operation == "max" else np.inf
    else:
        info = np.iinfo(dtype)
        initial = info.min if operation == "max" else info.max
    out_shape = tuple(out.aval.shape)
    accumulator = w.fresh()
    w.add(f"{accumulator} = np.full({out_shape!r}, {_scalar(initial, wide)}, np.{wide.name})")
    depth, index = w.loops(shape)
    kept = [f"i{d}" if d not in axes else "0" for d in range(len(shape)) if keepdims or d not in axes]
    at = f"[{', '.join(kept)}]" if kept else "[()]"
    value = f"{w.array(x)}{index}"
    if operation in "+*|&":
        w.add(f"{accumulator}{at} {operation}= {value}", depth)
    elif dtype in _FLOATS:  # NumPy's maximum/minimum: a NaN wins
        element = w.fresh()
        w.add(f"{element} = {value}", depth)
        w.add(f"if {element} {'>' if operation == 'max' else '<'} {accumulator}{at} or {element} != {element}:", depth)
        w.add(f"{accumulator}{at} = {element}", depth + 1)
    else:
        w.add(f"{accumulator}{at} = {operation}({accumulator}{at}, {value})", depth)
    if wide != out_dtype:
        w.result(out, f"{accumulator}.astype(np.{out_dtype.name})")
    else:
        w.names[out.id] = accumulator


def _dot_general(w: Writer, eq: Equation) -> None:
    lhs, rhs = eq.inputs
    out = eq.outputs[0]
    dtype = np.dtype(lhs.aval.dtype)
    if dtype not in _FLOATS or np.dtype(rhs.aval.dtype) != dtype or np.dtype(out.aval.dtype) != dtype:
        raise Unsupported("a product that is not of two floats of one type")
    (lc, rc), (lb, rb) = eq.params["dimension_numbers"]
    ls, rs = tuple(lhs.aval.shape), tuple(rhs.aval.shape)
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    batch = math.prod(ls[d] for d in lb)
    m, k, n = math.prod(ls[d] for d in lf), math.prod(ls[d] for d in lc), math.prod(rs[d] for d in rf)
    if 0 in (batch, m, k, n):
        raise Unsupported("an empty product")
    a, b = w.array(lhs), w.array(rhs)
    out_shape = tuple(out.aval.shape)
    if not lb and len(ls) == 2 and len(rs) == 2:  # a matrix product, its operands' transposes as views
        left = a if tuple(lc) == (1,) else w.transposed(a)
        right = b if tuple(rc) == (0,) else w.transposed(b)
        w.result(out, f"np.dot({left}, {right})")
        return
    left, right = w.fresh(), w.fresh()
    w.add(f"{left} = np.ascontiguousarray({a}.transpose({tuple([*lb, *lf, *lc])!r})).reshape(({batch}, {m}, {k}))")
    w.add(f"{right} = np.ascontiguousarray({b}.transpose({tuple([*rb, *rc, *rf])!r})).reshape(({batch}, {k}, {n}))")
    product = w.fresh()
    w.add(f"{product} = np.empty(({batch}, {m}, {n}), np.{dtype.name})")
    w.add(f"for b in range({batch}):")
    w.add(f"{product}[b] = np.dot({left}[b], {right}[b])", 1)
    w.result(out, f"{product}.reshape({out_shape!r})")


def _broadcast_in_dim(w: Writer, eq: Equation) -> None:
    x, out = eq.inputs[0], eq.outputs[0]
    shape = tuple(out.aval.shape)
    target = w.result(out)
    depth, index = w.loops(shape)
    source = w.element(x, shape, eq.params["broadcast_dimensions"]) if x.aval.shape else w.element(x, shape)
    w.add(f"{target}{index} = {source}", depth)


def _slice(w: Writer, eq: Equation) -> None:
    x, out = eq.inputs[0], eq.outputs[0]
    shape = tuple(x.aval.shape)
    parts, dim = [], 0
    for entry in eq.params["index"]:
        if entry is None:
            continue
        if isinstance(entry, slice):
            start, stop, step = entry.indices(shape[dim])
            if step < 0:
                raise Unsupported("a reversed slice")
            parts.append(f"{start}:{stop}:{step}")
        elif isinstance(entry, (int, np.integer)):
            parts.append(str(int(entry) % shape[dim]))
        else:
            raise Unsupported(f"a slice by {entry!r}")
        dim += 1
    out_shape = tuple(out.aval.shape)
    taken = f"{w.array(x)}[{', '.join(parts)}]" if parts else w.array(x)
    if not out_shape:
        target = w.result(out)
        w.add(f"{target}[()] = {taken}")
        return
    w.result(out, f"np.ascontiguousarray({taken}).reshape({out_shape!r})")


def _pad(w: Writer, eq: Equation) -> None:
    x, out = eq.inputs[0], eq.outputs[0]
    widths = eq.params["pad_width"]
    value = eq.params.get("constant_values", 0)
    if eq.params["mode"] != "constant" or np.ndim(value) or any(a < 0 or b < 0 for a, b in widths):
        raise Unsupported("a pad that is not a constant's, outward")
    dtype = np.dtype(out.aval.dtype)
    target = w.result(out)
    w.add(f"{target}[...] = {_scalar(value, dtype)}" if out.aval.shape else f"{target}[()] = {_scalar(value, dtype)}")
    region = ", ".join(f"{a}:{a + n}" for (a, _), n in zip(widths, x.aval.shape))
    if x.aval.shape:
        w.add(f"{target}[{region}] = {w.array(x)}")
    else:
        w.add(f"{target}[()] = {w.array(x)}[()]")


def _clamped(w: Writer, index: str, size: int, depth: int) -> str:
    """Lines making `index` a position in a dimension of `size` as JAX's gathers read it (negative from the end,
    then clamped); the local's name."""
    name = w.fresh()
    w.add(f"{name} = {index}", depth)
    w.add(f"if {name} < 0:", depth)
    w.add(f"{name} += {size}", depth + 1)
    w.add(f"{name} = min(max({name}, 0), {size - 1})", depth)
    return name


def _take_along(w: Writer, eq: Equation) -> None:
    x, idx = eq.inputs
    out = eq.outputs[0]
    axis = eq.params["axis"]
    shape, out_shape = tuple(x.aval.shape), tuple(out.aval.shape)
    if len(idx.aval.shape) != len(shape) or not shape or np.dtype(idx.aval.dtype) not in _INTEGERS:
        raise Unsupported("take_along of indices of another rank")
    axis %= len(shape)
    target = w.result(out)
    depth, index = w.loops(out_shape)
    position = _clamped(w, w.element(idx, out_shape), shape[axis], depth)
    picks = [position if d == axis else ("0" if n == 1 else f"i{d}") for d, n in enumerate(shape)]
    w.add(f"{target}{index} = {w.array(x)}[{', '.join(picks)}]", depth)


def _scatter(w: Writer, eq: Equation) -> None:
    """x.at[index] updated by y: a loop over the updates (in NumPy's order of an index of slices and arrays: the
    arrays' axes where they stand if they are adjacent, else first); updates outside the operand are dropped."""
    x, y, *indices = eq.inputs
    out = eq.outputs[0]
    index, mode = eq.params["index"], eq.params["mode"]
    shape = tuple(x.aval.shape)
    arrays = [d for d, e in enumerate(index) if isinstance(e, str)]
    integers = any(isinstance(e, (int, np.integer)) for e in index)
    if mode not in ("set", "add", "max", "min", "multiply") or not shape or len(index) != len(shape) or \
            any(e is None for e in index) or len(arrays) != len(indices) or (arrays and integers) or \
            any(np.dtype(i.aval.dtype) not in _INTEGERS for i in indices):
        raise Unsupported(f"a scatter by {index}")
    ranges = {d: range(*e.indices(n)) for d, (e, n) in enumerate(zip(index, shape)) if isinstance(e, slice)}
    if any(r.step <= 0 for r in ranges.values()):
        raise Unsupported("a reversed scatter")
    around = tuple(np.broadcast_shapes(*[tuple(i.aval.shape) for i in indices])) if indices else ()
    adjacent = arrays == list(range(arrays[0], arrays[0] + len(arrays))) if arrays else False
    order = sorted(ranges)  # the target's axes: the slices', the arrays' block where NumPy puts it
    base = sum(d < arrays[0] for d in order) if adjacent else 0
    axis_of = {d: k + (len(around) if k >= base and arrays else 0) for k, d in enumerate(order)}
    target_shape = tuple([len(ranges[d]) for d in order[:base]] + list(around) + [len(ranges[d]) for d in order[base:]])
    target = w.result(out)
    w.add(f"{target}[...] = {w.array(x)}")
    depth, _ = w.loops(target_shape)
    coordinates, checks = [], []
    for d, e in enumerate(index):
        if d in ranges:
            coordinates.append(f"{ranges[d].start} + {ranges[d].step} * i{axis_of[d]}")
        elif isinstance(e, str):
            i = indices[arrays.index(d)]
            offset = base + len(around) - len(i.aval.shape)
            place = w.fresh()
            w.add(f"{place} = {w.element(i, target_shape, range(offset, offset + len(i.aval.shape)))}", depth)
            coordinates.append(place)
            checks.append(f"0 <= {place} < {shape[d]}")
        else:
            coordinates.append(str(int(e) % shape[d]))
    if checks:
        w.add(f"if {' and '.join(checks)}:", depth)
        depth += 1
    at, update = f"{target}[{', '.join(coordinates)}]", w.element(y, target_shape)
    if mode in ("max", "min"):
        value = w.fresh()
        w.add(f"{value} = {update}", depth)
        w.add(f"if {value} {'>' if mode == 'max' else '<'} {at} or {value} != {value}:", depth)
        w.add(f"{at} = {value}", depth + 1)
    else:
        w.add(f"{at} = " + {"add": f"{at} + {update}", "multiply": f"{at} * {update}", "set": update}[mode], depth)


def _iota(w: Writer, eq: Equation) -> None:
    out = eq.outputs[0]
    shape = tuple(out.aval.shape)
    target = w.result(out)
    depth, index = w.loops(shape)
    w.add(f"{target}{index} = i{eq.params['dimension']}", depth)


def _reshape(w: Writer, eq: Equation) -> None:
    w.result(eq.outputs[0], f"{w.array(eq.inputs[0])}.reshape({tuple(eq.outputs[0].aval.shape)!r})")


def _transpose(w: Writer, eq: Equation) -> None:
    permutation = tuple(eq.params["permutation"])
    w.result(eq.outputs[0], f"np.ascontiguousarray({w.array(eq.inputs[0])}.transpose({permutation!r}))")


def _concatenate(w: Writer, eq: Equation) -> None:
    parts = ", ".join(w.array(x) for x in eq.inputs)
    w.result(eq.outputs[0], f"np.concatenate(({parts},), axis={eq.params['axis']})")


def _scan(w: Writer, eq: Equation) -> None:
    p = eq.params
    targets = [w.result(v) for v in eq.outputs[p["num_carry"]:]]  # the stacked ys
    carries = scan_loop(w, p["jaxpr"], p["num_consts"], p["num_carry"], p["length"], p["reverse"],
                         [w.array(x) for x in eq.inputs], targets)
    for var, name in zip(eq.outputs, carries):
        w.names[var.id] = name


def scan_loop(w: Writer, jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
               inputs: Sequence[str], stacks: Sequence[str]) -> list[str]:
    """A scan of body `jaxpr` (its executable program) over the arrays named `inputs` (consts, initial carry,
    xs), its ys written into the arrays `stacks`; returns the names of the final carry."""
    body = executable(jaxpr)
    if body.constvars:
        raise Unsupported("a scan body with constants of its own")
    carries = []
    for name in inputs[num_consts:num_consts + num_carry]:
        carries.append(w.fresh())
        w.add(f"{carries[-1]} = {name}")
    step, row = w.fresh(), w.fresh()
    w.open_loop(f"for {step} in range({length}):", inputs[:num_consts])
    w.add(f"{row} = {length - 1} - {step}" if reverse else f"{row} = {step}")
    for k, var in enumerate(body.invars):
        if k < num_consts:
            w.names[var.id] = inputs[k]
        elif k < num_consts + num_carry:
            w.names[var.id] = carries[k - num_consts]
        else:  # row `row` of an x, a 0-d array where the x has one dimension
            taken = f"{inputs[k]}[{row}]" if var.aval.shape else f"{inputs[k]}[{row}:{row} + 1].reshape(())"
            w.result(var, taken)
    rows = _rows_of_ys(w, body, num_carry, stacks, row)
    for inner in body.equations:
        lower(w, inner)
    for stack, var in zip(stacks, body.outvars[num_carry:]):
        if isinstance(var, Var) and w.outputs.pop(var.id, None) is None and \
                rows.get(var.id) == (stack, w.names[var.id]):
            continue  # computed in its row
        w.add(f"{stack}[{row}] = {whole_value(w, var)}")
    if any(isinstance(var, Literal) for var in body.outvars[:num_carry]):
        raise Unsupported("a scan whose carry becomes a constant")
    new = [w.array(var) for var in body.outvars[:num_carry]]
    if carries:
        w.add(f"{', '.join(carries)}, = {', '.join(new)},")
    w.close_loop()
    return carries


def _rows_of_ys(w: Writer, body: Jaxpr, num_carry: int, stacks: Sequence[str], row: str
                ) -> dict[int, tuple[str, str]]:
    """Name this iteration's row of each stacked y (an array's, not a body input's) as its value's output: an
    operation computing it in place (`Writer.result`) writes there, no copy after (a GRU's forward loop: 9 stores
    of (32, 128) a step). Returns each such value's stack and the name of its row."""
    rows: dict[int, tuple[str, str]] = {}
    given = {v.id for v in body.invars}
    for stack, var in zip(stacks, body.outvars[num_carry:]):
        if isinstance(var, Var) and var.aval.shape and var.id not in given and var.id not in rows:
            name = w.fresh()
            w.add(f"{name} = {stack}[{row}]")
            rows[var.id], w.outputs[var.id] = (stack, name), name
    return rows


def whole_value(w: Writer, var: Any) -> str:
    """Source for an operand's whole value where a row or an output's elements take it (a scalar for 0-d)."""
    if isinstance(var, Literal) and not np.ndim(var.value):
        return _scalar(var.value, np.dtype(var.aval.dtype))
    return w.array(var) if var.aval.shape else f"{w.array(var)}[()]"


_LOWERINGS: dict[str, Callable[[Writer, Equation], None]] = {
    "fused": _elementwise, "dot_general": _dot_general, "broadcast_in_dim": _broadcast_in_dim, "slice": _slice,
    "pad": _pad, "take_along": _take_along, "scatter": _scatter, "iota": _iota, "reshape": _reshape,
    "transpose": _transpose, "concatenate": _concatenate, "scan": _scan,
    **{name: _reduction for name in _REDUCTIONS},
}


def lower(w: Writer, eq: Equation) -> None:
    """Add `eq`'s lines to `w` (raises Unsupported where it has no translation)."""
    found = _LOWERINGS.get(eq.primitive.name)
    if found is None:
        if len(eq.outputs) != 1 or eq.primitive.multiple_results or not eq.params.keys() <= {"y"} | (
                {"new_dtype", "weak_type"} if eq.primitive.name == "convert_element_type" else set()):
            raise Unsupported(eq.primitive.name)
        found = _elementwise  # an elementwise operation (`_element` says which it knows)
    found(w, eq)
