"""A small program's whole run as one compiled function: no Python between its operations.

A training step on small arrays (an MLP 64-64-64-10 with Adam: 69 operations of a few microseconds) spends most
of its time calling NumPy, not computing. `WholeProgram` writes such an executable jaxpr as the source of one
numba function, its shapes fixed (numba_lowering.py: loop nests, one BLAS call per product, scans as loops). It is
compiled in the background (kernel_compiler.py) from the program's `ASK_ON_RUN`th run and runs in place of the generated Python
from the `USE_FROM_RUN`th on, the program waiting for it there if need be. The switch thus happens at the same
run in every process and every run of a job, so that values replicated over processes stay equal; from it on
values may differ from the first runs' in their last bits (sums are accumulated in order, in float64 for
floats; transcendentals are libm's), all within JAX's tolerances.

A program keeps running as generated Python where any value has more than `MAX_ELEMENTS` elements (its
operations then cost more than calling them), or its transcendental functions compute more than
`TRANSCENDENTAL_ELEMENTS` (libm's are several times slower than NumPy's vectorized ones), or any operation has no
translation (while loops, collectives, sorting, integer division...), or its inputs do not have the shapes it was
traced for (a device's block).

Measured on 2 cores (Xeon, AVX-512): the tiny model's step 1.3 -> 0.64 ms (its numba function: ~0.13 ms); a cold
compilation of its 69 operations takes ~25 s, later processes load it from the kernel cache in ~1 s.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..core.jaxpr import Jaxpr, Var
from .kernel_compiler import KernelCompiler, deferral_active
from .numba_executor import read_only
from .numba_lowering import TYPES, VECTORIZED, Unsupported, Writer, lower, scan_loop, transcendental, whole_value

logger = logging.getLogger("meshax")

MAX_ELEMENTS = 1 << 16  # the largest value of a program compiled whole
# the elements a program's transcendental functions may compute in one run (a GRU's 200 steps of sigmoid and tanh on
# (32, 128): 2.4 million, 40 ms compiled, a few as NumPy calls; a tiny model's softmax: 640)
TRANSCENDENTAL_ELEMENTS = 1 << 14
MIN_EQUATIONS = 8  # fewer operations: the generated Python's calls cost little more than the compiled call
ASK_ON_RUN = 200  # the run on which the program's function is asked for (a program run fewer times compiles nothing)
USE_FROM_RUN = 500  # the run from which it is used, waited for if need be (a loop worth its compilation: 5-30 s)
# a scan's loop run outside a compiled program: each run is many steps, its function sooner worth its compilation
LOOP_ASK_ON_RUN, LOOP_USE_FROM_RUN = 20, 100
WAIT_S = 600.0  # how long that run waits for a compilation under way


def may_compile(jaxpr: Jaxpr) -> bool:
    """Whether `jaxpr` is small enough to be compiled whole (whether it can is known once its source is made)."""
    return len(jaxpr.equations) >= MIN_EQUATIONS and _small(jaxpr, (*jaxpr.constvars, *jaxpr.invars))


def _loop_may_compile(body: Jaxpr, length: int) -> bool:
    """Whether a scan of `body` over `length` rows is small enough to be compiled whole (its stacked xs and ys
    may have more than MAX_ELEMENTS elements)."""
    return length * _transcendental_elements(body) <= TRANSCENDENTAL_ELEMENTS and _sized(body, body.invars)


def _small(jaxpr: Jaxpr, given: Sequence[Var]) -> bool:
    """Whether every value of `jaxpr` (`given` among them) is of a type translated here and has at most
    MAX_ELEMENTS elements (a scan's stacked xs and ys, only indexed by its loop, may have more; its body's values
    not), and its transcendental functions take at most TRANSCENDENTAL_ELEMENTS elements in all."""
    return _transcendental_elements(jaxpr) <= TRANSCENDENTAL_ELEMENTS and _sized(jaxpr, given)


def _transcendental_elements(jaxpr: Jaxpr) -> int:
    """How many elements `jaxpr`'s transcendental functions compute in one run (its scans' bodies once per step)."""
    count = 0
    for eq in jaxpr.equations:
        inner = [e for e in eq.params["cluster"].jaxpr.equations] if eq.primitive.name == "fused" else [eq]
        count += sum(math.prod(e.outputs[0].aval.shape) for e in inner if transcendental(e))
        if eq.primitive.name == "scan":
            count += eq.params["length"] * _transcendental_elements(eq.params["jaxpr"])
    return count


def _sized(jaxpr: Jaxpr, given: Sequence[Var]) -> bool:
    stacked = {x.id for eq in jaxpr.equations if eq.primitive.name == "scan"
               for x in eq.inputs[eq.params["num_consts"] + eq.params["num_carry"]:] if isinstance(x, Var)}
    values = [v for v in given if v.id not in stacked]
    for eq in jaxpr.equations:
        if eq.primitive.name == "scan":
            if not _sized(eq.params["jaxpr"], eq.params["jaxpr"].invars):
                return False
            values.extend(eq.outputs[:eq.params["num_carry"]])
            continue
        values.extend(eq.outputs)
    return all(np.dtype(v.aval.dtype) in TYPES and math.prod(v.aval.shape) <= MAX_ELEMENTS for v in values)


def program_source(jaxpr: Jaxpr) -> str | None:
    """The source of a numba function `kernel(start, stop, *consts, *args, *outputs)` computing `jaxpr`'s
    outputs into the arrays `outputs` (each of its output's type, C-ordered) and returning 0, or returning 1 at
    once where an input's shape is not its variable's (a run with stop 0 returns at once: the compiler's); None
    where `jaxpr` cannot or need not be compiled whole."""
    if not may_compile(jaxpr):
        return None
    w = Writer(jaxpr.outvars)  # values computed straight into the output arrays where they can be
    given = (*jaxpr.constvars, *jaxpr.invars)
    inputs, outputs = _names("a", len(given)), _names("o", len(jaxpr.outvars))
    for name, var in zip(inputs, given):
        w.names[var.id] = name

    def lines() -> None:
        for eq in jaxpr.equations:
            lower(w, eq)
        for output, var in zip(outputs, jaxpr.outvars):
            if not (isinstance(var, Var) and w.names[var.id] == output):
                w.add(f"{output}[{'...' if var.aval.shape else '()'}] = {whole_value(w, var)}")
    return _function_source(w, lines, inputs, [a.aval.shape for a in given], outputs, len(jaxpr.equations))


def scan_source(jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int, reverse: bool) -> str | None:
    """The source of a numba function as `program_source`'s, for a scan of body `jaxpr` over `length` rows:
    its inputs are the consts, the initial carry and the stacked xs, its outputs the final carry and the stacked
    ys; None where the scan cannot or need not be compiled whole."""
    if not _loop_may_compile(jaxpr, length):
        return None
    w = Writer([])
    shapes = [v.aval.shape if k < num_consts + num_carry else (length, *v.aval.shape)
              for k, v in enumerate(jaxpr.invars)]
    inputs, outputs = _names("a", len(shapes)), _names("o", len(jaxpr.outvars))

    def lines() -> None:
        carries = scan_loop(w, jaxpr, num_consts, num_carry, length, reverse, inputs, outputs[num_carry:])
        for output, carry, var in zip(outputs, carries, jaxpr.outvars):
            w.add(f"{output}[...] = {carry}" if var.aval.shape else f"{output}[()] = {carry}[()]")
    return _function_source(w, lines, inputs, shapes, outputs, len(jaxpr.equations))


def _names(stem: str, count: int) -> list[str]:
    return [f"{stem}{k}" for k in range(count)]


def _function_source(w: Writer, lines: Callable[[], None], inputs: Sequence[str],
                     shapes: Sequence[tuple[int, ...]], outputs: Sequence[str], size: int) -> str | None:
    """The kernel's source: `lines()` adds its body to `w` (raising Unsupported where it cannot); inputs of
    the given shapes are checked first."""
    try:
        lines()
    except Unsupported as reason:
        logger.debug("meshax: a program of %d operations is not compiled whole: %s", size, reason)
        return None
    except Exception as error:  # a case the lowerings did not foresee: the program keeps its generated Python
        logger.info("meshax: a program of %d operations is not compiled whole (%s: %s)", size,
                    type(error).__name__, error)
        return None
    shaped = [(name, tuple(map(int, shape))) for name, shape in zip(inputs, shapes) if len(shape)]
    header = ["import math", "import numpy as np", "import numba",
              f"from meshax._src.interpreters.numba_math import {', '.join(VECTORIZED.values())}",
              f"# numba_math {_math_version()}: numba's cache of this source does not see that module change", "",
              *w.constants, "",
              "@numba.njit(nogil=True, cache=True, error_model='numpy')",
              f"def kernel(start, stop, {', '.join([*inputs, *outputs])}):",
              "    if stop == 0:",
              "        return 0",
              *([f"    if {' or '.join(f'{name}.shape != {shape}' for name, shape in shaped)}:",
                 "        return 1"] if shaped else [])]
    return "\n".join(header + w.lines + ["    return 0"]) + "\n"


class WholeProgram:
    """A program's (or a loop's) compiled function once in use (see the module's docstring): `__call__(inputs)` gives
    the outputs, or None where the generated Python is to run this time. `source()` makes its source (None: it
    cannot be compiled); its inputs and outputs are arrays of `in_types` and `out_types` ((shape, dtype) each)."""

    def __init__(self, source: Callable[[], str | None], in_types: Sequence[tuple[tuple[int, ...], np.dtype]],
                 out_types: Sequence[tuple[tuple[int, ...], np.dtype]], compiler: KernelCompiler,
                 loop: bool = False) -> None:
        self._source, self._compiler, self._loop = source, compiler, loop
        self._runs = 0
        self._types, self._outs = list(in_types), list(out_types)
        self._key: tuple | None = None
        self._kernel: Callable[..., int] | None = None

    def __call__(self, inputs: Sequence[Any]) -> list[np.ndarray] | None:
        kernel = self._kernel
        if kernel is None:
            kernel = self._advance()
            if kernel is None:
                return None
        outputs = [np.empty(shape, dtype) for shape, dtype in self._outs]
        if self._run(kernel, inputs, outputs) == 0:
            return outputs
        laid_out = self._laid_out(inputs)
        if laid_out is None or self._run(kernel, laid_out, outputs) != 0:
            return None
        return outputs

    @staticmethod
    def _run(kernel: Callable[..., int], inputs: Sequence[Any], outputs: list[np.ndarray]) -> int:
        """The kernel's status on `inputs` (0: it computed `outputs`); numba's dispatcher checks each argument's
        type, dimensions and C order (2 us for 43 arrays), the kernel their shapes."""
        previous = _blas_threads(1)
        try:
            return kernel(0, 1, *inputs, *outputs)
        except TypeError:  # not an array of the type it was compiled for (a host scalar, a strided view)
            return 1
        finally:
            _blas_threads(previous)

    def _laid_out(self, inputs: Sequence[Any]) -> list[np.ndarray] | None:
        """The inputs as the function takes them (C-ordered arrays of their types), or None where one is not of
        its type (a device's block, a host value: the generated Python takes them)."""
        laid_out = []
        for x, (shape, dtype) in zip(inputs, self._types):
            if type(x) is not np.ndarray or x.shape != shape or x.dtype != dtype:
                return None
            laid_out.append(x if x.flags.c_contiguous else x.copy())  # (ascontiguousarray makes 0-d 1-d)
        return laid_out

    def _advance(self) -> Callable[..., None] | None:
        """Count this run: ask for the function on the `ASK_ON_RUN`th, wait for it on the `USE_FROM_RUN`th
        (a loop's: `LOOP_...`); the function once in use."""
        ask_on, use_from = (LOOP_ASK_ON_RUN, LOOP_USE_FROM_RUN) if self._loop else (ASK_ON_RUN, USE_FROM_RUN)
        self._runs += 1
        if self._runs == ask_on:
            source = self._source()
            if source is not None:
                self._key = ("program", source)
                # inputs read-only, as an Array's buffers are (numba takes writable ones for them too)
                examples = [read_only(np.empty((1,) * len(shape), dtype)) for shape, dtype in self._types]
                examples += [np.empty((1,) * len(shape), dtype) for shape, dtype in self._outs]
                self._compiler.request(self._key, source, examples)
        if self._runs < use_from or self._key is None or deferral_active():
            if self._runs >= use_from:
                self._runs = use_from - 1  # try again on the next run
            return None
        kernel = self._compiler.ready(self._key)
        if kernel is None and self._compiler.wait(WAIT_S):
            kernel = self._compiler.ready(self._key)
        if kernel is None:  # it did not compile: the generated Python runs from now on
            self._key = None
            return None
        kernel.disable_compile()  # other argument types raise TypeError (the generated Python takes them)
        self._kernel = kernel
        return kernel


def _blas_threads(count: int) -> int:
    """Set the threads of the BLAS that numba's products call (SciPy's OpenBLAS: meshax sizes NumPy's per product,
    not this one) to `count`; returns how many it had. A compiled program's products are small (64x64x64 gets two
    threads, which on a busy machine wait for each other), so they run on the calling thread alone."""
    return _thread_setter()(count)


@functools.lru_cache(maxsize=None)
def _thread_setter() -> Callable[[int], int]:
    """`_blas_threads` for the OpenBLAS that SciPy's cython_blas calls (a no-op where there is none to find)."""
    import scipy.linalg.cython_blas  # noqa: F401 - loads SciPy's BLAS (numba's products already have)
    from threadpoolctl import ThreadpoolController

    found = [library for library in ThreadpoolController().lib_controllers if library.internal_api == "openblas"]
    # SciPy's wheel brings its own (beside NumPy's, in numpy.libs); elsewhere they share one
    ours = [library for library in found if os.path.basename(os.path.dirname(library.filepath)) == "scipy.libs"]
    for library in ours or found[:len(found) == 1]:
        dll = ctypes.CDLL(library.filepath)
        for name in (f"{p}openblas_{{}}_num_threads{s}" for p in ("", "scipy_") for s in ("", "64_", "_64")):
            if hasattr(dll, name.format("set")) and hasattr(dll, name.format("get")):
                set_threads, get_threads = getattr(dll, name.format("set")), getattr(dll, name.format("get"))

                def setter(count: int) -> int:
                    previous = get_threads()
                    if previous != count:
                        set_threads(count)
                    return previous

                return setter
    return lambda count: count


@functools.lru_cache(maxsize=None)
def _math_version() -> str:
    """A hash of numba_math.py, part of every source: a change to it makes new sources, compiled afresh."""
    return hashlib.sha256(Path(__file__).with_name("numba_math.py").read_bytes()).hexdigest()[:16]


def _types(avals: Iterable[Any]) -> list[tuple[tuple[int, ...], np.dtype]]:
    return [(tuple(a.shape), np.dtype(a.dtype)) for a in avals]


def scan_program(jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
                 compiler: KernelCompiler) -> WholeProgram | None:
    """The WholeProgram of a scan of body `jaxpr` over `length` rows (see `scan_source`), or None where it is not
    small enough."""
    if not _loop_may_compile(jaxpr, length):
        return None
    rows = len(jaxpr.invars) - num_consts - num_carry
    stacked = [(length, *shape) for shape, _ in _types(v.aval for v in jaxpr.outvars[num_carry:])]
    in_types = _types(v.aval for v in jaxpr.invars)
    in_types[len(in_types) - rows:] = [((length, *shape), dtype) for shape, dtype in in_types[len(in_types) - rows:]]
    out_types = _types(v.aval for v in jaxpr.outvars)
    out_types[num_carry:] = [(shape, dtype) for shape, (_, dtype) in zip(stacked, out_types[num_carry:])]
    return WholeProgram(lambda: scan_source(jaxpr, num_consts, num_carry, length, reverse), in_types, out_types,
                        compiler, loop=True)


def whole_program(jaxpr: Jaxpr, compiler: KernelCompiler) -> WholeProgram | None:
    """The WholeProgram of an executable jaxpr (None where it is not small enough)."""
    if not may_compile(jaxpr):
        return None
    return WholeProgram(lambda: program_source(jaxpr), _types(v.aval for v in (*jaxpr.constvars, *jaxpr.invars)),
                        _types(v.aval for v in jaxpr.outvars), compiler)
