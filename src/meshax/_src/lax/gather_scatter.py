"""XLA-style gather and scatter (as jax.lax): windows of the operand at start indices, described by dimension
numbers. Both become one advanced-indexing operation (meshax's gather or scatter primitive) on index arrays that
name, for every element of the result (or of the updates), the operand element it is; so jit, grad and vmap
come from those primitives' rules."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..core.core import ConcretizationTypeError, Tracer, aval_of
from . import lax_ops as L
from .composite_ops import GatherScatterMode

__all__ = ["GatherDimensionNumbers", "ScatterDimensionNumbers", "gather", "scatter", "scatter_add", "scatter_apply",
           "scatter_max", "scatter_min", "scatter_mul", "scatter_sub"]


class GatherDimensionNumbers(NamedTuple):
    """Which result dimensions are window (offset) dimensions, which operand dimensions are taken whole-less
    (collapsed, size 1), which operand dimension each index component starts, and paired batching dimensions."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """Which update dimensions are window dimensions, which operand dimensions the windows leave out (size 1),
    which operand dimension each index component starts, and paired batching dimensions."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _jnp() -> Any:
    from .. import numpy as jnp

    return jnp


def _positions(shape: Sequence[int], operand_shape: Sequence[int], indices: Any, window_positions: Sequence[int],
               window_dims: Sequence[int], window_sizes: dict[int, int], index_map: Sequence[int],
               batching: Sequence[tuple[int, int]], clip: bool) -> tuple[list[Any], Any]:
    """For a result (or updates) of `shape`, whose dimensions at `window_positions` run over the operand's
    `window_dims` and whose others run over the index batch: each operand dimension's index array, and whether
    each index batch position's window lies in bounds."""
    jnp = _jnp()
    batch_positions = [p for p in range(len(shape)) if p not in window_positions]
    batch_shape = aval_of(indices).shape[:-1]

    def at_batch(x: Any) -> Any:  # an array over the index batch, placed on the result's batch dimensions
        expanded = jnp.reshape(x, tuple(batch_shape) + (1,) * len(window_positions))
        order = batch_positions + list(window_positions)
        return jnp.transpose(expanded, tuple(int(i) for i in np.argsort(order)))

    starts: dict[int, Any] = {}
    in_bounds = np.ones(batch_shape, bool)
    for k, d in enumerate(index_map):
        start = indices[..., k]
        limit = operand_shape[d] - window_sizes.get(d, 1)
        in_bounds = jnp.logical_and(in_bounds, jnp.logical_and(start >= 0, start <= limit))
        starts[d] = jnp.clip(start, 0, max(limit, 0)) if clip else start
    window_of = dict(zip(window_dims, window_positions))
    batch_of = dict(batching)
    arrays = []
    for d, size in enumerate(operand_shape):
        index = np.zeros((1,) * len(shape), np.int32)
        if d in starts:
            index = jnp.add(index, at_batch(starts[d].astype(np.int32)))
        if d in batch_of:
            index = jnp.add(index, at_batch(L.broadcasted_iota(np.int32, batch_shape, batch_of[d])))
        if d in window_of:
            p = window_of[d]
            index = jnp.add(index, np.arange(shape[p], dtype=np.int32).reshape(
                (1,) * p + (shape[p],) + (1,) * (len(shape) - p - 1)))
        arrays.append(jnp.broadcast_to(index, tuple(shape)))
    return arrays, at_batch(in_bounds)


def _mode(mode: Any, default: GatherScatterMode) -> GatherScatterMode:
    return default if mode is None else GatherScatterMode.from_any(mode)


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers, slice_sizes: Sequence[int],
           *, unique_indices: bool = False, indices_are_sorted: bool = False, mode: Any = None,
           fill_value: Any = None) -> Any:
    """Windows of `slice_sizes` of `operand` starting at `start_indices` (index vectors along its last
    dimension); out-of-bounds windows are moved in bounds (mode None or 'clip') or filled ('fill')."""
    from ..numpy.indexing import _default_fill

    jnp = _jnp()
    x, idx = jnp.asarray(operand), L._lift(start_indices)
    dn = dimension_numbers
    shape = aval_of(x).shape
    left_out = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_dims = [d for d in range(len(shape)) if d not in left_out]
    batch_shape = list(aval_of(idx).shape[:-1])
    out_rank = len(batch_shape) + len(dn.offset_dims)
    out_shape = [0] * out_rank
    batch_iter = iter(batch_shape)
    for p in range(out_rank):
        out_shape[p] = slice_sizes[window_dims[list(dn.offset_dims).index(p)]] if p in dn.offset_dims \
            else next(batch_iter)
    kind = _mode(mode, GatherScatterMode.CLIP)
    arrays, in_bounds = _positions(out_shape, shape, idx, dn.offset_dims, window_dims,
                                   {d: int(s) for d, s in enumerate(slice_sizes)}, dn.start_index_map,
                                   list(zip(dn.operand_batching_dims, dn.start_indices_batching_dims)), clip=True)
    result = x[tuple(arrays)]
    if kind is GatherScatterMode.FILL_OR_DROP:
        fill = _default_fill(aval_of(x).dtype) if fill_value is None else fill_value
        result = jnp.where(in_bounds, result, jnp.asarray(fill, aval_of(x).dtype))
    return result


