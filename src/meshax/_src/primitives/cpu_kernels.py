"""NumPy kernels of two primitives where a plain NumPy call leaves speed behind: a branchless select and a
dot_general that is one BLAS matmul (or one per block of the result, on this call's share of the threads)."""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..runtime import compute_pool as device_pool
from ..runtime import cpu_budget


def select(pred: Any, on_true: Any, on_false: Any, out: np.ndarray | None = None) -> np.ndarray:
    """np.where(pred, on_true, on_false), without branches for large arrays: the chosen bit patterns are blended
    with a mask (all ones where pred holds). np.where branches per element, which costs a misprediction on
    half the elements of a random mask (~10x slower); the bits are the same. `out`: a C-ordered array of the
    result's shape and type that the blend may be written into (else a new one is)."""
    pred, on_true, on_false = np.asarray(pred), np.asarray(on_true), np.asarray(on_false)
    if pred.size < BLEND_MIN_ELEMENTS and on_true.size < BLEND_MIN_ELEMENTS and on_false.size < BLEND_MIN_ELEMENTS:
        return np.where(pred, on_true, on_false)
    dtype = on_true.dtype
    shape = np.broadcast_shapes(pred.shape, on_true.shape, on_false.shape)
    if (pred.dtype != np.bool_ or on_false.dtype != dtype or dtype.itemsize not in (1, 2, 4, 8) or
            dtype.hasobject or math.prod(shape) < BLEND_MIN_ELEMENTS):
        return np.where(pred, on_true, on_false)
    bits = np.dtype(f"u{dtype.itemsize}")
    if out is not None and out.shape == shape and out.dtype == dtype and out.flags.c_contiguous and pred.shape == shape:
        mask = np.negative(pred.view(np.uint8), dtype=bits, out=out.view(bits))  # 0 or all ones
    else:
        mask = np.negative(pred.view(np.uint8), dtype=bits)
    if mask.shape != shape:
        mask = np.broadcast_to(mask, shape).copy()  # the result's buffer too
    t, f = on_true.view(bits), on_false.view(bits)
    if f.size == 1 and not f.any():
        out = np.bitwise_and(t, mask, out=mask)
    elif t.size == 1 and not t.any():
        out = np.bitwise_and(f, np.invert(mask, out=mask), out=mask)
    else:
        out = np.bitwise_xor(f, np.bitwise_and(np.bitwise_xor(t, f), mask, out=mask), out=mask)
    return out.view(dtype)


select.into = select  # takes out= (cpu_executor.py)
# below this many elements np.where (one call) costs less than the blend's passes, even on a random mask: relu's
# derivative over 4096 float32, 6 vs 13 us; 8192: 11 vs 14; 16384: 21 vs 15 (2-core AMD EPYC, NumPy 2.5)
BLEND_MIN_ELEMENTS = 16384


