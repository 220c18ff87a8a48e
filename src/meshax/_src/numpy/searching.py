"""meshax.numpy's searching and counting: where, nonzero and argwhere, searchsorted, isin, unique and
bincount."""
from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy as np

from ..core import dtypes
from ..core.core import ConcretizationTypeError, Tracer, aval_of
from .promotion import ArrayLike, _as_array, _cast, _host_result, _lift, _promote, _shape
from .ufuncs import (_where, astype, clip, equal, floor_divide, isnan, less, less_equal, logical_and, logical_not,
                     not_equal, remainder)
from .shape_ops import argsort, concatenate, expand_dims, moveaxis, ravel, reshape, stack
from .creation import full, ones, zeros
from .indexing import take
from .masked_selection import _true_positions
from .reductions import any, cumsum, sum
from ..core.dtypes import issubdtype


def where(condition: ArrayLike, x: ArrayLike = None, y: ArrayLike = None, /, *, size: int | None = None,
          fill_value: Any = None) -> Any:
    """`x` where `condition` holds, else `y`; with neither, nonzero(condition, size=, fill_value=)."""
    if x is None and y is None:
        if size is None and isinstance(condition, Tracer):
            raise _needs_size("where", condition)
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise TypeError(f"where requires ndarray or scalar arguments, got {type(None)} at position "
                        f"{1 if x is None else 2}.")
    if size is not None or fill_value is not None:
        raise ValueError("size and fill_value arguments cannot be used in three-term where function.")
    return _where(condition, x, y)


def _needs_size(function: str, a: Any) -> ConcretizationTypeError:
    return ConcretizationTypeError(
        f"jnp.{function} of a traced array ({a.aval}) has a data-dependent shape: its size argument must be "
        "statically specified inside jit and other transformations; pass size= (the result is cut or padded "
        "with fill_value to that length).")


def nonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> tuple[Any, ...]:
    """The indices of the nonzero elements, one array per dimension. The result's length depends on the
    data, so under jit pass `size=` (the first `size` indices, padded with `fill_value`, 0 by default)."""
    index_dtype = dtypes.default_int_dtype()
    shape = _shape(a)
    if not shape:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar).nonzero() "
                         "instead.")
    if size is None:
        if isinstance(a, Tracer):
            raise _needs_size("nonzero", a)
        found = np.nonzero(np.asarray(a))
        return tuple(_host_result(i.astype(index_dtype), a) for i in found)
    flat = ravel(not_equal(a, _cast(0, aval_of(_lift(a)).dtype)))
    count = sum(flat)
    order = argsort(logical_not(flat))[:size] if flat.size >= size else \
        concatenate([argsort(logical_not(flat)), np.zeros(size - flat.size, index_dtype)])
    valid = less(np.arange(size, dtype=index_dtype), count)
    fills = fill_value if isinstance(fill_value, tuple) else (0 if fill_value is None else fill_value,) * len(shape)
    if len(fills) != len(shape):
        raise ValueError(f"fill_value must be a scalar or a tuple of length {len(shape)}; got {fill_value}.")
    out, rest = [], order
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    for d, stride in enumerate(strides):
        coordinate = floor_divide(rest, stride) if stride > 1 else rest
        rest = remainder(rest, stride) if stride > 1 else rest
        out.append(astype(_where(valid, coordinate, fills[d]), index_dtype))
    return tuple(out)


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Any:
    if size is None and isinstance(a, Tracer):
        raise _needs_size("flatnonzero", a)
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero elements, one row each (a 0-d input has rows of no columns)."""
    if size is None and isinstance(a, Tracer):
        raise _needs_size("argwhere", a)
    if _shape(a) == ():
        rows = size if size is not None else int(bool(np.asarray(a)))
        return _as_array(np.zeros((rows, 0), dtypes.default_int_dtype()))
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=-1)


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike = None, *,
                 method: str = "scan") -> Any:
    """Where `v` would go in the sorted 1-D `a`: the number of elements of `a` before each value."""
    if method not in ("compare_all", "scan", "scan_unrolled", "sort"):
        raise ValueError(f"invalid argument method={method!r}, expected one of ['compare_all', 'scan', "
                         "'scan_unrolled', 'sort']")
    a = _promote(a)[0]
    if a.ndim != 1:
        raise ValueError("searchsorted: a must be one-dimensional.")
    if sorter is not None:
        a = take(a, sorter)
    a, v = _promote(a, v)
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', not {side!r}.")
    before = (less if side == "left" else less_equal)(a, expand_dims(v, -1))
    return sum(before, axis=-1, dtype=dtypes.default_int_dtype())


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Any:
    """Whether each element of `element` is in `test_elements` (`assume_unique` and `method` pick JAX's
    algorithm; the answer is the same)."""
    if method not in ("compare_all", "binary_search", "sort", "auto"):
        raise ValueError(f"method={method!r} is not implemented; options are 'compare_all', 'binary_search', "
                         "'sort', and 'auto'")
    element = _promote(element)[0]
    found = any(equal(expand_dims(element, -1), ravel(test_elements)), axis=-1)
    return logical_not(found) if invert else found


def bincount(x: ArrayLike, weights: ArrayLike = None, minlength: int = 0, *, length: int | None = None,
             out_sharding: Any = None) -> Any:
    """How often each non-negative integer occurs in the 1-D `x` (the sum of `weights` there), over `length`
    bins: as JAX's, negative values count in bin 0 and values past the last bin are dropped. Under jit the
    length must be static."""
    if out_sharding is not None:
        raise NotImplementedError(f"bincount(out_sharding={out_sharding!r}) is not supported by meshax.")
    x = _lift(x)
    dtype = aval_of(x).dtype
    if not (issubdtype(dtype, np.integer) or dtype == np.bool_):
        raise TypeError(f"x argument to bincount must have an integer type; got {dtype}")
    if len(_shape(x)) != 1:
        raise ValueError("only 1-dimensional input supported.")
    if length is None:
        if isinstance(x, Tracer):
            raise ConcretizationTypeError(
                f"bincount of a traced x ({x.aval}) has a data-dependent length; pass a static length=.")
        counted = np.asarray(x).astype(np.int64)  # negatives count in bin 0, so there is one if x has any
        length = builtins.max(int(np.max(np.maximum(counted, 0), initial=-1)) + 1, minlength)
    if weights is None:
        values = ones(_shape(x), dtypes.default_int_dtype())
    else:
        values = _lift(weights)
        if _shape(values) != _shape(x):
            raise ValueError(f"bincount: weights of shape {_shape(values)} must have the shape of x, {_shape(x)}.")
        if aval_of(values).dtype == np.bool_:
            raise TypeError("bincount: boolean weights are not supported; cast them to a number type.")
    base = zeros(length, aval_of(values).dtype)
    return base.at[clip(astype(x, dtypes.default_int_dtype()), 0, None)].add(values)


def _unique_error(ar: Any) -> ConcretizationTypeError:
    return ConcretizationTypeError(
        f"unique of a traced array ({ar.aval}) has a data-dependent shape; inside jit and other transformations "
        "pass size= (the result is cut or padded with fill_value to that length).")


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None, fill_value: Any = None,
           sorted: bool = True) -> Any:
    """The sorted distinct values of `ar` (as numpy.unique; `sorted` only allows an unsorted result, which
    meshax never gives). With `size=`, a fixed-length result that also works under jit: the first `size`
    values, padded with `fill_value` (by default the smallest value)."""
    if size is None and isinstance(ar, Tracer):
        raise _unique_error(ar)
    flags = (return_index, return_inverse, return_counts)
    if size is not None:
        if axis is not None:
            if isinstance(ar, Tracer):
                raise NotImplementedError("unique(size=..., axis=...) of a traced array is not supported by meshax; "
                                          "flatten it (axis=None) or call it on concrete values.")
            return _unique_padded_rows(ar, flags, axis, equal_nan, size, fill_value)
        return _unique_sized(_as_array(ar), flags, equal_nan, size, fill_value)
    value = np.asarray(ar)
    out = np.unique(value, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts,
                    axis=axis, equal_nan=equal_nan)
    out = out if isinstance(out, tuple) else (out,)
    results = [_weak_like(_host_result(out[0], ar), ar)] + _index_results(out[1:], flags, value.shape, axis, ar)
    return results[0] if len(results) == 1 else tuple(results)


class _UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class _UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class _UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def unique_values(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The Array API's unique: the sorted distinct values of `x`, each NaN distinct."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None) -> _UniqueCountsResult:
    return _UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_inverse(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None) -> _UniqueInverseResult:
    return _UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_all(x: ArrayLike, /, *, size: int | None = None, fill_value: Any = None) -> _UniqueAllResult:
    return _UniqueAllResult(*unique(x, return_index=True, return_inverse=True, return_counts=True, equal_nan=False,
                                    size=size, fill_value=fill_value))


def _weak_like(result: Any, like: Any) -> Any:
    """`result` weakly typed if `like` is (JAX keeps a weak input's weak type)."""
    weak = bool(getattr(like, "weak_type", False)) or isinstance(like, (int, float, complex))
    return _cast(result, result.dtype, True) if weak else result


def _index_results(extra: tuple, flags: tuple[bool, bool, bool], shape: tuple[int, ...], axis: int | None,
                   like: Any) -> list[Any]:
    """The index, inverse and count arrays NumPy gave, in JAX's dtype; the inverse shaped as JAX's."""
    index_dtype = dtypes.default_int_dtype()
    kinds = [k for k, flag in zip(("index", "inverse", "counts"), flags) if flag]
    results = []
    for kind, o in zip(kinds, extra):
        if kind == "inverse":
            o = o.reshape(shape if axis is None else (shape[axis],))
        results.append(_host_result(o.astype(index_dtype), like))
    return results


def _unique_sized(ar: Any, flags: tuple[bool, bool, bool], equal_nan: bool, size: int, fill_value: Any) -> Any:
    """unique of the flattened `ar` with a static result length, from sorting (so it traces)."""
    index_dtype = dtypes.default_int_dtype()
    flat = ravel(ar)
    n = _shape(flat)[0]
    order = argsort(flat)
    ordered = take(flat, order)
    differs = not_equal(ordered[1:], ordered[:-1])
    if equal_nan and issubdtype(flat.dtype, np.inexact):
        differs = logical_and(differs, logical_not(logical_and(isnan(ordered[1:]), isnan(ordered[:-1]))))
    first = concatenate([np.ones(builtins.min(n, 1), np.bool_), differs])
    positions, valid = _true_positions(first, size)
    fill = ordered[0] if fill_value is None else _cast(_lift(fill_value), flat.dtype)
    results = [_weak_like(_where(valid, take(ordered, positions, mode="clip"), fill), ar)]
    group = astype(cumsum(first), index_dtype) - 1
    if flags[0]:
        firsts = take(order, positions, mode="clip")
        results.append(astype(_where(valid, firsts, take(order, np.zeros(1, index_dtype)[0])), index_dtype))
    if flags[1]:
        inverse = zeros(n, index_dtype).at[order].set(group)
        results.append(reshape(inverse, _shape(ar)))
    if flags[2]:
        results.append(zeros(size, index_dtype).at[group].add(ones(n, index_dtype)))
    return results[0] if len(results) == 1 else tuple(results)


def _unique_padded_rows(ar: Any, flags: tuple[bool, bool, bool], axis: int, equal_nan: bool, size: int,
                        fill_value: Any) -> Any:
    """unique along `axis` of a concrete array, cut or padded with `fill_value` to `size` slices."""
    out = unique(ar, *flags, axis=axis, equal_nan=equal_nan)
    out = list(out) if isinstance(out, tuple) else [out]
    values = moveaxis(out[0], axis, 0)
    count = values.shape[0]
    fill = values[:1] if fill_value is None else full((1,) + values.shape[1:], fill_value, values.dtype)
    values = concatenate([values[:size]] + [fill] * builtins.max(size - count, 0))
    results = [moveaxis(values, 0, axis)]
    kinds = [k for k, flag in zip(("index", "inverse", "counts"), flags) if flag]
    for kind, o in zip(kinds, out[1:]):
        if kind == "inverse":
            results.append(o)
        else:
            pad_with = o[:1] if kind == "index" else zeros(1, o.dtype)
            results.append(concatenate([o[:size]] + [pad_with] * builtins.max(size - count, 0)))
    return results[0] if len(results) == 1 else tuple(results)
