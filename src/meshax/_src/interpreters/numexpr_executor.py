"""The CPU executor of fused clusters: a cluster becomes one numexpr expression, evaluated in one pass.

numexpr runs an expression block by block (a few thousand elements at a time, every operation of the
expression on the block while it is in cache), over a pool of threads that releases the GIL. Only
operations whose numexpr result is bit for bit NumPy's are translated: IEEE-exact arithmetic
(+ - * /, sqrt, abs), comparisons, logic on booleans and the conversions numexpr makes exactly; on bool,
int32, int64, float32 and float64 (numexpr has no float16, bfloat16, small integers or complex64).
Not translated: transcendentals (exp, log, tanh...: NumPy's SIMD kernels and numexpr's libm calls round
differently), and select, max and min: numexpr's `where` branches per element (15-50 ms for 2M elements
of a random mask, measured, against 1-3 ms for NumPy's maximum and meshax's branchless select), and its
`maximum` widens float32 to float64. Constants are passed as typed scalars (a Python float would widen
float32 to float64).

When it pays: numexpr's loops are compiled for baseline x86-64, NumPy's dispatch to AVX2/AVX-512, so per
thread numexpr is about half as fast on data in cache (w - 0.3 * g over 1M float32: 0.74 ms, NumPy's two
passes 0.38 ms); it wins by its threads (NumPy's ufuncs use one) and by reading memory once. Clusters run
through it when this controller has `min_threads` compute threads or more (`compute_threads()`), else as
the separate NumPy calls. numexpr is imported, and its threads sized, on the first fused call.
"""
from __future__ import annotations

import os
import re
import threading
from typing import Any, Sequence

import numpy as np

from ..core.jaxpr import Equation, Jaxpr, Literal, Var
from ..runtime import compute_pool as device_pool
from ..runtime.cpu_budget import compute_threads

_SUPPORTED = frozenset(np.dtype(t) for t in (np.bool_, np.int32, np.int64, np.float32, np.float64))
_BINARY = {"add": "+", "add_any": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
           "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|"}
_NUMBERS = ("add", "add_any", "sub", "mul", "neg", "square")  # int and float, not bool
_FLOATS = ("div", "abs", "sqrt", "reciprocal")
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_LOGIC = ("and", "or", "not")  # bool only
# conversions numexpr makes exactly as NumPy's astype (from dtype, to dtype); any dtype to bool is x != 0
_CONVERSIONS = {("int32", "int64"), ("int32", "float32"), ("int32", "float64"), ("int64", "float64"),
                ("float32", "float64")}
MAX_OPERANDS = 24  # arrays and constants of one expression (numexpr's limit is NumPy's, 32 or 64)


class NumexprExecutor:
    """Runs clusters on this controller's CPU threads through numexpr."""

    # below this many output elements a cluster runs as separate NumPy calls (numexpr's start-up dominates)
    min_elements = 32768
    min_threads = 4  # with fewer compute threads, NumPy's SIMD loops beat numexpr's (see the module's notes)

    def __init__(self) -> None:
        self._lock = threading.Lock()  # numexpr's virtual machine is not re-entrant across Python threads
        self._numexpr: Any = None
        self._threads = 0  # numexpr's thread count as last set

    def worthwhile(self, elements: int) -> bool:
        """Whether a cluster with this many output elements runs faster here than as separate NumPy calls."""
        # not for one device's call among others run side by side: numexpr's pool is one per process
        return elements >= self.min_elements and not device_pool.in_batch() and compute_threads() >= self.min_threads

    def supports(self, eq: Equation) -> bool:
        """Whether `eq` can be part of an expression with NumPy's exact results."""
        if eq.primitive.multiple_results or len(eq.outputs) != 1:
            return False
        dtypes = [x.aval.dtype for x in eq.inputs] + [eq.outputs[0].aval.dtype]
        if any(np.dtype(d) not in _SUPPORTED for d in dtypes):
            return False
        name, first = eq.primitive.name, np.dtype(dtypes[0])
        if name == "broadcast_in_dim":
            return True
        if name == "convert_element_type":
            out = np.dtype(dtypes[-1])
            return out == first or out == np.bool_ or first == np.bool_ or (first.name, out.name) in _CONVERSIONS
        if len(set(dtypes[:-1])) != 1:
            return False  # operands of one dtype (as the primitives take them)
        if name in _NUMBERS:
            return first != np.bool_
        if name in _FLOATS:
            return first.kind == "f"
        return name in _COMPARISONS or (name in _LOGIC and first == np.bool_)

    def compile(self, cluster: Jaxpr) -> "_Kernel | None":
        """The numexpr program of `cluster` (its invars as arguments), or None if numexpr cannot run it."""
        writer = _Writer()
        for var in cluster.invars:
            writer.leaf(var)
        for eq in cluster.equations:
            writer.equation(eq)
        out = cluster.outvars[0]
        text = writer.expressions[out.id]
        used = set(re.findall(r"[a-z]\d+", text))
        writer.arguments = [(name, value) for name, value in writer.arguments if name in used]
        if len(writer.arguments) > MAX_OPERANDS or not any(isinstance(v, Var) for v in cluster.invars):
            return None
        try:
            numexpr = self._module()
        except ImportError:  # numexpr missing from this environment: clusters run as separate NumPy calls
            return None
        dtypes = [value.dtype if isinstance(value, np.ndarray) else value.aval.dtype for _, value in writer.arguments]
        signature = [(name, numexpr.necompiler.getType(np.empty(0, dtype)))
                     for (name, _), dtype in zip(writer.arguments, dtypes)]
        try:
            program = numexpr.NumExpr(text, signature=signature)
            trial = [np.ones(1, dtype) for dtype in dtypes]
            with self._lock:
                result = program(*trial, ex_uses_vml=False)
        except Exception:  # an expression numexpr does not take: the cluster runs unfused
            return None
        if result.dtype != out.aval.dtype:
            return None
        constants = {name: value for name, value in writer.arguments if isinstance(value, np.ndarray)}
        return _Kernel(program, [name for name, _ in writer.arguments], writer.leaf_names, constants,
                       writer.broadcasts)

    def run(self, kernel: "_Kernel", inputs: Sequence[np.ndarray], out_shape: tuple[int, ...],
            out_dtype: np.dtype) -> np.ndarray:
        """The cluster's output (local shape `out_shape`) from its inputs."""
        values: dict[str, Any] = dict(kernel.constants)
        for name, value in zip(kernel.leaf_names, inputs):
            values[name] = value
        for name, (source, dims) in kernel.broadcasts.items():
            values[name] = _broadcast_view(values[source], dims, out_shape)
        arrays = [values[name] for name in kernel.order]
        full = [a for a in arrays if a.shape == out_shape]
        if not full:  # numexpr's result has the operands' common shape: make one of them the output's
            index = next(i for i, a in enumerate(arrays) if a.ndim)
            arrays[index] = np.broadcast_to(arrays[index], out_shape)
        out = np.empty(out_shape, out_dtype)
        with self._lock:
            self._size_threads()
            kernel.program(*arrays, out=out, ex_uses_vml=False)
        return out

    def _module(self) -> Any:
        if self._numexpr is None:
            os.environ.setdefault("NUMEXPR_MAX_THREADS", str(max(1, os.cpu_count() or 1)))  # read at its import
            import numexpr

            self._numexpr = numexpr
        return self._numexpr

    def _size_threads(self) -> None:
        """numexpr's pool sized to this controller's compute threads (their number can change at run time)."""
        threads = max(1, min(compute_threads(), self._numexpr.MAX_THREADS))
        if threads != self._threads:
            self._numexpr.set_num_threads(threads)
            self._threads = threads


