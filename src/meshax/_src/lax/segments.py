"""Segment reductions (as jax.ops): `data`'s rows combined by the segment id of each, built on lax's scatter
primitives so that they run eagerly, under jit, grad and vmap, and on sharded Arrays."""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from ..arrays.out_sharding import reshard
from ..core.core import ConcretizationTypeError, Tracer, aval_of
from . import gather_scatter as S
from . import lax_ops as L
from .special import bitcast_convert_type

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _jnp() -> Any:
    from .. import numpy as jnp

    return jnp


def _identity(kind: str, dtype: np.dtype) -> Any:
    """The value an empty segment holds: the identity of the reduction `kind` in `dtype`."""
    if kind == "add":
        return np.zeros((), dtype)
    if kind == "multiply":
        return np.ones((), dtype)
    if dtype == np.bool_:
        return np.array(kind == "min")
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.array(info.max if kind == "min" else info.min, dtype)
    return np.array(np.inf if kind == "min" else -np.inf, dtype)


def _num_segments(num_segments: Any, segment_ids: Any) -> int:
    """`num_segments` as a Python int (one more than the largest id when None); it must be concrete."""
    if num_segments is None:
        if isinstance(segment_ids, Tracer):
            raise ConcretizationTypeError(
                "segment reductions need a concrete num_segments, but num_segments=None asks for the largest of the "
                "traced segment_ids; pass num_segments=<int> (static under jit).")
        num_segments = int(np.max(np.asarray(segment_ids), initial=-1)) + 1
    if isinstance(num_segments, Tracer):
        raise ConcretizationTypeError(
            f"segment reductions got a traced num_segments {num_segments}; pass it as a Python int (mark it static "
            "with static_argnums/static_argnames under jit).")
    num_segments = operator.index(num_segments)
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    return num_segments