def dot_general(lhs: np.ndarray, rhs: np.ndarray, *, dimension_numbers: Any,
                      preferred_element_type: Any = None, out_sharding: Any = None) -> np.ndarray:
    """A (batched) matrix product on BLAS: each operand viewed as (batch, free, contracted) matrices, transposed
    and reshaped (views where the strides allow), then one np.matmul (an outer product contracts nothing: k = 1),
    or one per block of the result where this call may use several threads (device_pool.call_parts). Outside
    those, BLAS gets the threads that pay for the product's size and that the machine gives now
    (device_pool.product_blas)."""
    if preferred_element_type is not None and np.dtype(preferred_element_type) != lhs.dtype:
        # accumulate in the wider of the operands' type and the preferred one (int8 products summed in int32)
        wide = np.promote_types(lhs.dtype, preferred_element_type)
        product = dot_general(lhs.astype(wide), rhs.astype(wide), dimension_numbers=dimension_numbers)
        return product.astype(preferred_element_type)
    if dimension_numbers == MATRIX_PRODUCT and lhs.ndim == 2 == rhs.ndim and lhs.dtype is rhs.dtype and \
            lhs.dtype in _BLAS_TYPES and device_pool.call_parts() < 2:
        return _matrix_product(lhs, rhs)
    try:
        plan = _product_plan(lhs.shape, rhs.shape, dimension_numbers)
    except TypeError:  # dimension numbers given as lists
        plan = _product_plan.__wrapped__(lhs.shape, rhs.shape, dimension_numbers)
    left_order, right_order, left_shape, right_shape, out_shape, m, n = plan
    multiply_adds = m * n * left_shape[-1]
    if multiply_adds >= _BLAS_MAY_THREAD_FROM:
        device_pool.product_blas(multiply_adds, m)
    left, right = _matrices(lhs.transpose(left_order), rhs.transpose(right_order), left_shape, right_shape,
                            out_shape[:len(dimension_numbers[1][0])])
    left, right = _blas_ready(left), _blas_ready(right)
    b = left.shape[:-2]
    parts = device_pool.call_parts()
    if b and b[0] > 1 and parts < 2 and multiply_adds * math.prod(b) >= SPLIT_BATCH_FROM and left.dtype in _BLAS_TYPES and \
            multiply_adds < 2 * cpu_budget.PRODUCT_PER_THREAD and not device_pool.in_batch() and \
            (threads := device_pool.available_threads()) > 1:
        return _matrices_side_by_side(left, right, min(threads, b[0]), multiply_adds, m).reshape(out_shape)
    if parts < 2 or left.dtype not in _BLAS_TYPES or max(m, n) < 64 * parts:
        product = np.matmul(left, right)
        if product.dtype != left.dtype and left.dtype == right.dtype:  # ml_dtypes' matmul (bfloat16, float8 ...)
            product = product.astype(left.dtype)  # returns float32: round to the operands' type, as XLA does
        return product.reshape(out_shape)
    out = np.empty((*b, m, n), np.result_type(left, right))
    rows = m >= n  # split the longer side of the result into `parts` blocks, one BLAS call each
    size = m if rows else n
    bounds = [(size * i // parts, size * (i + 1) // parts) for i in range(parts)]
    device_pool.run_parts([functools.partial(np.matmul, left[..., lo:hi, :], right, out=out[..., lo:hi, :]) if rows
                           else functools.partial(np.matmul, left, right[..., lo:hi], out=out[..., lo:hi])
                           for lo, hi in bounds])
    return out.reshape(out_shape)


# a float sum over adjacent axes is one BLAS product with a vector of ones where NumPy walks short runs one at a
# time: the rows of a sum along the last axes (at least ROW_SUM_MIN_ROWS of at least SUM_MIN_LENGTH; softmax's
# 16x8x128 rows of 128 float32: 2.0 ms against 1.1 ms; layer norm's 2048 rows of 256: 0.28 against 0.1 ms), and
# the columns of a sum along leading or middle axes (at least SUM_MIN_SIZE elements; a bias gradient over
# 64x32x32 positions of 32 features: 0.86 against 0.15 ms, a mean over an image's 32x32 positions of 64 images:
# 0.82 against 0.09 ms, 2 cores). BLAS sums in float32 with several accumulators, as XLA's vectorized reductions do
# (NumPy's order differs in the last bits). A sum of all elements stays NumPy's (pairwise, more exact).
ROW_SUM_MIN_ROWS, SUM_MIN_LENGTH, SUM_MIN_SIZE = 256, 16, 4096
BLAS_FLOATS = frozenset(map(np.dtype, (np.float32, np.float64)))  # the real types BLAS computes in


def reduce_sum(x: np.ndarray, axis: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    """np.add.reduce(x, axis, keepdims=keepdims); a float sum over adjacent axes as one BLAS product with ones."""
    sums = _summed_by_product(x, axis)
    if sums is None:
        return np.add.reduce(x, axis=axis, keepdims=keepdims)
    kept = tuple(1 if d in axis else size for d, size in enumerate(x.shape)) if keepdims else \
        tuple(size for d, size in enumerate(x.shape) if d not in axis)
    return sums.reshape(kept)


def _summed_by_product(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray | None:
    """The sum of C-ordered float `x` over the adjacent `axis` as (lead, tail) or (tail,) sums of a product with
    ones, or None where NumPy's reduction is as good (the sizes above)."""
    if not isinstance(x, np.ndarray) or not axis or x.dtype not in BLAS_FLOATS or not x.flags.c_contiguous:
        return None
    first, last = min(axis), max(axis) + 1
    if last - first != len(axis):
        return None
    lead, length, tail = math.prod(x.shape[:first]), math.prod(x.shape[first:last]), math.prod(x.shape[last:])
    if length < SUM_MIN_LENGTH:
        return None
    if tail == 1:
        if lead < ROW_SUM_MIN_ROWS:
            return None
        device_pool.product_blas(x.size, lead)
        return np.dot(x.reshape(lead, length), _ones(length, x.dtype))
    if x.size < SUM_MIN_SIZE:
        return None
    # one (1 x length) @ (length x tail) BLAS call per leading index, on one BLAS thread (as fast as two: it is bound
    # by reading x; OpenBLAS rounds such a call differently on 3 or more): a device's sums have the same bits whether
    # summed alone or stacked with other devices' (process_blocks), and in every process whatever its load
    device_pool.product_blas(0, 1)
    return np.matmul(_ones(length, x.dtype).reshape(1, length), x.reshape(lead, length, tail))


@functools.lru_cache(maxsize=16)
def _ones(length: int, dtype: np.dtype) -> np.ndarray:
    ones = np.ones(length, dtype)
    ones.flags.writeable = False
    return ones


# a batch of products of at least this many multiply-adds in all (on one device, outside a batch of run_each), of
# matrices the thread policy gives one BLAS thread (cpu_budget.product_threads), is split among the threads the
# machine gives now, one BLAS thread each: OpenBLAS runs a batch one matrix at a time, and matrices this small on
# one thread (attention's 128 x [128x128 @ 128x32]: 1.77 ms on one thread,
# 0.71 ms in two halves side by side, 2 quiet cores)
SPLIT_BATCH_FROM = 1 << 21


def _matrices_side_by_side(left: np.ndarray, right: np.ndarray, pieces: int, multiply_adds: int,
                           rows: int) -> np.ndarray:
    """np.matmul of two stacks of matrices (the same batch size), the batch cut into `pieces` run side by side."""
    device_pool.product_blas(multiply_adds, rows)  # one thread per matrix of this size
    batch = left.shape[0]  # (the first of its batch axes where they are kept apart)
    out = np.empty((*left.shape[:-1], right.shape[-1]), np.result_type(left, right))
    bounds = [(batch * i // pieces, batch * (i + 1) // pieces) for i in range(pieces)]
    device_pool.run_each([functools.partial(np.matmul, left[lo:hi], right[lo:hi], out=out[lo:hi])
                          for lo, hi in bounds], blas=False)
    return out


MATRIX_PRODUCT = (((1,), (0,)), ((), ()))  # a 2-D lhs's columns against a 2-D rhs's rows: x @ W


def _matrices_product_for(params: dict[str, Any], in_types: list[Any]) -> Any:
    """For a generated program (codegen.py): a call `(lhs, rhs)` computing dot_general with `params` on two
    matrices of one BLAS type (`in_types`: their (shape, dtype)), whose result is an array of that type; None
    for other products. Each operand is one matrix or its transposed view (x @ W, x.T @ g, g @ W.T, a.T @ b.T),
    so the call is np.matmul on them, with the threads _matrix_product would give (its size known in advance; the
    general path inside a batch of run_each, whose calls may split)."""
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    preferred = params.get("preferred_element_type")
    if None in in_types or lb or rb or len(lc) != 1 or len(rc) != 1:
        return None
    (left_shape, dtype), (right_shape, right_dtype) = in_types
    if len(left_shape) != 2 or len(right_shape) != 2 or dtype != right_dtype or dtype not in _BLAS_TYPES or \
            (preferred is not None and np.dtype(preferred) != dtype):
        return None
    left_transposed, right_transposed = tuple(lc) == (0,), tuple(rc) == (1,)
    rows = left_shape[1] if left_transposed else left_shape[0]
    multiply_adds = rows * right_shape[0 if right_transposed else 1] * left_shape[lc[0]]
    threaded = multiply_adds >= _BLAS_MAY_THREAD_FROM

    def product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        if device_pool.in_batch():
            return dot_general(lhs, rhs, **params)
        if threaded:
            device_pool.product_blas(multiply_adds, rows)
        left, right = lhs.T if left_transposed else lhs, rhs.T if right_transposed else rhs
        return np.matmul(_blas_ready(left), _blas_ready(right))

    return product


dot_general.specialize = _matrices_product_for  # type: ignore[attr-defined]


def _matrix_product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """`lhs @ rhs` of two matrices of one BLAS type, on this controller's threads: the common product without
    the general path's plan, transposes and reshapes (6 of its 9.5 us for a 32x64 @ 64x64 product)."""
    m, k = lhs.shape
    multiply_adds = m * rhs.shape[1] * k
    if multiply_adds >= _BLAS_MAY_THREAD_FROM:
        device_pool.product_blas(multiply_adds, m)
    return np.matmul(_blas_ready(lhs), _blas_ready(rhs))


@functools.lru_cache(maxsize=4096)
def _product_plan(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...], dimension_numbers: Any) -> tuple:
    """How a product of these shapes runs as np.matmul: each operand's axes in (batch, free, contracted) order for
    the left and (batch, contracted, free) for the right, the matrices' shapes, the result's shape, and m and n."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [d for d in range(len(lhs_shape)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rhs_shape)) if d not in rc and d not in rb]
    batch = [lhs_shape[d] for d in lb]
    out_shape = tuple(batch) + tuple(lhs_shape[d] for d in lf) + tuple(rhs_shape[d] for d in rf)
    m = math.prod(lhs_shape[d] for d in lf)
    k = math.prod(lhs_shape[d] for d in lc)
    n = math.prod(rhs_shape[d] for d in rf)
    b = (math.prod(batch),) if batch else ()
    return (tuple(lb) + tuple(lf) + tuple(lc), tuple(rb) + tuple(rc) + tuple(rf), (*b, m, k), (*b, k, n), out_shape,
            m, n)


# products of fewer multiply-adds (m * n * k) run on one BLAS thread whatever its limit: they need not set it
# (OpenBLAS 0.3.34, 2 threads beside 2 busy loops: matrix products from 262144 stall on the second thread, a
# matrix-vector product from m * n = 524176 but not at 262144, an inner product not up to 10^6)
_BLAS_MAY_THREAD_FROM = 1 << 16
_BLAS_TYPES = BLAS_FLOATS | frozenset(map(np.dtype, (np.complex64, np.complex128)))


def _matrices(left: np.ndarray, right: np.ndarray, left_shape: tuple[int, ...], right_shape: tuple[int, ...],
              batch: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The operands (their axes in batch, row, column order) as the matrices of their shapes: their batch axes
    merged into one where that is a view of both, else kept apart (np.matmul walks them; merging a transposed
    attention's heads copied the operand: gpt_scan's step spent 67 ms in such reshapes)."""
    if len(batch) > 1 and not (_mergeable(left.shape[:len(batch)], left.strides[:len(batch)]) and
                               _mergeable(right.shape[:len(batch)], right.strides[:len(batch)])):
        return left.reshape((*batch, *left_shape[-2:])), right.reshape((*batch, *right_shape[-2:]))
    return left.reshape(left_shape), right.reshape(right_shape)


def _mergeable(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether axes of these sizes and strides merge into one without a copy."""
    kept = [(size, stride) for size, stride in zip(shape, strides) if size != 1]
    return all(outer == inner * size for (_, outer), (size, inner) in zip(kept, kept[1:]))


def _blas_ready(matrices: np.ndarray) -> np.ndarray:
    """`matrices` as BLAS can take them (unit stride along rows or columns; np.matmul would otherwise use its
    slow loop): the view itself when it is, else a contiguous copy."""
    if matrices.flags.forc or matrices.dtype not in _BLAS_TYPES or matrices.size == 0:  # the first: most often
        return matrices
    item = matrices.itemsize
    (rows, cols), (row_stride, col_stride) = matrices.shape[-2:], matrices.strides[-2:]
    if (col_stride == item and row_stride >= item * max(cols, 1)) or \
            (row_stride == item and col_stride >= item * max(rows, 1)):
        return matrices
    return np.ascontiguousarray(matrices)


