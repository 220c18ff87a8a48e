"""Clusters as compiled loops: one pass over the output, every operation of the cluster on each element in
registers, compiled by numba for this CPU and run on row ranges over the controller's threads (the compiled
loop holds no GIL).

A cluster (fusion.py) of float32/float64 arithmetic, square roots, integer powers, comparisons, logic, select,
max/min and exact conversions becomes Python source for numba: a loop nest over the output's axes whose body
computes the cluster's value of one element and stores it. The operations translated are those whose compiled
result is NumPy's bit for bit: IEEE +, -, *, / and sqrt (no contraction into fused multiply-adds, no fast-math), NumPy's
choices for max/min (a NaN operand wins, the first one if both; of two equal values the second), select,
comparisons, conversions between float32, float64 and bool. Transcendentals and integer arithmetic are not
(libm and NumPy's SIMD kernels round differently; numba widens int32 arithmetic).

The source depends on how each input is read (which of its axes follow which output axes, which are
broadcast), so it is made per such pattern, values named in program order: clusters that do the same share
one kernel. Kernels are compiled by kernel_compiler.py, in the background: until one is ready its cluster
runs as NumPy calls (cpu_executor.py), with the same values.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core.jaxpr import Equation, Jaxpr, Literal, Var
from .kernel_compiler import KernelCompiler

_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_TYPES = _FLOATS | {np.dtype(np.bool_)}
_ARITHMETIC = {"add": "+", "add_any": "+", "sub": "-", "mul": "*", "div": "/"}
_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LOGIC = {"and": "&", "or": "|", "xor": "^"}


def _expression(eq: Equation, args: list[str]) -> str | None:
    """Numba source computing `eq`'s value of one element from its operands' (`args`), or None if `eq` has no
    translation with NumPy's exact results."""
    name = eq.primitive.name
    types = [np.dtype(x.aval.dtype) for x in eq.inputs]
    out = np.dtype(eq.outputs[0].aval.dtype)
    if out not in _TYPES or any(t not in _TYPES for t in types):
        return None
    if name == "select":
        return f"({args[1]} if {args[0]} else {args[2]})" if types[0] == np.bool_ and out in _FLOATS else None
    if name == "convert_element_type":
        if out == np.bool_:
            return f"({args[0]} != 0)"
        return f"np.{out.name}({args[0]})"
    if len(set(types)) != 1:
        return None
    first = types[0]
    if name in _ARITHMETIC and first in _FLOATS:
        return f"({args[0]} {_ARITHMETIC[name]} {args[1]})"
    if name in ("max", "min") and first in _FLOATS:  # NumPy's maximum/minimum, NaN and signed zeros included
        a, b = args
        return f"({a} if ({a} {'>' if name == 'max' else '<'} {b} or {a} != {a}) else {b})"
    if name in _COMPARISONS:
        return f"({args[0]} {_COMPARISONS[name]} {args[1]})"
    if name in _LOGIC and first == np.bool_:
        return f"({args[0]} {_LOGIC[name]} {args[1]})"
    if first in _FLOATS and name in ("neg", "abs", "square", "sqrt", "reciprocal"):
        x = args[0]
        return {"neg": f"(-{x})", "abs": f"abs({x})", "square": f"({x} * {x})", "sqrt": f"np.sqrt({x})",
                "reciprocal": f"(np.{first.name}(1) / {x})"}[name]
    if name == "integer_pow" and first in _FLOATS:
        return integer_power(args[0], eq.params["y"], first)
    if name == "not" and first == np.bool_:
        return f"(not {args[0]})"
    return None


def integer_power(x: str, y: int, dtype: np.dtype) -> str:
    """x ** y with the products of meshax's integer_pow (repeated squaring, each product rounded; 1 / x ** -y)."""
    one = f"np.{dtype.name}(1)"
    power, square, k = None, x, abs(y)
    while k:
        if k & 1:
            power = square if power is None else f"({power} * {square})"
        k >>= 1
        if k:
            square = f"({square} * {square})"
    power = power or one
    return f"({one} / {power})" if y < 0 else power