def _scatter(kind: str, data: Any, segment_ids: Any, num_segments: int, indices_are_sorted: bool,
             unique_indices: bool, mode: Any) -> Any:
    """`data` combined by `kind` into `num_segments` rows, each starting at the identity."""
    jnp = _jnp()
    ids_ndim = aval_of(segment_ids).ndim
    dtype = aval_of(data).dtype
    out = jnp.full((num_segments, *aval_of(data).shape[ids_ndim:]), _identity(kind, dtype), dtype)
    numbers = S.ScatterDimensionNumbers(update_window_dims=tuple(range(ids_ndim, aval_of(data).ndim)),
                                        inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    op = {"add": S.scatter_add, "multiply": S.scatter_mul, "max": S.scatter_max, "min": S.scatter_min}[kind]
    return op(out, jnp.expand_dims(segment_ids, -1), data, numbers, indices_are_sorted=indices_are_sorted,
              unique_indices=unique_indices, mode=mode)


def _detached(x: Any) -> Any:
    """`x`'s values with no derivative (a round trip through same-size unsigned integers)."""
    dtype = aval_of(x).dtype
    return bitcast_convert_type(bitcast_convert_type(x, np.dtype(f"u{dtype.itemsize}")), dtype)


def _rows(data: Any, segment_ids: Any, num_segments: int, mode: Any) -> tuple[Any, Any]:
    """The output row each row of `data` lands in (clipped in range) and whether it lands at all (shaped to
    broadcast against `data`)."""
    jnp = _jnp()
    ids = segment_ids
    if S._mode(mode, S.GatherScatterMode.FILL_OR_DROP) is S.GatherScatterMode.CLIP:
        ids = jnp.clip(ids, 0, num_segments - 1)
    extra = (1,) * (aval_of(data).ndim - aval_of(ids).ndim)
    return jnp.clip(ids, 0, num_segments - 1), jnp.reshape((ids >= 0) & (ids < num_segments), ids.shape + extra)


def _extremum(kind: str, data: Any, segment_ids: Any, num_segments: int, indices_are_sorted: bool,
              unique_indices: bool, mode: Any) -> Any:
    """segment_max/min of floating `data`, with JAX's derivative: each segment's tangent is the mean of the
    tangents of the rows that attain its extremum (exact in value: those rows add `data - data`, zeros)."""
    jnp = _jnp()
    fixed = _detached(data)
    result = _scatter(kind, fixed, segment_ids, num_segments, indices_are_sorted, unique_indices, mode)
    if num_segments == 0:
        return result
    rows, in_range = _rows(data, segment_ids, num_segments, mode)
    ties = in_range & (fixed == jnp.take(result, rows, axis=0)) & jnp.isfinite(fixed)
    counts = _scatter("add", ties.astype(fixed.dtype), segment_ids, num_segments, indices_are_sorted,
                      unique_indices, mode)
    share = jnp.where(ties, (data - fixed) / jnp.maximum(jnp.take(counts, rows, axis=0), 1), 0)
    return result + _scatter("add", share, segment_ids, num_segments, indices_are_sorted, unique_indices, mode)


def _product(data: Any, segment_ids: Any, num_segments: int, indices_are_sorted: bool, unique_indices: bool,
             mode: Any) -> Any:
    """segment_prod of floating `data` whose derivative is right with repeated ids too: each row's tangent is
    scaled by the product of the other rows of its segment (JAX's needs unique_indices=True)."""
    jnp = _jnp()
    fixed = _detached(data)
    result = _scatter("multiply", fixed, segment_ids, num_segments, indices_are_sorted, unique_indices, mode)
    if num_segments == 0:
        return result
    rows, in_range = _rows(data, segment_ids, num_segments, mode)
    zero = fixed == 0
    zeros = jnp.take(_scatter("add", zero.astype(np.int32), segment_ids, num_segments, indices_are_sorted,
                              unique_indices, mode), rows, axis=0)
    nonzero = jnp.take(_scatter("multiply", jnp.where(zero, jnp.ones_like(fixed), fixed), segment_ids,
                                num_segments, indices_are_sorted, unique_indices, mode), rows, axis=0)
    others = jnp.where(zero, jnp.where(zeros == 1, nonzero, 0),
                       jnp.where(zeros == 0, nonzero / jnp.where(zero, jnp.ones_like(fixed), fixed), 0))
    share = jnp.where(in_range & jnp.isfinite(fixed), (data - fixed) * others, 0)
    return result + _scatter("add", share, segment_ids, num_segments, indices_are_sorted, unique_indices, mode)


def _bucketed(kind: str, data: Any, segment_ids: Any, num_segments: int, bucket_size: int,
              indices_are_sorted: bool, unique_indices: bool, mode: Any) -> Any:
    """The reduction done per bucket of `bucket_size` rows, then across buckets (rows padded with the identity)."""
    jnp = _jnp()
    ids = jnp.ravel(segment_ids)
    rows = jnp.reshape(data, (ids.shape[0], *aval_of(data).shape[aval_of(segment_ids).ndim:]))
    buckets = -(-ids.shape[0] // bucket_size)
    pad = buckets * bucket_size - ids.shape[0]
    ids = jnp.concatenate([ids, jnp.zeros((pad,), ids.dtype)])
    filler = jnp.full((pad, *rows.shape[1:]), _identity(kind, rows.dtype), rows.dtype)
    rows = jnp.concatenate([rows, filler])
    ids = jnp.reshape(ids, (buckets, bucket_size))
    rows = jnp.reshape(rows, (buckets, bucket_size, *rows.shape[1:]))
    # each bucket scatters into its own block of rows: segment s of bucket b is row b * num_segments + s
    offsets = jnp.arange(buckets, dtype=ids.dtype)[:, None] * num_segments
    if S._mode(mode, S.GatherScatterMode.FILL_OR_DROP) is S.GatherScatterMode.CLIP:
        ids = jnp.clip(ids, 0, max(num_segments - 1, 0))
    flat_ids = jnp.where((ids >= 0) & (ids < num_segments), ids + offsets, buckets * num_segments)
    blocks = _scatter(kind, rows, flat_ids, buckets * num_segments, indices_are_sorted, unique_indices, None)
    blocks = jnp.reshape(blocks, (buckets, num_segments, *rows.shape[2:]))
    reduce = {"add": jnp.sum, "multiply": jnp.prod, "max": jnp.max, "min": jnp.min}[kind]
    return reduce(blocks, axis=0).astype(rows.dtype)


def _segment(kind: str, name: str) -> Callable[..., Any]:
    def reduce(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
               unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
               out_sharding: Any = None) -> Any:
        jnp = _jnp()
        data, segment_ids = jnp.asarray(data), L._lift(segment_ids)
        if not np.issubdtype(aval_of(segment_ids).dtype, np.integer):
            raise TypeError(f"segment_ids must be an integer array; got dtype {aval_of(segment_ids).dtype}.")
        if kind in ("add", "multiply") and aval_of(data).dtype == np.bool_:
            raise TypeError(f"{name} does not accept boolean data; cast it to an integer dtype first.")
        count = _num_segments(num_segments, segment_ids)
        if kind in ("max", "min") and np.issubdtype(aval_of(data).dtype, np.floating):
            result = _extremum(kind, data, segment_ids, count, indices_are_sorted, unique_indices, mode)
        elif kind == "multiply" and np.issubdtype(aval_of(data).dtype, np.floating):
            result = _product(data, segment_ids, count, indices_are_sorted, unique_indices, mode)
        elif bucket_size is None or -(-int(np.prod(aval_of(segment_ids).shape)) // bucket_size) <= 1:
            result = _scatter(kind, data, segment_ids, count, indices_are_sorted, unique_indices, mode)
        else:
            result = _bucketed(kind, data, segment_ids, count, operator.index(bucket_size), indices_are_sorted,
                               unique_indices, mode)
        return result if out_sharding is None else reshard(result, out_sharding)

    return reduce


def _documented(kind: str, name: str, doc: str) -> Callable[..., Any]:
    fun = _segment(kind, name)
    fun.__name__ = fun.__qualname__ = name
    fun.__doc__ = doc
    return fun


segment_sum = _documented("add", "segment_sum", "The sum of `data`'s rows in each segment (0 for empty ones).")
segment_prod = _documented("multiply", "segment_prod",
                           "The product of `data`'s rows in each segment (1 for empty ones).")
segment_max = _documented("max", "segment_max", "The maximum of `data`'s rows in each segment (-inf, or the "
                          "dtype's minimum, for empty ones).")
segment_min = _documented("min", "segment_min", "The minimum of `data`'s rows in each segment (+inf, or the "
                          "dtype's maximum, for empty ones).")
