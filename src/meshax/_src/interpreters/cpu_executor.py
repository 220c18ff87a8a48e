"""The CPU executor of fused clusters: a compiled loop (numba) or numexpr where they apply, else NumPy's kernels
on blocks of rows spread over this controller's threads.

A cluster (fusion.py) is a tree of elementwise equations with one output. A large one runs
- as one loop compiled by numba (numba_executor.py) when numba can express all of it (float arithmetic,
  comparisons, select, max/min, exact conversions) and its kernel is compiled, in row ranges over all of the
  call's threads (`device_pool.call_threads`; the loop holds no GIL);
- else through numexpr (numexpr_executor.py), in one pass, when numexpr can express all of it (integer
  chains) and the controller has enough compute threads for numexpr to beat NumPy
  (`NumexprExecutor.worthwhile`);
- else, for a controller of `min_threads` compute threads or more, as NumPy calls on blocks of rows of the
  output (about `block_elements` each, written straight into the output's rows, their intermediates into
  buffers no longer read), the blocks shared among device_pool's threads (NumPy releases the GIL in its
  loops; a device's call run side by side with the other devices' uses its part of the threads); this takes
  every elementwise operation NumPy runs the same on any block (`BLOCKWISE`), of any dtype;
- else as the NumPy calls on the whole arrays.
A matrix cluster whose inputs mix C and Fortran order (a weight's update with its gradient, a transposed
matmul result) runs on square tiles before any of these: NumPy would walk one of the inputs a page per
element. Small clusters (under `min_elements`) always run as the whole-array NumPy calls.
The results are the same bit for bit in every case: elementwise NumPy kernels compute each element
alone, and numba and numexpr are given only operations whose results equal NumPy's.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np

from ..runtime import compute_pool as device_pool
from ..core.core import impl_rules
from ..core.jaxpr import Equation, Jaxpr, Literal, Var
from ..profiler import recorder
from .numba_executor import NumbaExecutor
from .numexpr_executor import NumexprExecutor

# elementwise primitives whose NumPy implementation gives each element the same value on any block of rows, that
# fused clusters may run block by block (transcendentals too give one value whatever the block, but stay out of
# clusters: numba's kernels would compute them with libm, whose bits differ from NumPy's)
BLOCKWISE = frozenset({
    "add", "add_any", "sub", "mul", "div", "neg", "max", "min", "abs", "sign", "square", "reciprocal", "sqrt",
    "floor", "ceil", "round", "trunc", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "not", "select",
    "convert_element_type", "broadcast_in_dim", "isnan", "isinf", "isfinite", "signbit", "copysign", "integer_pow",
})


class CpuExecutor:
    """Runs clusters on this controller's CPU threads (the executor of device kind "cpu")."""

    kind = "cpu"
    min_elements = 32768  # smaller outputs run as whole-array NumPy calls (splitting costs more than it saves)
    # elements of one block of rows (2 MiB of float32): each block's NumPy calls take the GIL between passes, and
    # smaller blocks spend longer waiting for it than they gain from cache (a 16-core host, 4 threads, where(h + b
    # > 0, g, 0) over (2048, 1024): 3.3 ms in blocks of 131072 elements, 2.6 of 262144, 1.9 of 524288)
    block_elements = 524288
    # fewer compute threads than this: whole-array NumPy calls (on a 2-core machine, blocks over 1 or 2
    # threads measured slower: 2.1 vs 1.6 ms for max(h + b, 0) over (2048, 1024), the data already in cache)
    min_threads = 4
    # at most this many threads run a cluster's blocks: each block's NumPy calls take and give back the GIL
    # several times, and more threads spend longer waiting for it than they save (a 16-core host, relu's
    # derivative over (2048, 1024) inside a training step: 5.3 ms on 16 threads, 4.1 on 8, 2.8-3.2 on 4)
    max_threads = 4
    tile = 256  # rows and columns of one tile of a matrix whose inputs mix C and Fortran order

    def __init__(self) -> None:
        self.numba = NumbaExecutor()
        self.numexpr = NumexprExecutor()

    def supports(self, eq: Equation) -> bool:
        """Whether `eq` can be part of a cluster."""
        if eq.primitive.multiple_results or len(eq.outputs) != 1 or eq.primitive not in impl_rules:
            return False
        return self.numexpr.supports(eq) or eq.primitive.name in BLOCKWISE

    def execute(self, cluster: Any, inputs: Sequence[np.ndarray], out_shape: tuple[int, ...],
                out: np.ndarray | None = None) -> np.ndarray:
        """The cluster's output, of local shape `out_shape`, from the local blocks of its inputs; written into
        `out` (C-ordered, of that shape and the output's type) where given."""
        elements = math.prod(out_shape)
        if elements < self.min_elements:
            return written(run_unfused(cluster.jaxpr, inputs, out_shape), out)
        plan = cluster.kernel()
        if _mixed_orders(inputs, out_shape):
            return written(_run_in_tiles(cluster, inputs, out_shape, self.tile), out)
        if plan.numba is not None and len(out_shape) > 0 and self.numba.worthwhile(elements):
            threads = device_pool.call_threads()
            done = self.numba.run(plan.numba, inputs, out_shape, cluster.out_aval.dtype, out,
                                  lambda calls: device_pool.spread(calls, threads), threads)
            if done is not None:
                return done
        if plan.numexpr is not None and self.numexpr.worthwhile(elements):
            return written(self.numexpr.run(plan.numexpr, inputs, out_shape, cluster.out_aval.dtype), out)
        threads = min(device_pool.call_threads(), self.max_threads)
        if threads < self.min_threads or plan.row_axes is None or len(out_shape) == 0 or out_shape[0] < 2:
            return run_unfused(cluster.jaxpr, inputs, out_shape, plan.last_reads, out)
        return _run_in_blocks(cluster, plan, inputs, out_shape, threads, self.block_elements, out)

    def compile(self, cluster: Jaxpr) -> "_Plan":
        """How `cluster` can run: its numba program and its numexpr program (None where one cannot express it),
        along which axis of each input the output's rows lie (None: the cluster cannot be split into blocks of
        rows), and where its intermediates are read for the last time."""
        begin = recorder.now() if recorder.on else 0
        supported = all(self.numexpr.supports(eq) for eq in cluster.equations)
        plan = _Plan(self.numba.compile(cluster), self.numexpr.compile(cluster) if supported else None,
                     _row_axes(cluster), _last_reads(cluster))
        if begin:  # on the track of the device call that needed it
            recorder.add("compile fused cluster", "compile", None, begin, recorder.now(),
                         {"equations": len(cluster.equations), "numba": plan.numba is not None,
                          "numexpr": plan.numexpr is not None})
        return plan


