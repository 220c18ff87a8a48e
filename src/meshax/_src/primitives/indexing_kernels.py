"""The NumPy implementations of the indexing primitives: pad, gather, take_along and scatter (slices' gradients,
x.at[i].add, a cross-entropy's gradient).

On the small arrays of a training step's loss these are Python-bound, so the common cases take short paths with
the same values: a constant pad is one fill and one copy (np.pad: ~30 us of Python), indices already in range are
used as they are, and a scatter whose every dimension is indexed by an array takes those arrays, broadcast, as
its coordinates (a tiny model's step: ~90 -> ~25 us for the gradient of take_along_axis).
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np


def pad(x: np.ndarray, *, pad_width: Any, mode: str, axes: tuple[int, ...], constant_values: Any = 0) -> np.ndarray:
    """np.pad of `x` by `pad_width` (one (before, after) pair per dimension)."""
    if mode != "constant":
        return np.pad(x, pad_width, mode=mode)
    region = _padded_region(x.shape, pad_width) if type(constant_values) in _SCALARS or (
        isinstance(constant_values, np.ndarray) and not constant_values.ndim) else None
    if region is None:
        return np.pad(x, pad_width, mode=mode, constant_values=constant_values)
    out = np.empty(region[0], x.dtype)
    out.fill(constant_values)  # cast as np.pad casts it
    out[region[1]] = x
    return out


_SCALARS = frozenset({int, float, bool, complex, np.float32, np.float64, np.int32, np.int64, np.bool_})


@functools.lru_cache(maxsize=256)
def _padded_region(shape: tuple[int, ...], pad_width: Any) -> tuple[tuple[int, ...], tuple[slice, ...]] | None:
    """A constant pad's output shape and where `x` goes in it; None for negative pads (np.pad crops those)."""
    if len(pad_width) != len(shape) or any(low < 0 or high < 0 for low, high in pad_width):
        return None
    return (tuple(n + low + high for n, (low, high) in zip(shape, pad_width)),
            tuple(slice(low, low + n) for n, (low, _) in zip(shape, pad_width)))


def gather(x: np.ndarray, *indices: np.ndarray, index: tuple[Any, ...]) -> np.ndarray:
    """x[index] where `index` has one entry per dimension and "array" marks an integer/bool array index."""
    arrays = iter(indices)
    filled = tuple(clip_index(next(arrays), x.shape[d]) if e == "array" else e for d, e in enumerate(index))
    return x[filled]


def clip_index(i: np.ndarray, size: int) -> np.ndarray:
    """Integer indices `i` into a dimension of `size`, negative ones counted from its end, clamped into it (JAX
    clamps out-of-range gather indices instead of raising); `i` itself where every index is in range."""
    if i.dtype == np.bool_ or (i.size and 0 <= i.min() and i.max() < size):
        return i
    i = np.where(i < 0, i + size, i)
    return np.clip(i, 0, max(size - 1, 0))


def take_along(x: np.ndarray, idx: np.ndarray, *, axis: int) -> np.ndarray:
    """np.take_along_axis with JAX's clamped indices (as one fancy index, its other axes' ranges made once)."""
    axis = axis % x.ndim if x.ndim else axis
    if idx.ndim != x.ndim or not x.ndim:
        return np.take_along_axis(x, clip_index(idx, x.shape[axis]), axis)
    ranges = _other_axes(x.shape, idx.shape, axis)
    if ranges is None:
        return np.take_along_axis(x, clip_index(idx, x.shape[axis]), axis)
    return x[ranges[:axis] + (clip_index(idx, x.shape[axis]),) + ranges[axis + 1:]]


@functools.lru_cache(maxsize=256)
def _other_axes(shape: tuple[int, ...], idx_shape: tuple[int, ...], axis: int) -> tuple[Any, ...] | None:
    """Per axis but `axis`, the positions along it as an index array shaped to broadcast along it alone (None
    where the index's axis neither matches nor broadcasts: np.take_along_axis raises NumPy's error)."""
    ranges: list[Any] = []
    for d, (n, m) in enumerate(zip(shape, idx_shape)):
        if d != axis and m not in (1, n):
            return None
        ranges.append(None if d == axis else np.arange(n).reshape([n if k == d else 1 for k in range(len(shape))]))
    return tuple(ranges)