def _scatter(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers,
             mode: Any, how: str) -> Any:
    x, idx, upd = _jnp().asarray(operand), L._lift(scatter_indices), L._lift(updates)
    dn = dimension_numbers
    shape = aval_of(x).shape
    left_out = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_dims = [d for d in range(len(shape)) if d not in left_out]
    upd_shape = aval_of(upd).shape
    sizes = {d: upd_shape[p] for d, p in zip(window_dims, dn.update_window_dims)}
    kind = _mode(mode, GatherScatterMode.FILL_OR_DROP)
    arrays, in_bounds = _positions(upd_shape, shape, idx, dn.update_window_dims, window_dims, sizes,
                                   dn.scatter_dims_to_operand_dims,
                                   list(zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims)),
                                   clip=kind is GatherScatterMode.CLIP)
    if kind is not GatherScatterMode.CLIP:  # windows out of bounds are dropped whole: send them past the end
        jnp = _jnp()
        arrays = [jnp.where(in_bounds, a, np.int32(n)) for a, n in zip(arrays, shape)]
        upd = jnp.where(in_bounds, upd, jnp.zeros((), aval_of(upd).dtype))  # and give them no gradient
    return getattr(x.at[tuple(arrays)], how)(upd)


def scatter(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
            indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """`operand` with the windows at `scatter_indices` replaced by `updates` (windows out of bounds are dropped,
    or moved in bounds with mode 'clip')."""
    return _scatter(operand, scatter_indices, updates, dimension_numbers, mode, "set")


def _scatter_op(how: str, doc: str) -> Callable[..., Any]:
    def op(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
           indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
        if how == "subtract":
            return _scatter(operand, scatter_indices, _jnp().negative(updates), dimension_numbers, mode, "add")
        return _scatter(operand, scatter_indices, updates, dimension_numbers, mode, how)

    op.__doc__ = doc
    return op


scatter_add = _scatter_op("add", "`operand` with `updates` added at the windows of `scatter_indices`.")
scatter_sub = _scatter_op("subtract", "`operand` with `updates` subtracted at the windows of `scatter_indices`.")
scatter_mul = _scatter_op("multiply", "`operand` multiplied by `updates` at the windows of `scatter_indices`.")
scatter_min = _scatter_op("min", "The minimum of `operand` and `updates` at the windows of `scatter_indices`.")
scatter_max = _scatter_op("max", "The maximum of `operand` and `updates` at the windows of `scatter_indices`.")


def scatter_apply(operand: Any, scatter_indices: Any, func: Callable[[Any], Any],
                  dimension_numbers: ScatterDimensionNumbers, *, update_shape: Sequence[int] = (),
                  indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
    """`operand` with `func` applied to the elements at the windows of `scatter_indices`, once per window that
    covers an element (as JAX's). With traced indices that count is bounded by the number of windows (at most
    64), unless unique_indices=True says it is one."""
    jnp = _jnp()
    x = L._lift(operand)
    counts = scatter_add(np.zeros(aval_of(x).shape, np.int32), scatter_indices, np.ones(tuple(update_shape), np.int32),
                         dimension_numbers, mode=mode)
    if not isinstance(counts, Tracer):
        repeats = int(np.max(np.asarray(counts), initial=0))
    else:
        repeats = 1 if unique_indices else int(np.prod(aval_of(L._lift(scatter_indices)).shape[:-1], dtype=np.int64))
        if repeats > 64:
            raise ConcretizationTypeError(
                f"scatter_apply with {repeats} traced windows: pass unique_indices=True, or concrete indices, so "
                "that meshax knows how many times func applies to each element.")
    result = x
    for k in range(repeats):
        result = jnp.where(counts > k, jnp.asarray(func(result), aval_of(x).dtype), result)
    return result