class _Plan:
    def __init__(self, numba: Any, numexpr: Any, row_axes: list[int | None] | None,
                 last_reads: list[list[int]]) -> None:
        self.numba = numba
        self.numexpr = numexpr
        self.row_axes = row_axes  # per input: its axis along the output's first axis (None: it broadcasts)
        self.last_reads = last_reads  # per equation: the intermediates it reads for the last time


def _last_reads(cluster: Jaxpr) -> list[list[int]]:
    """Per equation of `cluster`, the ids of the values computed inside it that no later equation reads (nor
    the cluster's output): their buffers are free from then on."""
    made = {eq.outputs[0].id for eq in cluster.equations} - {v.id for v in cluster.outvars if isinstance(v, Var)}
    last: dict[int, int] = {}
    for position, eq in enumerate(cluster.equations):
        for x in eq.inputs:
            if isinstance(x, Var) and x.id in made:
                last[x.id] = position
    reads: list[list[int]] = [[] for _ in cluster.equations]
    for var_id, position in last.items():
        reads[position].append(var_id)
    return reads


def _row_axes(cluster: Jaxpr) -> list[int | None] | None:
    """Per input of `cluster`, which of its axes runs along the output's first axis, if one does: each
    equation's output has the cluster's output shape; an elementwise operand aligns its trailing axes with
    it, a broadcast maps them by `broadcast_dimensions`. None when an input is read in two ways."""
    ndim = len(cluster.outvars[0].aval.shape)
    found: dict[int, int | None] = {}
    for eq in cluster.equations:
        for x in eq.inputs:
            if not isinstance(x, Var):
                continue
            if eq.primitive.name == "broadcast_in_dim":
                dims = eq.params["broadcast_dimensions"]
                axis = dims.index(0) if 0 in dims else None
            else:
                axis = 0 if x.aval.ndim == ndim else None
            if found.setdefault(x.id, axis) != axis:
                return None
    return [found.get(v.id) for v in cluster.invars]