class NumbaExecutor:
    """Compiles clusters with numba and runs them on row ranges over the caller's threads."""

    # smaller outputs run as NumPy calls: they would spend more on the call than they save (and compile a
    # kernel for little)
    min_elements = 32768

    def __init__(self) -> None:
        self.compiler = KernelCompiler()

    def compile(self, cluster: Jaxpr) -> "_Program | None":
        """What is kept of `cluster` to make its loops (None: some operation has no exact translation)."""
        names = {v.id: f"a{i}" for i, v in enumerate(cluster.invars)}
        for eq in cluster.equations:
            args = [names.get(x.id, f"v{x.id}") if isinstance(x, Var) else "literal" for x in eq.inputs]
            if (eq.primitive.name != "broadcast_in_dim" and _expression(eq, args) is None) or (
                    eq.primitive.name == "broadcast_in_dim" and not (isinstance(eq.inputs[0], Var)
                                                                    and eq.inputs[0].id in names)):
                return None
        if not isinstance(cluster.outvars[0], Var) or cluster.outvars[0].id in names:
            return None
        return _Program(cluster)

    def worthwhile(self, elements: int) -> bool:
        """Whether a cluster with this many output elements is run here."""
        return elements >= self.min_elements

    def run(self, program: "_Program", inputs: Sequence[np.ndarray], out_shape: tuple[int, ...],
            out_dtype: np.dtype, out: np.ndarray | None, spread: Callable[[list[Callable[[], None]]], None],
            parts: int) -> np.ndarray | None:
        """The cluster's value from its local `inputs`, written into `out` (C-ordered) where given, in `parts` row
        ranges handed to `spread` (which runs them); None when its kernel is not compiled yet (the compiler
        then has it in hand) or an input is not C-ordered (the loop would walk it across pages)."""
        arrays = [np.asarray(x) for x in inputs]
        if any(x.ndim and not x.flags.c_contiguous for x in arrays):
            return None
        source, arguments = program.source(arrays, out_shape)
        out_dtype = np.dtype(out_dtype)
        key = (source, tuple(_type_of(x) for x in arguments), out_dtype.str, len(out_shape))
        function = self.compiler.ready(key)
        if function is None:
            examples = [_example(x) for x in arguments] + [np.empty((1,) * len(out_shape), out_dtype)]
            function = self.compiler.request(key, source, examples)
            if function is None:
                return None
        program.compiled = True
        out = np.empty(out_shape, out_dtype) if out is None else out
        rows = out_shape[0]
        per_part = -(-rows // max(1, min(parts, rows)))
        ranges = [(start, min(start + per_part, rows)) for start in range(0, rows, per_part)]
        if len(ranges) == 1:
            function(0, rows, *arguments, out)
        else:
            spread([lambda s=start, e=stop: function(s, e, *arguments, out) for start, stop in ranges])
        return out

    def small_call(self, program: "_Program", in_types: Sequence[tuple[tuple[int, ...], np.dtype]],
                   out_shape: tuple[int, ...], out_dtype: np.dtype,
                   fallback: Callable[[Sequence[Any]], np.ndarray]) -> "SmallClusterCall":
        """A program's step (numpy_program.py) running a cluster too small for `run`'s dispatch, of inputs of
        `in_types` ((shape, dtype) each), as its loop called directly (SmallClusterCall asks for its kernel)."""
        examples = [np.dtype(dtype).type(0) if not shape else stand_in(len(shape), np.dtype(dtype))
                    for shape, dtype in in_types]
        literals = [x if x.size > 1 else x.reshape(())[()] for x in program.literals]
        source = program.source_for(tuple(shape for shape, _ in in_types), out_shape)
        out_dtype = np.dtype(out_dtype)
        arguments = [*examples, *literals]
        key = (source, tuple(_type_of(x) for x in arguments), out_dtype.str, len(out_shape))
        out_example = np.empty((1,) * len(out_shape), out_dtype)
        return SmallClusterCall(self.compiler, key, source, [0, 0, *arguments, out_example],
                                [not shape for shape, _ in in_types], literals, out_shape, out_dtype, fallback)


class SmallClusterCall:
    """A small cluster as one call of a program: its compiled loop over the whole output on this thread once numba
    has compiled it (through the overload's entry point: no dispatch), else (and for an input that is not
    C-ordered) its NumPy calls, `fallback`. The same values either way. The kernel is asked for on the
    `ASK_ON_CALL`th call: a program run once or twice (most of a test suite's) compiles nothing."""

    # Measured both ways on a 2-core Xeon (session 28): asked for on the 100,000th call instead, optax's alias
    # tests (17 kernels, compiled in the background but holding the GIL much of the time) ran ~20% faster, and
    # the tiny model's training step 1.6x slower (its ~80 NumPy calls a step back to ~160). Training steps win.
    ASK_ON_CALL = 3
    writes_out = True  # call(*inputs, out=buffer) leaves the value in `buffer` (C-ordered, of its shape and type)
    exact_result = True  # its value is an array of the output's type

    def __init__(self, compiler: KernelCompiler, key: Any, source: str, examples: list[Any], scalars: list[bool],
                 literals: list[Any], out_shape: tuple[int, ...], out_dtype: np.dtype,
                 fallback: Callable[[Sequence[Any]], np.ndarray]) -> None:
        self._compiler, self._key, self._source, self._examples = compiler, key, source, examples
        self._calls = 0
        self._scalars, self._literals = scalars, literals
        self._out_shape, self._out_dtype, self._rows = out_shape, out_dtype, out_shape[0]
        self._fallback = fallback
        self._entry: Callable[..., None] | None = None

    def __call__(self, *inputs: Any, out: np.ndarray | None = None) -> np.ndarray:
        entry = self._entry or self._compiled()
        if entry is None:
            return self._fallen_back(inputs, out)
        arguments = []
        for x, scalar in zip(inputs, self._scalars):
            if type(x) is not np.ndarray:  # a value of another kind (an Array given to numpy_eval.run)
                x = np.asarray(x)
            if scalar:
                arguments.append(x[()])
            elif x.flags.c_contiguous:
                arguments.append(x)
            else:
                return self._fallen_back(inputs, out)
        if out is None:
            out = np.empty(self._out_shape, self._out_dtype)
        entry(0, self._rows, *arguments, *self._literals, out)
        return out

    def _fallen_back(self, inputs: Sequence[Any], out: np.ndarray | None) -> np.ndarray:
        """The cluster's value by its NumPy calls, left in `out` where given."""
        value = self._fallback(inputs)
        if out is None:
            return value
        out[...] = value
        return out

    def _compiled(self) -> Callable[..., None] | None:
        """The entry point of the kernel's overload for these types, once compiled (asked for on the
        `ASK_ON_CALL`th call)."""
        kernel = self._compiler.ready(self._key)
        if kernel is None:
            self._calls += 1
            if self._calls == self.ASK_ON_CALL:
                self._compiler.request(self._key, self._source, self._examples[2:])
            return None
        overload = kernel.overloads.get(tuple(kernel.typeof_pyval(x) for x in self._examples))
        if overload is not None:
            self._entry = overload.entry_point
        return self._entry


def _type_of(x: Any) -> tuple:
    """What of an argument the compiled code depends on (arrays reach kernels C-ordered and read-only)."""
    return (x.dtype.str, x.ndim) if isinstance(x, np.ndarray) else (np.asarray(x).dtype.str,)


def _example(x: Any) -> Any:
    """A stand-in for argument `x` of the same type to compile with (a kernel called on it runs no iteration)."""
    return stand_in(x.ndim, x.dtype) if isinstance(x, np.ndarray) else x


def stand_in(ndim: int, dtype: np.dtype) -> np.ndarray:
    """A read-only array of one element in each of `ndim` axes: the type of an input to compile for."""
    example = np.empty((1,) * ndim, dtype)
    example.flags.writeable = False
    return example


class _Program:
    """A cluster's loop sources, one per pattern of reading its inputs, and the literals they take."""

    def __init__(self, cluster: Jaxpr) -> None:
        self.cluster = cluster
        self.literals = [read_only(np.ascontiguousarray(x.value, dtype=x.aval.dtype)) for eq in cluster.equations
                         for x in eq.inputs if isinstance(x, Literal)]
        self._sources: dict[tuple, str] = {}
        self.compiled = False  # whether one of its kernels has run (then it runs compiled from now on, mostly)

    def source(self, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> tuple[str, list[Any]]:
        """The loop source for these inputs and their arguments (inputs, then literals; a single element as
        a scalar)."""
        source = self.source_for(tuple(x.shape for x in inputs), out_shape)
        arguments = [x[()] if x.ndim == 0 else read_only(x) for x in inputs]
        arguments += [x if x.size > 1 else x.reshape(())[()] for x in self.literals]
        return source, arguments

    def source_for(self, shapes: tuple[tuple[int, ...], ...], out_shape: tuple[int, ...]) -> str:
        """The loop source for inputs of `shapes`."""
        key = (shapes, tuple(out_shape))
        source = self._sources.get(key)  # (devices' threads may ask at once: each keeps its own answer)
        if source is None:
            if len(self._sources) > 64:
                self._sources.clear()
            source = self._sources[key] = _loop_source(self.cluster, shapes, out_shape, self.literals)
        return source


def read_only(x: np.ndarray) -> np.ndarray:
    """`x`, or a view of it that cannot be written: kernels are compiled for read-only inputs only (an array's
    writability is part of numba's signature)."""
    if not x.flags.writeable:
        return x
    view = x.view()
    view.flags.writeable = False
    return view


def element_index(shape: tuple[int, ...], axes: Sequence[int], out_shape: tuple[int, ...]) -> str:
    """An array of `shape` read at the loop's element: its axis k follows output axis axes[k], at 0 where it is
    broadcast along it."""
    if any(size not in (1, out_shape[axis]) for size, axis in zip(shape, axes)):  # the loop would read past it
        raise ValueError(f"fused: an input of shape {shape} does not broadcast to the output's {out_shape}")
    picks = ["0" if size == 1 and out_shape[axis] != 1 else f"i{axis}" for size, axis in zip(shape, axes)]
    return f"[{', '.join(picks)}]"


def _loop_source(cluster: Jaxpr, shapes: tuple, out_shape: tuple[int, ...], literals: list[np.ndarray]) -> str:
    ndim = len(out_shape)
    arrays = {v.id: (f"a{i}", shape) for i, (v, shape) in enumerate(zip(cluster.invars, shapes))}
    body: list[str] = []
    read: dict[int, str] = {}  # input id -> the name of its element read directly
    # values named in program order (not by variable id), so that clusters doing the same share one kernel
    values = {eq.outputs[0].id: f"v{i}" for i, eq in enumerate(cluster.equations)}
    literal_names = iter(f"c{i}" for i in range(len(literals)))
    literal_values = iter(literals)

    def operand(x: Any) -> str:
        if isinstance(x, Literal):
            name, value = next(literal_names), next(literal_values)
            return name if value.size == 1 else f"{name}{element_index(value.shape, range(ndim - value.ndim, ndim), out_shape)}"
        if x.id not in arrays:
            return values[x.id]
        name, shape = arrays[x.id]
        if not shape:
            return name
        if x.id not in read:
            read[x.id] = f"r{len(read)}"
            body.append(f"{read[x.id]} = {name}{element_index(shape, range(ndim - len(shape), ndim), out_shape)}")
        return read[x.id]

    for eq in cluster.equations:
        result = values[eq.outputs[0].id]
        if eq.primitive.name == "broadcast_in_dim":
            name, shape = arrays[eq.inputs[0].id]
            dims = eq.params["broadcast_dimensions"]
            body.append(f"{result} = {name}{element_index(shape, dims, out_shape)}" if shape else f"{result} = {name}")
            continue
        body.append(f"{result} = {_expression(eq, [operand(x) for x in eq.inputs])}")
    body.append(f"out[{', '.join(f'i{k}' for k in range(ndim))}] = {values[cluster.outvars[0].id]}")
    parameters = ", ".join([f"a{i}" for i in range(len(shapes))] + [f"c{i}" for i in range(len(literals))])
    lines = ["import numpy as np", "import numba", "",
             "@numba.njit(nogil=True, cache=True, error_model='numpy')",
             f"def kernel(start, stop, {parameters + ', ' if parameters else ''}out):"]
    for axis in range(ndim):
        bounds = "start, stop" if axis == 0 else f"out.shape[{axis}]"
        lines.append("    " * (axis + 1) + f"for i{axis} in range({bounds}):")
    lines.extend("    " * (ndim + 1) + line for line in body)
    return "\n".join(lines) + "\n"
