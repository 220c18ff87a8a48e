"""meshax.numpy's indexing: x[key] (a static slice or a gather), take and take_along_axis, the functional
updates of x.at[key], and the functions that pick elements by position (repeat, delete, compress, extract)."""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..core.core import ConcretizationTypeError, NonConcreteBooleanIndexError, Tracer, aval_of
from .promotion import ArrayLike, _axes, _cast, _is_array, _lift, _ndim, _promote, _shape, _weak
from .ufuncs import (_where, add, greater, greater_equal, less, less_equal, logical_or, negative, power,
                     remainder, true_divide)
from .ufuncs import clip as clip_values
from .shape_ops import argsort, broadcast_to, expand_dims, pad, ravel, reshape
from ..core.dtypes import iinfo, issubdtype


def _reject_list(value: Any, function: str, position: int) -> None:
    """JAX's functions take arrays and scalars, not Python lists or tuples, as this argument."""
    if isinstance(value, (list, tuple)):
        raise TypeError(f"{function} requires ndarray or scalar arguments, got {type(value)} at position {position}.")


def repeat(a: ArrayLike, repeats: Any, axis: int | None = None, *, total_repeat_length: int | None = None,
           out_sharding: Any = None) -> Any:
    """Each element of `a` along `axis` repeated `repeats` times; with `total_repeat_length` the result has
    exactly that length (cut, or the last element repeated), so `repeats` may be traced."""
    _reject_list(repeats, "repeat", 1)
    if out_sharding is not None:
        raise NotImplementedError(f"repeat(out_sharding={out_sharding!r}) is not supported by meshax.")
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    length = a.shape[axis]
    if not issubdtype(aval_of(_lift(repeats)).dtype, np.integer):
        raise TypeError(f"repeat: repeats must be integers; got {repeats!r}.")
    if isinstance(repeats, Tracer):
        if total_repeat_length is None:
            raise ConcretizationTypeError(
                f"repeat with traced repeats ({repeats.aval}) has a data-dependent length; inside jit pass a static "
                "total_repeat_length=.")
        return _traced_repeat(a, repeats, axis, total_repeat_length)
    counts = np.asarray(repeats)
    if (counts < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative integers; got {repeats!r}.")
    if counts.ndim == 0 and total_repeat_length in (None, length * int(counts)):
        # every element the same number of times: a broadcast and a reshape, which keep the split (as JAX's)
        stretched = broadcast_to(expand_dims(a, axis + 1), a.shape[:axis + 1] + (int(counts),) + a.shape[axis + 1:])
        return reshape(stretched, a.shape[:axis] + (length * int(counts),) + a.shape[axis + 1:])
    ends = np.cumsum(np.broadcast_to(counts, (length,)))
    total = int(ends[-1]) if length else 0
    positions = np.arange(total if total_repeat_length is None else total_repeat_length)
    # output position j holds the element whose run covers j; past the last run, the last element
    index = np.minimum(np.searchsorted(ends, positions, side="right"), builtins.max(length - 1, 0))
    return take(a, index, axis=axis)


def _traced_repeat(a: Any, repeats: Any, axis: int, total: int) -> Any:
    """repeat with traced counts and a static total length (positions past the counts' sum read the last
    element)."""
    length = a.shape[axis]
    ends = P.CUMULATIVE["cumsum"].bind(broadcast_to(_cast(repeats, np.int32), (length,)), axis=0)
    positions = np.arange(total, dtype=np.int32)
    covered = _cast(less_equal(expand_dims(ends, 0), positions[:, None]), np.int32)
    index = P.REDUCE["sum"].bind(covered, axes=(1,), keepdims=False)
    index = clip_values(index, 0, builtins.max(length - 1, 0))
    return take(a, index, axis=axis, mode="clip")


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


def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """The entries of `a` at `indices` along `axis`; out-of-range ones are filled (mode None or 'fill', with
    `fill_value`), clamped ('clip') or wrapped ('wrap'). The two index hints change nothing here."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    if mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.take is not supported.")
    if mode not in (None, "fill", "clip", "wrap", "promise_in_bounds"):
        raise ValueError(f"Invalid mode {mode!r} for np.take")
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    entries: list[Any] = [slice(None)] * a.ndim
    entries[axis] = indices if _is_array(indices) else np.asarray(indices)
    return _gather(a, entries, "fill" if mode is None else mode, fill_value)  # JAX's take fills by default


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None = -1, mode: Any = None,
                    fill_value: Any = None, *, wrap_negative_indices: bool | None = None) -> Any:
    """The entries of `arr` at `indices` along `axis`, the other dimensions broadcast; out-of-range indices are
    filled (mode None or 'fill') or clamped ('clip'); wrap_negative_indices=False makes negative ones
    out of range."""
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
    if wrap_negative_indices is False:
        idx = _negatives_out(idx, arr.shape[axis], clip=mode != "fill")
    idx, needs_fill_row = _array_index(idx, arr.shape[axis], mode)
    if needs_fill_row:
        arr = _pad_fill_row(arr, [axis], fill_value)
    return P.take_along.bind(arr, _lift(idx), axis=axis)


def _mode_name(mode: Any) -> str | None:
    """An `.at[...]` mode (a string, a GatherScatterMode or None) as None, "clip", "fill" or
    "promise_in_bounds"; anything else is rejected as JAX's GatherScatterMode does."""
    name = getattr(mode, "name", mode)
    aliases = {None: None, "clip": "clip", "CLIP": "clip", "fill": "fill", "drop": "fill", "FILL_OR_DROP": "fill",
               "promise_in_bounds": "promise_in_bounds", "PROMISE_IN_BOUNDS": "promise_in_bounds"}
    if name == "ONE_HOT":
        raise NotImplementedError("mode=GatherScatterMode.ONE_HOT is not supported by meshax; use 'clip' or 'fill'.")
    if not isinstance(name, (str, type(None))) or name not in aliases or (isinstance(mode, str) and name.isupper()):
        raise ValueError(f'Unknown gather mode "{mode}"')
    return aliases[name]


def _no_sharding(out_sharding: Any) -> None:
    if out_sharding is not None:
        raise NotImplementedError(f"out_sharding={out_sharding!r} is not supported by meshax's .at[...] methods; "
                                  "reshard the result with jax.sharding.reshard instead.")


def _negatives_out(e: Any, size: int, clip: bool) -> Any:
    """Integer index `e` (a scalar or an array) with its negative entries made out of bounds: sent to 0 when
    out-of-bounds indices are clamped (`clip`), else past the end, where they are filled or dropped."""
    to = 0 if clip else size
    if isinstance(e, (int, np.integer)):
        return to if int(e) < 0 else e
    value = _lift(e) if _is_array(e) else np.asarray(e)
    if _is_array(value):
        return _where(less(value, 0), _cast(to, aval_of(value).dtype), value)
    return np.where(value < 0, to, value)


def _unwrap_negatives(a: Any, entries: list[Any], clip: bool) -> list[Any]:
    """`entries` with negative integer indices out of bounds (wrap_negative_indices=False; see _negatives_out)."""
    out, dim = [], 0
    for e in entries:
        if e is None or isinstance(e, slice):
            dim += e is not None
        elif _is_bool_index(e):
            dim += _ndim(e)
        else:
            e = _negatives_out(e, a.shape[dim], clip)
            dim += 1
        out.append(e)
    return out


def _update_positions(e: Any, size: int, clip: bool) -> Any:
    """Integer update indices along a dimension of `size`: negatives wrapped, then clamped into range (`clip`),
    or those still out of range set to `size` (dropped by the scatter)."""
    value = _lift(e) if _is_array(e) else np.asarray(e)
    if not issubdtype(aval_of(value).dtype, np.integer):
        raise IndexError(f"array indices must be integers or booleans; got dtype {aval_of(value).dtype}.")
    if _is_array(value):
        value = _where(less(value, 0), add(value, _cast(size, value.dtype)), value)
        if clip:
            return clip_values(value, 0, builtins.max(size - 1, 0))
        return _where(logical_or(less(value, 0), greater_equal(value, size)), _cast(size, value.dtype), value)
    value = np.where(value < 0, value + size, value)
    if clip:
        return np.clip(value, 0, builtins.max(size - 1, 0))
    return np.where((value < 0) | (value >= size), size, value)


def _most_repeats(counts: Any, index: Any, unique_indices: bool) -> int:
    """The most times an index names one element: read from concrete `counts`, else bounded by the number of
    entries of the index arrays (at most 64, so that `func` is not traced too often)."""
    if not isinstance(counts, Tracer):
        return int(np.max(np.asarray(counts), initial=0))
    arrays = [_shape(k) for k in (index if isinstance(index, tuple) else (index,)) if _is_array_index(k)]
    bound = 1 if unique_indices or not arrays else math.prod(np.broadcast_shapes(*arrays))
    if bound > 64:
        raise ConcretizationTypeError(
            f"x.at[...].apply with {bound} traced indices: pass unique_indices=True, or concrete indices, so that "
            "meshax knows how many times func applies to each element.")
    return bound


_STRATEGIES = ("auto", "gather", "scatter", "static_slice", "dynamic_slice")


def _strategy_name(strategy: Any) -> str:
    """An indexing strategy (a string, or an enum member whose value is one) as its name, as JAX's
    IndexingStrategy.from_any reads it."""
    value = getattr(strategy, "value", strategy) if not isinstance(strategy, str) else strategy
    if not isinstance(value, str):
        raise TypeError(f"Expected strategy to be IndexingStrategy or str; got {strategy!r}")
    if value not in _STRATEGIES:
        raise ValueError(f"Unknown indexing strategy: {strategy!r}")
    return value


def _check_strategy(strategy: str, key: Any, shape: tuple[int, ...], mode: str | None,
                    wrap_negative_indices: bool) -> None:
    """Raise JAX's error where `.at[key].get(strategy=...)` cannot index by that strategy: 'static_slice'
    takes Python integers (in bounds unless mode='clip'), slices, None and ...; 'dynamic_slice' also scalar
    integer arrays, and slices of unit step; both only with mode None, 'clip' or 'promise_in_bounds'."""
    if strategy == "scatter":
        raise ValueError("Indexing strategy IndexingStrategy.SCATTER is not supported for take.")
    if strategy not in ("static_slice", "dynamic_slice"):
        return
    if mode not in (None, "clip", "promise_in_bounds"):
        raise ValueError(f"{strategy} requires mode='promise_in_bounds' or mode='clip'")
    keys = key if isinstance(key, tuple) else (key,)
    if strategy == "static_slice" and mode != "clip":
        _normalize_index(key, len(shape))  # JAX's own index errors first
        def width(k: Any) -> int:
            return _ndim(k) if _is_bool_index(k) else int(k is not None and k is not Ellipsis)
        dim = 0
        for k in keys:
            if k is Ellipsis:
                dim += len(shape) - builtins.sum(width(j) for j in keys)
            elif k is not None:
                if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                    i = int(k)
                    normed = i + shape[dim] if wrap_negative_indices and i < 0 else i
                    if not 0 <= normed < shape[dim]:
                        raise IndexError(f"index {i} out of bounds for axis {dim} with size {shape[dim]} "
                                         f"(normalize_indices={wrap_negative_indices})")
                dim += width(k)
    for position, k in enumerate(keys):
        if k is None or k is Ellipsis or (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))):
            continue
        if isinstance(k, slice):
            if strategy == "dynamic_slice" and k.step not in (None, 1, -1):
                raise TypeError(f"dynamic_slice: only unit steps supported in slice. Got {k} at position {position}")
            continue
        if strategy == "static_slice":
            raise TypeError("static_slice: indices must be static scalars or slices."
                            f" Got index of type {type(k)} at position {position}")
        if _is_bool_index(k) or isinstance(k, (bool, np.bool_)):
            raise TypeError("dynamic_slice: indices must be scalars or slices."
                            f" Got index of type {type(k)} at position {position}")
        if isinstance(k, (list, tuple)) or _shape(k) != ():
            raise TypeError("dynamic_slice: only scalar indices allowed."
                            f" Got index of type {type(k)} at position {position}")