def written(value: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """`value`, copied into `out` where one is given (and `value` was not written there already)."""
    if out is None:
        return value
    if (value.shape != out.shape or value.dtype != out.dtype or value.strides != out.strides
            or value.ctypes.data != out.ctypes.data):
        out[...] = value
    return out


def _run_in_blocks(cluster: Any, plan: "_Plan", inputs: Sequence[np.ndarray],
                   out_shape: tuple[int, ...], threads: int, block_elements: int,
                   out: np.ndarray | None = None) -> np.ndarray:
    rows = out_shape[0]
    row_size = max(1, math.prod(out_shape[1:]))
    per_block = max(1, min(block_elements // row_size, -(-rows // threads)))
    out = np.empty(out_shape, cluster.out_aval.dtype) if out is None else out

    def block(start: int) -> None:
        stop = min(start + per_block, rows)
        pieces = [x[(slice(None),) * axis + (slice(start, stop),)] if axis is not None and x.shape[axis] == rows
                  else x for x, axis in zip(inputs, plan.row_axes)]
        run_unfused(cluster.jaxpr, pieces, (stop - start,) + tuple(out_shape[1:]), plan.last_reads, out[start:stop])

    device_pool.spread([functools.partial(block, start) for start in range(0, rows, per_block)], threads)
    return out


def _mixed_orders(inputs: Sequence[np.ndarray], out_shape: tuple[int, ...]) -> bool:
    """Whether a matrix cluster reads a Fortran-ordered input (a transposed matmul result, as gradients of
    weights are) beside C-ordered ones, every input being of the output's shape or a single element: NumPy
    would then walk one of them across its rows, a page per element."""
    if len(out_shape) != 2 or min(out_shape) < 2:
        return False
    full = [x for x in inputs if x.size > 1]
    if any(x.shape != out_shape for x in full):
        return False
    fortran = [x.flags.f_contiguous and not x.flags.c_contiguous for x in full]
    return any(fortran) and not all(fortran)


def _run_in_tiles(cluster: Any, inputs: Sequence[np.ndarray], out_shape: tuple[int, ...], tile: int) -> np.ndarray:
    """The cluster on square tiles of the output (C-ordered), each tile's inputs read as tiles too: every
    input stays cache- and page-friendly whatever its order. The same values as one whole-array pass."""
    rows, cols = out_shape
    out = np.empty(out_shape, cluster.out_aval.dtype)
    for r in range(0, rows, tile):
        for c in range(0, cols, tile):
            window = (slice(r, min(r + tile, rows)), slice(c, min(c + tile, cols)))
            pieces = [x[window] if x.size > 1 else x for x in inputs]
            out[window] = run_unfused(cluster.jaxpr, pieces, (window[0].stop - r, window[1].stop - c))
    return out


def run_unfused(jaxpr: Jaxpr, inputs: Sequence[np.ndarray], out_shape: tuple[int, ...],
                last_reads: Sequence[Sequence[int]] | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """A cluster as the NumPy calls it stands for (every value of a cluster has the output's shape). With
    `last_reads` (`_last_reads`), an equation whose implementation takes an output buffer (`impl.into`: a
    plain NumPy function, select) writes its result into the buffer of an intermediate no longer read, where
    one of its shape and type is free: the same values, less memory traffic (a 2-core step's relu and SGD
    updates: 1.05 -> 0.6 ms a cluster). The last equation writes into `out` where one is given (copied there
    where its implementation takes none)."""
    calls = prepared_calls(jaxpr) if last_reads is None and out is None else None
    if calls:
        return _run_calls(calls, inputs, out_shape)
    env: dict[int, Any] = {v.id: x for v, x in zip(jaxpr.invars, inputs)}
    free: list[np.ndarray] = []  # buffers this call made whose values nobody reads any more
    for position, eq in enumerate(jaxpr.equations):
        args = [np.asarray(x.value, dtype=x.aval.dtype) if isinstance(x, Literal) else env[x.id] for x in eq.inputs]
        extra = {"local_shapes": [out_shape]} if eq.primitive.needs_local_shape else {}
        impl = impl_rules[eq.primitive]
        dtype = eq.outputs[0].aval.dtype
        done = last_reads[position] if last_reads is not None else ()
        dying = [b for b in (env.pop(i) for i in done) if _owned(b, env)]  # read for the last time here
        if out is not None and position == len(jaxpr.equations) - 1 and takes_out(eq.primitive.name, impl, args, dtype):
            into = out
        else:
            into = _free_buffer(eq, impl, args, dying, free, dtype, out_shape) if last_reads is not None else None
        value = np.asarray(impl(*args, **eq.params, **extra) if into is None else impl.into(*args, out=into))
        env[eq.outputs[0].id] = value if value.dtype == dtype else value.astype(dtype)
        free.extend(b for b in dying if b is not into and not np.may_share_memory(b, value))
    return env[jaxpr.outvars[0].id] if out is None else written(env[jaxpr.outvars[0].id], out)


def _run_calls(calls: list[tuple], inputs: Sequence[np.ndarray], out_shape: tuple[int, ...]) -> np.ndarray:
    """A cluster's prepared calls (`prepared_calls`) made in order on numbered values."""
    values = list(inputs) + [None] * len(calls)
    local = {"local_shapes": [out_shape]}
    for position, (impl, reads, literals, params, local_shape, dtype) in enumerate(calls, len(inputs)):
        args = [values[i] if i >= 0 else literals[-1 - i] for i in reads]
        values[position] = typed(impl(*args, **params, **local) if local_shape else impl(*args, **params), dtype)
    return values[-1]


def typed(value: Any, dtype: np.dtype) -> np.ndarray:
    """An implementation's result as an array of its equation's type."""
    if type(value) is not np.ndarray:
        value = np.asarray(value)
    return value if value.dtype == dtype else value.astype(dtype)


def constant(literal: Literal) -> np.ndarray:
    """A literal's value as a read-only array of its type, made once to be shared by every call that reads it."""
    value = np.array(literal.value, dtype=literal.aval.dtype)
    value.flags.writeable = False
    return value


def prepared_calls(jaxpr: Jaxpr) -> list[tuple]:
    """A cluster's equations as calls (made once, kept on it): per equation its implementation, where its operands
    are (an index into the values: the cluster's inputs, then each equation's result; negative: a literal), those
    literals as arrays, its parameters, whether it needs the local shape, and its result's type. Empty where the
    cluster's output is not its last equation's."""
    calls = getattr(jaxpr, "_calls", None)
    if calls is None:
        result = jaxpr.outvars[0]
        last = jaxpr.equations[-1].outputs[0] if jaxpr.equations else None
        calls = jaxpr._calls = _calls(jaxpr) if isinstance(result, Var) and result is last else []
    return calls


def _calls(jaxpr: Jaxpr) -> list[tuple]:
    index = {v.id: i for i, v in enumerate(jaxpr.invars)}
    calls = []
    for eq in jaxpr.equations:
        literals = [constant(x) for x in eq.inputs if isinstance(x, Literal)]
        reads, seen = [], 0
        for x in eq.inputs:
            if isinstance(x, Literal):
                seen += 1
                reads.append(-seen)
            else:
                reads.append(index[x.id])
        index[eq.outputs[0].id] = len(jaxpr.invars) + len(calls)
        calls.append((impl_rules[eq.primitive], tuple(reads), literals, eq.params, eq.primitive.needs_local_shape,
                      np.dtype(eq.outputs[0].aval.dtype)))
    return calls


def _owned(buffer: np.ndarray, env: dict[int, Any]) -> bool:
    """Whether `buffer` (a value computed in the cluster, no longer read) may be overwritten: it owns its memory
    and no value still read shares it."""
    return (buffer.flags.owndata and buffer.flags.writeable and buffer.flags.c_contiguous
            and not any(np.may_share_memory(buffer, other) for other in env.values()))


def takes_out(name: str, impl: Any, args: Sequence[Any], dtype: np.dtype) -> bool:
    """Whether primitive `name`'s implementation can write its result (of `dtype`) into a given buffer that none of
    its operands `args` uses (`impl.into`)."""
    return getattr(impl, "into", None) is not None and (
        name == "select" or all(np.asarray(a).dtype == dtype for a in args))


def _free_buffer(eq: Equation, impl: Any, args: list[np.ndarray], dying: list[np.ndarray], free: list[np.ndarray],
                 dtype: np.dtype, out_shape: tuple[int, ...]) -> np.ndarray | None:
    """A buffer of the result's shape and type that `eq`'s result may be written into: for a NumPy function whose
    operands all have the result's type, an operand read for the last time here (`dying`; elementwise, each
    element is read before it is written) or one from `free` (then taken from it); for a select, which
    writes its mask before reading its operands, only one from `free`."""
    if not takes_out(eq.primitive.name, impl, args, dtype):
        return None
    candidates = free if eq.primitive.name == "select" else dying + free
    for buffer in candidates:
        if buffer.shape == out_shape and buffer.dtype == dtype:
            free[:] = [f for f in free if f is not buffer]
            return buffer
    return None