class _Kernel:
    def __init__(self, program: Any, order: list[str], leaf_names: list[str], constants: dict[str, np.ndarray],
                 broadcasts: dict[str, tuple[str, tuple[int, ...]]]) -> None:
        self.program = program
        self.order = order  # argument names in the program's order
        self.leaf_names = leaf_names  # the names of the cluster's inputs
        self.constants = constants
        self.broadcasts = broadcasts  # argument name -> (the input it broadcasts, broadcast_dimensions)


def _broadcast_view(x: np.ndarray, dims: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
    expanded = [1] * len(out_shape)
    for i, dim in enumerate(dims):
        expanded[dim] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), out_shape)


class _Writer:
    """Builds the expression text of each value of a cluster."""

    def __init__(self) -> None:
        self.expressions: dict[int, str] = {}
        self.arguments: list[tuple[str, Any]] = []  # (name, Var of an input or a constant's 0-d array)
        self.leaf_names: list[str] = []
        self.broadcasts: dict[str, tuple[str, tuple[int, ...]]] = {}
        self._constants: dict[tuple, str] = {}

    def leaf(self, var: Var) -> None:
        name = f"x{len(self.leaf_names)}"
        self.leaf_names.append(name)
        self.arguments.append((name, var))
        self.expressions[var.id] = name

    def constant(self, value: Any, dtype: np.dtype) -> str:
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.tobytes())
        if key not in self._constants:
            name = self._constants[key] = f"c{len(self._constants)}"
            self.arguments.append((name, array))
        return self._constants[key]

    def operand(self, x: Any) -> str:
        if isinstance(x, Literal):
            return self.constant(x.value, x.aval.dtype)
        return self.expressions[x.id]

    def equation(self, eq: Equation) -> None:
        name, out = eq.primitive.name, eq.outputs[0]
        args = [self.operand(x) for x in eq.inputs]
        if name == "broadcast_in_dim":
            source = eq.inputs[0]
            if isinstance(source, Literal):
                text = args[0]
            else:
                text = f"b{len(self.broadcasts)}"
                self.broadcasts[text] = (args[0], tuple(eq.params["broadcast_dimensions"]))
                self.arguments.append((text, out))
            self.expressions[out.id] = text
            return
        self.expressions[out.id] = self._text(name, args, eq)

    def _text(self, name: str, args: list[str], eq: Equation) -> str:
        dtype = np.dtype(eq.inputs[0].aval.dtype)
        if name in _BINARY:
            return f"({args[0]} {_BINARY[name]} {args[1]})"
        if name == "neg":
            return f"(-{args[0]})"
        if name == "not":
            return f"(~{args[0]})"
        if name in ("abs", "sqrt"):
            return f"{name}({args[0]})"
        if name == "square":
            return f"({args[0]} * {args[0]})"
        if name == "reciprocal":
            return f"({self.constant(1, dtype)} / {args[0]})"
        if name == "convert_element_type":
            return self._conversion(args[0], dtype, np.dtype(eq.outputs[0].aval.dtype))
        raise AssertionError(f"no numexpr form for {name}")  # supports() admitted only the names above

    def _conversion(self, x: str, source: np.dtype, target: np.dtype) -> str:
        if source == target:
            return x
        if target == np.bool_:
            return f"({x} != {self.constant(0, source)})"
        if source == np.bool_:
            return f"({x} * {self.constant(1, target)})"  # False * 1 is 0, True * 1 is 1
        zero = self.constant(-0.0 if target.kind == "f" else 0, target)  # x + (-0.0) is x, and has the target type
        return f"({x} + {zero})"

