"""meshax.numpy's indexing: x[key] (a static slice or a gather), take and take_along_axis, the functional
updates of x.at[key], and the functions that pick elements by position (repeat, delete, compress, extract)."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..core.core import NonConcreteBooleanIndexError, Tracer, aval_of
from .promotion import ArrayLike, _axes, _cast, _is_array, _lift, _ndim, _promote, _shape
from .ufuncs import _where, add, greater_equal, less, logical_or, remainder
from .shape_ops import broadcast_to, expand_dims, pad, ravel, reshape
from ..core.dtypes import iinfo, issubdtype


def repeat(a: ArrayLike, repeats: Any, axis: int | None = None, *, total_repeat_length: Any = None) -> Any:
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    counts = np.asarray(repeats)
    if not issubdtype(counts.dtype, np.integer) or (counts < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative integers; got {repeats!r}.")
    length = a.shape[axis]
    if counts.ndim == 0 and total_repeat_length in (None, length * int(counts)):
        # every element the same number of times: a broadcast and a reshape, which keep the split (as JAX's)
        stretched = broadcast_to(expand_dims(a, axis + 1), a.shape[:axis + 1] + (int(counts),) + a.shape[axis + 1:])
        return reshape(stretched, a.shape[:axis] + (length * int(counts),) + a.shape[axis + 1:])
    index = np.repeat(np.arange(length), counts)
    if total_repeat_length is not None:  # cut, or repeat the last element, to exactly that length
        index = np.resize(np.append(index, np.full(builtins.max(0, total_repeat_length - index.size),
                                                   index[-1] if index.size else 0)), total_repeat_length)
    return take(a, index, axis=axis)


def _normalize_index(key: Any, ndim: int) -> list[Any]:
    """One entry per addressed dimension (int, slice, array) plus None for new axes; Ellipsis expanded."""
    if isinstance(key, list):
        raise TypeError(
            "Using a non-tuple sequence for multidimensional indexing is not allowed; use `arr[array(seq)]` "
            "instead of `arr[seq]`. See https://github.com/jax-ml/jax/issues/4564 for more information."
        )
    key = key if isinstance(key, tuple) else (key,)
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis and not _is_bool_index(k)) + \
        builtins.sum(_ndim(k) for k in key if _is_bool_index(k))
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...').")
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed.")
    entries: list[Any] = []
    for k in key:
        if k is Ellipsis:
            entries.extend([slice(None)] * (ndim - used))
        else:
            entries.append(k)
    if not builtins.any(k is Ellipsis for k in key):
        entries.extend([slice(None)] * (ndim - used))
    return entries


def _is_bool_index(k: Any) -> bool:
    return (_is_array(k) or isinstance(k, (np.ndarray, list))) and np.dtype(aval_of(k).dtype if _is_array(k)
                                                                               else np.asarray(k).dtype) == np.bool_


def _is_array_index(k: Any) -> bool:
    return _is_array(k) or isinstance(k, (np.ndarray, list))


def getitem(a: Any, key: Any) -> Any:
    entries = _normalize_index(key, a.ndim)
    if not builtins.any(_is_array_index(e) for e in entries):
        index = []
        dim = 0
        for e in entries:
            if e is not None:
                size = a.shape[dim]
                if isinstance(e, (int, np.integer)):
                    e = _static_index(e, size, dim)
                elif not isinstance(e, slice):
                    raise TypeError(f"unsupported index {e!r}; use integers, slices, None, ... or integer arrays.")
                dim += 1
            index.append(e)
        return P.static_slice.bind(a, index=tuple(index))
    return _gather(a, entries)


def _static_index(index: Any, size: int, dim: int) -> int:
    """A static integer index, wrapped if negative, and out of range clamped into it as JAX does (x[11] of 10
    values is x[9]); only an empty dimension has no entry to give."""
    index = int(index)
    if size == 0:
        raise IndexError(f"index {index} is out of bounds for axis {dim} with size 0.")
    if index < 0:
        index += size
    return min(max(index, 0), size - 1)


def _check_mask(mask: np.ndarray, shape: tuple[int, ...], dim: int) -> None:
    for offset, size in enumerate(mask.shape):
        if dim + offset >= len(shape) or shape[dim + offset] != size:
            have = shape[dim + offset] if dim + offset < len(shape) else "missing"
            raise IndexError(f"boolean index did not match the indexed array along dimension {dim + offset}; "
                             f"dimension is {have} but corresponding boolean dimension is {size}.")


def _default_fill(dtype: np.dtype) -> Any:
    """What JAX reads at an out-of-range index in mode="fill": NaN, the lowest signed or highest unsigned
    integer, or True."""
    if issubdtype(dtype, np.inexact):
        return np.nan
    if dtype == np.bool_:
        return True
    info = iinfo(dtype)
    return info.min if issubdtype(dtype, np.signedinteger) else info.max


def _gather(a: Any, entries: list[Any], mode: str | None = None, fill_value: Any = None) -> Any:
    """a[entries]. Out-of-range indices are clamped (mode None or "clip", JAX's default for indexing),
    wrapped ("wrap") or read as `fill_value` ("fill": the array gets one extra row of it along each
    indexed dimension, and out-of-range indices are sent there)."""
    if mode not in (None, "clip", "promise_in_bounds", "wrap", "fill"):
        raise ValueError(f"invalid gather mode {mode!r}; use 'clip', 'wrap', 'fill' or 'promise_in_bounds'.")
    arrays, index = [], []
    expanded: list[Any] = []
    dim = 0
    for e in entries:
        if _is_bool_index(e):
            if isinstance(e, Tracer):
                raise NonConcreteBooleanIndexError(
                    f"Array boolean indices must be concrete; got {e.aval}: the result's shape would depend on the "
                    "mask's values. Inside jit use jnp.where (or x.at[...].get with a static size) instead.")
            mask = np.asarray(e)
            _check_mask(mask, a.shape, dim)
            expanded.extend(np.nonzero(mask))
            dim += mask.ndim
        else:
            expanded.append(e)
            dim += e is not None
    if builtins.any(e is None for e in expanded):
        new_axes = [i for i, e in enumerate(expanded) if e is None]
        body = [e for e in expanded if e is not None]
        result = _gather(a, body, mode, fill_value)
        for position in new_axes:
            result = expand_dims(result, builtins.min(position, result.ndim))
        return result
    widen: list[int] = []
    for dim, e in enumerate(expanded):
        size = a.shape[dim]
        if _is_array_index(e):
            value, needs_fill_row = _array_index(e, size, mode)
            if needs_fill_row:
                widen.append(dim)
            arrays.append(value)
            index.append("array")
        elif isinstance(e, (int, np.integer)):
            if mode == "wrap" and size:
                e = int(e) % size
            elif mode == "fill" and not -size <= int(e) < size:
                widen.append(dim)
                e = size
            index.append(_static_index(e, size + (dim in widen), dim))
        else:
            index.append(e)
    if widen:
        a = _pad_fill_row(a, widen, fill_value)
    return P.gather.bind(a, *arrays, index=tuple(index))


def _array_index(e: Any, size: int, mode: str | None) -> tuple[Any, bool]:
    """An integer index array along a dimension of `size`, and whether the gather needs one extra row of the
    fill value: "wrap" wraps out-of-range entries, "fill" sends them to `size` (that extra row); other modes
    leave them to the gather, which clamps."""
    value = _lift(e) if _is_array(e) else np.asarray(e)
    if not issubdtype(aval_of(value).dtype, np.integer):
        raise IndexError(f"array indices must be integers or booleans; got dtype {aval_of(value).dtype}.")
    if mode == "wrap":
        return (remainder(value, size) if _is_array(value) else np.mod(value, size)), False
    if mode != "fill":
        return value, False
    if _is_array(value):
        value = _where(less(value, 0), add(value, size), value)
        return _where(logical_or(less(value, 0), greater_equal(value, size)), size, value), True
    value = np.where(value < 0, value + size, value)  # concrete indices: the extra row only if some are out of range
    outside = (value < 0) | (value >= size)
    return np.where(outside, size, value), bool(outside.any())


def _pad_fill_row(a: Any, dims: Sequence[int], fill_value: Any) -> Any:
    """`a` with one more row of `fill_value` (by default the dtype's, as JAX's) at the end of each of `dims`."""
    fill = _default_fill(a.dtype) if fill_value is None else fill_value
    return pad(a, [(0, 1) if d in dims else (0, 0) for d in range(a.ndim)], constant_values=fill)


def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, mode: Any = None, fill_value: Any = None) -> Any:
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    entries: list[Any] = [slice(None)] * a.ndim
    entries[axis] = indices if _is_array(indices) else np.asarray(indices)
    return _gather(a, entries, "fill" if mode is None else mode, fill_value)  # JAX's take fills by default


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None, mode: Any = None,
                    fill_value: Any = None) -> Any:
    arr = _promote(arr)[0]
    if axis is None:
        arr, axis = ravel(arr), 0
    (axis,) = _axes(axis, arr.ndim)
    idx = np.asarray(indices) if not _is_array(indices) else indices
    if len(_shape(idx)) != arr.ndim:
        raise ValueError("take_along_axis: indices and arr must have the same number of dimensions; "
                         f"{len(_shape(idx))} vs. {arr.ndim}.")
    around = [tuple(s[:axis]) + tuple(s[axis + 1:]) for s in (arr.shape, _shape(idx))]
    if builtins.any(a != b and 1 not in (a, b) for a, b in zip(*around)):
        raise ValueError(f"take_along_axis: indices of shape {tuple(_shape(idx))} do not broadcast against the "
                         f"array's {tuple(arr.shape)} outside axis {axis}; make those dimensions equal or 1.")
    mode = "fill" if mode is None else mode
    if mode not in ("clip", "promise_in_bounds", "fill"):  # as JAX's, which has no "wrap" here
        raise ValueError(f"invalid take_along_axis mode {mode!r}; use 'clip', 'fill' or 'promise_in_bounds'.")
    idx, needs_fill_row = _array_index(idx, arr.shape[axis], mode)
    if needs_fill_row:
        arr = _pad_fill_row(arr, [axis], fill_value)
    return P.take_along.bind(arr, _lift(idx), axis=axis)


def _update_positions(e: Any, size: int) -> Any:
    """Integer update indices along a dimension of `size`: negatives wrapped, those still out of range set
    to `size` (dropped by the scatter)."""
    value = _lift(e) if _is_array(e) else np.asarray(e)
    if not issubdtype(aval_of(value).dtype, np.integer):
        raise IndexError(f"array indices must be integers or booleans; got dtype {aval_of(value).dtype}.")
    if _is_array(value):
        value = _where(less(value, 0), add(value, size), value)
        return _where(logical_or(less(value, 0), greater_equal(value, size)), size, value)
    value = np.where(value < 0, value + size, value)
    return np.where((value < 0) | (value >= size), size, value)


class _IndexUpdateHelper:
    """`x.at[idx]`: functional updates, as in JAX."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, index: Any) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, index)


class _IndexUpdateRef:
    def __init__(self, array: Any, index: Any) -> None:
        self.array = array
        self.index = index

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            fill_value: Any = None) -> Any:
        if mode in (None, "clip", "promise_in_bounds") and fill_value is None:
            return getitem(self.array, self.index)
        return _gather(self.array, _normalize_index(self.index, self.array.ndim), mode or "fill", fill_value)

    def _scatter(self, values: Any, mode: str) -> Any:
        """As in JAX, updates at out-of-range indices are dropped: an out-of-range static integer drops the
        whole update; out-of-range entries of index arrays are set to the dimension's size, which the
        scatter primitive drops. Slices go to the primitive as (start, stop, step) read as a range."""
        a = self.array
        entries = _normalize_index(self.index, a.ndim)
        arrays, index = [], []
        dim = 0
        for e in entries:
            if e is None:
                index.append(None)
                continue
            if _is_bool_index(e):
                if isinstance(e, Tracer):
                    raise NonConcreteBooleanIndexError(
                        f"Array boolean indices must be concrete; got {e.aval}. Inside jit update with jnp.where "
                        "instead.")
                mask = np.asarray(e)
                _check_mask(mask, a.shape, dim)
                index.append("array")
                arrays.append(mask)
                dim += mask.ndim
                continue
            size = a.shape[dim]
            if _is_array_index(e):
                index.append("array")
                arrays.append(_update_positions(e, size))
            elif isinstance(e, (int, np.integer)):
                if not -size <= int(e) < size:
                    return a  # nothing to update
                index.append(int(e) % size)
            else:
                index.append(slice(*e.indices(size)))
            dim += 1
        values = _cast(_lift(values), a.dtype)
        return P.scatter.bind(a, values, *arrays, index=tuple(index), mode=mode)

    def set(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "set")

    def add(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "add")

    def multiply(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "multiply")

    mul = multiply

    def min(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "min")

    def max(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "max")


s_, index_exp = np.s_, np.index_exp


def delete(arr: ArrayLike, obj: Any, axis: int | None = None) -> Any:
    arr = _promote(arr)[0]
    if axis is None:
        arr, axis = ravel(arr), 0
    (axis,) = _axes(axis, arr.ndim)
    size = arr.shape[axis]
    drop = np.arange(size)[obj] if isinstance(obj, slice) else np.asarray(obj)
    keep = np.setdiff1d(np.arange(size), np.where(drop < 0, drop + size, drop))
    return take(arr, keep, axis=axis)


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *, size: Any = None,
             fill_value: Any = 0) -> Any:
    if isinstance(condition, Tracer):
        raise TypeError("compress needs a concrete condition (its result's shape depends on it).")
    keep = np.nonzero(np.asarray(condition).ravel())[0]
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    return take(a, keep[keep < _shape(a)[axis]], axis=axis)


def extract(condition: ArrayLike, arr: ArrayLike) -> Any:
    if isinstance(condition, Tracer):
        raise TypeError("extract needs a concrete condition (its result's shape depends on it).")
    return compress(np.ravel(np.asarray(condition)), ravel(arr))