def scatter(x: np.ndarray, y: np.ndarray, *indices: np.ndarray, index: tuple[Any, ...], mode: str,
            local_box: Any = None, overwrite: bool = False) -> np.ndarray:
    """x[index] updated with y, where x is the block `local_box` (global coordinates; the whole array when
    None) of the operand: only the updates that land in the block are applied, at local coordinates.
    Slices are canonical (start, stop, step) triples read as ranges; indices outside the block are dropped.
    `overwrite`: x is a writable buffer nobody reads afterwards, updated in place and returned (codegen.py)."""
    box = local_box if local_box is not None else tuple((0, n) for n in x.shape)
    if not indices and len(index) == x.ndim and all(
            isinstance(e, (int, np.integer)) or (isinstance(e, slice) and e.step > 0) for e in index):
        return scatter_basic(x if overwrite else np.array(x, copy=True), y, index, mode, box)
    out = x if overwrite else np.array(x, copy=True)
    if mode == "add" and _rows_indexed(x, indices, index, box):  # x[i] (an embedding's gradient)
        rows = indices[0].ravel() - box[0][0] if box[0][0] else indices[0].ravel()
        if not rows.size or (0 <= rows.min() and rows.max() < x.shape[0]):
            return _add_rows(out, rows, np.broadcast_to(y, indices[0].shape + x.shape[1:]))
    if len(indices) == len(index) == x.ndim and all(a.dtype != np.bool_ for a in indices):  # x[i, j, ...]
        if x.ndim and all(not c.size or (start <= c.min() and c.max() < stop)
                          for c, (start, stop) in zip(indices, box)):  # every update lands: NumPy broadcasts
            return _updated(out, tuple(c - start if start else c for c, (start, _) in zip(indices, box)), y, mode)
        coordinates = np.broadcast_arrays(*indices)
        target = coordinates[0].shape
    else:
        coordinates, target = scatter_coordinates(index, indices)
    y = np.broadcast_to(y, target)
    if x.ndim and all(not c.size or (start <= c.min() and c.max() < stop)
                      for c, (start, stop) in zip(coordinates, box)):  # every update lands
        return _updated(out, tuple(c - start if start else c for c, (start, _) in zip(coordinates, box)), y, mode)
    inside = np.ones(target, np.bool_)
    for c, (start, stop) in zip(coordinates, box):
        inside &= (c >= start) & (c < stop)
    updates = y[inside]
    # through a leading axis of size 1, so that a 0-d operand is indexed by arrays too
    where = (np.zeros(len(updates), np.intp),) + tuple(c[inside] - start for c, (start, _) in zip(coordinates, box))
    if mode == "set":
        out[np.newaxis][where] = updates
    else:
        _UPDATES[mode].at(out[np.newaxis], where, updates)
    return out


def _rows_indexed(x: np.ndarray, indices: Sequence[np.ndarray], index: tuple[Any, ...],
                  box: Sequence[tuple[int, int]]) -> bool:
    """Whether the scatter is x[i] for one integer array i: whole rows of x, which the block holds whole."""
    return len(indices) == 1 and index[0] == "array" and indices[0].dtype != np.bool_ and len(index) == x.ndim and \
        all(isinstance(e, slice) and (e.start, e.stop, e.step) == (0, n, 1) == (lo, hi, 1)
            for e, n, (lo, hi) in zip(index[1:], x.shape[1:], box[1:]))


# at most this many updates of one row: each repetition is one vectorized pass over the rows it updates
MAX_ROW_REPEATS = 64