class _IndexUpdateHelper:
    """`x.at[idx]`: functional updates, as in JAX."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, index: Any) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, index)


class _IndexUpdateRef:
    """`x.at[index]`. Every method takes JAX's keywords: `mode` (None, 'clip', 'drop'/'fill',
    'promise_in_bounds'), `wrap_negative_indices`, the hints `indices_are_sorted` and `unique_indices`, and
    `out_sharding` (only None)."""

    def __init__(self, array: Any, index: Any) -> None:
        self.array = array
        self.index = index

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            fill_value: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True,
            strategy: str = "auto") -> Any:
        """x[index]; out-of-bounds indices are clamped (mode None, 'clip', 'promise_in_bounds') or read as
        `fill_value` ('fill'/'drop'; by default NaN, the dtype's extreme integer or True). `strategy` ('auto',
        'gather', 'static_slice', 'dynamic_slice') refuses, as JAX's, an index or mode that the asked strategy
        cannot take; the values are the same whichever runs."""
        _no_sharding(out_sharding)
        strategy = _strategy_name(strategy)
        mode = _mode_name(mode)
        _check_strategy(strategy, self.index, self.array.shape, mode, wrap_negative_indices)
        entries = _normalize_index(self.index, self.array.ndim)
        if not wrap_negative_indices:
            entries = _unwrap_negatives(self.array, entries, clip=mode != "fill")
        if mode != "fill":
            return getitem(self.array, tuple(entries))
        return _gather(self.array, entries, "fill", fill_value)

    def _scatter(self, values: Any, how: str, mode: Any, wrap_negative_indices: bool, out_sharding: Any) -> Any:
        """As in JAX, updates at out-of-range indices are dropped (or, with mode 'clip', moved to the nearest
        edge): an out-of-range static integer drops the whole update; out-of-range entries of index arrays
        are set to the dimension's size, which the scatter primitive drops. Slices go to the primitive as
        (start, stop, step) read as a range."""
        _no_sharding(out_sharding)
        clip = _mode_name(mode) == "clip"
        a = self.array
        entries = _normalize_index(self.index, a.ndim)
        if not wrap_negative_indices:
            entries = _unwrap_negatives(a, entries, clip)
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
                arrays.append(_update_positions(e, size, clip))
            elif isinstance(e, (int, np.integer)):
                position = int(e) + size if int(e) < 0 else int(e)
                if clip:
                    position = builtins.min(builtins.max(position, 0), builtins.max(size - 1, 0))
                elif not 0 <= position < size:
                    return a  # nothing to update
                index.append(position)
            else:
                index.append(slice(*e.indices(size)))
            dim += 1
        values = _cast(_lift(values), a.dtype)
        return P.scatter.bind(a, values, *arrays, index=tuple(index), mode=how)

    def set(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        return self._scatter(values, "set", mode, wrap_negative_indices, out_sharding)

    def add(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        return self._scatter(values, "add", mode, wrap_negative_indices, out_sharding)

    def subtract(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        return self._scatter(negative(_cast(_lift(values), self.array.dtype)), "add", mode, wrap_negative_indices,
                             out_sharding)

    def multiply(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        return self._scatter(values, "multiply", mode, wrap_negative_indices, out_sharding)

    mul = multiply

    def _factors(self, values: Any, mode: Any, wrap_negative_indices: bool, out_sharding: Any) -> Any:
        """Ones like the array, multiplied by `values` at the index (the divisor or exponent JAX applies)."""
        ones = broadcast_to(_cast(1, self.array.dtype, _weak(self.array)), self.array.shape)
        return _IndexUpdateRef(ones, self.index)._scatter(values, "multiply", mode, wrap_negative_indices,
                                                          out_sharding)

    def divide(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
               mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        """x divided by `values` at the index (as JAX's: a true division, so integers give floats)."""
        return true_divide(self.array, self._factors(values, mode, wrap_negative_indices, out_sharding))

    def power(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        return power(self.array, self._factors(values, mode, wrap_negative_indices, out_sharding))

    def min(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        return self._scatter(values, "min", mode, wrap_negative_indices, out_sharding)

    def max(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            out_sharding: Any = None, wrap_negative_indices: bool = True) -> Any:
        return self._scatter(values, "max", mode, wrap_negative_indices, out_sharding)

    def apply(self, func: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
              wrap_negative_indices: bool = True) -> Any:
        """x with `func` applied at the index, once per time the index names an element (as JAX's). How often
        that is must be known: with traced index arrays, pass unique_indices=True or make the index concrete."""
        counts = _IndexUpdateRef(np.zeros(self.array.shape, np.int32), self.index)._scatter(
            np.int32(1), "add", mode, wrap_negative_indices, None)
        repeats = _most_repeats(counts, self.index, unique_indices)
        result = self.array
        for k in range(repeats):
            result = _where(greater(counts, k), _cast(func(result), result.dtype, _weak(result)), result)
        return result


s_, index_exp = np.s_, np.index_exp


def delete(arr: ArrayLike, obj: Any, axis: int | None = None, *, assume_unique_indices: bool = False) -> Any:
    """`arr` without the entries `obj` (integers, a slice or a boolean mask) along `axis`. A traced `obj` needs
    assume_unique_indices=True (then the result's length is known: one fewer per index)."""
    _reject_list(obj, "delete", 1)
    arr = _promote(arr)[0]
    if axis is None:
        arr, axis = ravel(arr), 0
    (axis,) = _axes(axis, arr.ndim)
    size = arr.shape[axis]
    if isinstance(obj, slice):
        return take(arr, np.setdiff1d(np.arange(size), np.arange(size)[obj]), axis=axis)
    dtype = aval_of(_lift(obj)).dtype
    if dtype == np.bool_:
        if _shape(obj) != (size,):
            raise ValueError("np.delete(arr, obj): for boolean indices, obj must be one-dimensional with length "
                             "matching specified axis.")
        if isinstance(obj, Tracer):
            raise NonConcreteBooleanIndexError(f"delete: a traced boolean mask {obj.aval} gives a data-dependent "
                                               "shape; pass concrete values.")
        return take(arr, np.nonzero(~np.asarray(obj))[0], axis=axis)
    if not issubdtype(dtype, np.integer):
        raise ValueError(f"np.delete(arr, obj): got obj.dtype={dtype}; must be integer or bool.")
    if assume_unique_indices:
        drop = ravel(_lift(obj))
        kept = _IndexUpdateRef(np.ones(size, np.bool_), drop)._scatter(False, "set", None, True, None)
        order = argsort(kept, descending=True)  # stable: the kept positions first, in order
        return take(arr, order[:size - _shape(drop)[0]], axis=axis)
    if isinstance(obj, Tracer):
        raise ConcretizationTypeError(
            f"delete: 'obj' is traced ({obj.aval}), so the result's length depends on its values; pass "
            "assume_unique_indices=True (if the indices are unique) or concrete indices.")
    drop = np.asarray(obj)
    if drop.ndim == 0 and not -size <= int(drop) < size:
        raise ValueError(f"axis {int(drop)} is out of bounds for array of dimension {size}")
    if ((drop < -size) | (drop >= size)).any():
        raise IndexError(f"index {int(drop[(drop < -size) | (drop >= size)].flat[0])} is out of bounds for axis "
                         f"{axis} with size {size}")
    return take(arr, np.setdiff1d(np.arange(size), np.where(drop < 0, drop + size, drop)), axis=axis)