def _add_rows(out: np.ndarray, rows: np.ndarray, y: np.ndarray) -> np.ndarray:
    """np.add.at(out, rows, y) (out's rows `rows` in range), with np.add.at's bits: each row's updates are added
    in their order, the first update of every row in one vectorized pass, then the second, ...; np.add.at itself
    where a row repeats more than MAX_ROW_REPEATS times (an embedding's gradient, 2048 rows of 256 float32 into
    256 rows: 8.5 ms by np.add.at, ~1.5 ms so)."""
    if not len(rows):
        return out
    updates = y.reshape(len(rows), -1)
    order = np.argsort(rows, kind="stable")
    ordered = rows[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, len(rows)))
    if counts.max() > MAX_ROW_REPEATS:
        np.add.at(out, rows, updates.reshape((len(rows),) + out.shape[1:]))
        return out
    repeat = np.arange(len(rows)) - np.repeat(starts, counts)  # which update of its row each one is
    by_repeat = np.argsort(repeat, kind="stable")
    bounds = np.searchsorted(repeat[by_repeat], np.arange(counts.max() + 1))
    flat = out.reshape(len(out), -1)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        taken = order[by_repeat[lo:hi]]
        target = rows[taken]
        flat[target] += updates[taken]
    return out


def _updated(out: np.ndarray, where: tuple[np.ndarray, ...], y: np.ndarray, mode: str) -> np.ndarray:
    """`out` with `y` applied at the coordinate arrays `where` (all inside it; they and `y` broadcast)."""
    if mode == "set":
        out[where] = y
    else:
        _UPDATES[mode].at(out, where, y)
    return out


scatter.overwrites_operand = True  # takes overwrite= (interpreters/codegen.py)
_UPDATES = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


def scatter_basic(out: np.ndarray, y: np.ndarray, index: tuple[Any, ...], mode: str,
                   box: Sequence[tuple[int, int]]) -> np.ndarray:
    """The scatter of an index of slices and integers only (a slice's gradient, x.at[a:b].set) onto `out` (the
    operand's buffer to update in place): every element of the region is one distinct element, so the updates
    are one basic-indexed assignment or in-place ufunc on the part of the region inside the block `box`, with
    no coordinate arrays."""
    target = tuple(len(range(e.start, e.stop, e.step)) for e in index if isinstance(e, slice))
    y = np.broadcast_to(y, target)
    into: list[Any] = []  # the region inside the block, in the block's coordinates
    taken: list[Any] = []  # the updates that land there
    for entry, (low, high) in zip(index, box):
        if isinstance(entry, slice):
            first, step = entry.start, entry.step
            begin = max(0, -(-(low - first) // step))
            end = min(len(range(first, entry.stop, step)), -(-(high - first) // step))
            if end <= begin:
                return out
            into.append(slice(first + begin * step - low, first + (end - 1) * step - low + 1, step))
            taken.append(slice(begin, end))
        elif low <= entry < high:
            into.append(int(entry) - low)
        else:
            return out
    updates = y[tuple(taken)]
    if mode == "set":
        out[tuple(into)] = updates
    else:
        region = out[tuple(into)]
        if isinstance(region, np.ndarray):
            _UPDATES[mode](region, updates, out=region)
        else:  # one element
            out[tuple(into)] = _UPDATES[mode](region, updates)
    return out


def scatter_coordinates(index: tuple[Any, ...], indices: Sequence[np.ndarray]
                         ) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """For every element of the indexed region (of the shape x[index] has), its global coordinate along each
    dimension of x; and that shape. Indexing a small stand-in array with the same kinds of entries keeps
    NumPy's placement of array-indexed dimensions."""
    values: list[np.ndarray] = []  # per dimension of x: the coordinates its entry selects
    stand_in: list[Any] = []  # the entry, rewritten to index `values`
    arrays = iter(indices)
    for entry in index:
        if entry is None:
            stand_in.append(None)
        elif isinstance(entry, slice):
            values.append(np.arange(entry.start, entry.stop, entry.step))
            stand_in.append(slice(None))
        elif isinstance(entry, str):  # "array"
            array = next(arrays)
            for dim_index in (np.nonzero(array) if array.dtype == np.bool_ else (array,)):
                low = int(dim_index.min()) if dim_index.size else 0
                values.append(np.arange(low, int(dim_index.max()) + 1 if dim_index.size else 1))
                stand_in.append(dim_index - low)
        else:
            values.append(np.array([entry]))
            stand_in.append(0)
    shape = tuple(len(v) for v in values)
    coordinates = []
    for d, v in enumerate(values):
        grid = np.broadcast_to(v.reshape([-1 if i == d else 1 for i in range(len(values))]), shape)
        coordinates.append(np.asarray(grid[tuple(stand_in)]))
    target = coordinates[0].shape if coordinates else ()
    return coordinates, target
