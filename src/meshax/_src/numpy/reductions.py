"""meshax.numpy's reductions and scans: sums, products, extremes, means and variances, arg-extremes,
cumulative sums and products, their NaN-ignoring forms, and order statistics (quantile, percentile, median)."""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ..core import dtypes
from ..primitives import array_primitives as P
from .promotion import ArrayLike, _axes, _cast, _dtype, _is_array, _lift, _ndim, _promote, _promote_inexact, _shape
from .ufuncs import (
    _where, add, astype, ceil, clip, conjugate, divide, equal, floor, greater, isnan, less, logical_and,
    logical_not, maximum, minimum, multiply, not_equal, real, sqrt, square, subtract,
)
from .shape_ops import argsort, broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape, sort, transpose
from .creation import full, full_like
from .indexing import take_along_axis
from ..core.dtypes import issubdtype


def _strong(a: Any) -> Any:
    """`a` without its weak type: reductions and scans of meshax.numpy (as of jax.numpy) are strongly typed."""
    return _cast(a, a.dtype, False) if getattr(a, "weak_type", False) else a


def _reduce(kind: str, a: ArrayLike, axis: Any, keepdims: bool, where_: Any, fill: Any, dtype: Any = None) -> Any:
    (a,) = _promote(a)
    a = _strong(a if dtype is None else astype(a, dtype))
    if where_ is not None:
        a = _where(where_, a, fill)
    return P.REDUCE[kind].bind(a, axes=_axes(axis, a.ndim), keepdims=bool(keepdims))


def _initial(initial: Any, dtype: Any) -> Any:
    """`initial` in the reduction's result type (as in JAX, a float initial of an integer sum is truncated)."""
    return _cast(_lift(initial), dtype)


def _accumulating_dtype(a: Any, dtype: Any, promote_integers: bool = True) -> Any:
    if dtype is not None:
        return _dtype(dtype)
    kind = dtypes.dtype_of(a)[0] if not _is_array(a) else a.dtype
    if not promote_integers:
        return dtypes.default_int_dtype() if kind == np.bool_ else None
    if kind == np.bool_ or (issubdtype(kind, np.integer) and kind.itemsize < dtypes.default_int_dtype().itemsize):
        return dtypes.default_uint_dtype() if issubdtype(kind, np.unsignedinteger) else dtypes.default_int_dtype()
    return None


def sum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
        initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    result = _reduce("sum", a, axis, keepdims, where, 0, _accumulating_dtype(a, dtype, promote_integers))
    return result if initial is None else add(result, _initial(initial, result.dtype))


def prod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    result = _reduce("prod", a, axis, keepdims, where, 1, _accumulating_dtype(a, dtype, promote_integers))
    return result if initial is None else multiply(result, _initial(initial, result.dtype))


def _extreme(kind: str, combine: Any, a: ArrayLike, axis: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    """max or min: reduce, then fold in `initial` (which where= requires)."""
    (a,) = _promote(a)
    if where is not None and initial is None:
        raise ValueError(f"{kind} with where= needs initial= (the value for rows where nothing is selected).")
    _check_identity(kind, a, axis, initial)
    if initial is not None:
        initial = _initial(initial, _strong(a).dtype)
    result = _reduce(kind, a, axis, keepdims, where, initial if initial is not None else 0)
    return result if initial is None else combine(result, initial)


def max(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    return _extreme("max", maximum, a, axis, keepdims, initial, where)


def min(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    return _extreme("min", minimum, a, axis, keepdims, initial, where)


amax, amin = max, min


def _check_identity(name: str, a: Any, axis: Any, initial: Any) -> None:
    if initial is None and builtins.any(a.shape[d] == 0 for d in _axes(axis, a.ndim)):
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")


def any(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Any:
    return _reduce("or", astype(a, np.bool_), axis, keepdims, where, False)


def all(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Any:
    return _reduce("and", astype(a, np.bool_), axis, keepdims, where, True)


def _count(a: Any, axis: Any, where_: Any, keepdims: bool) -> Any:
    if where_ is None:
        return math.prod(_shape(a)[d] for d in _axes(axis, _ndim(a)))
    count = sum(broadcast_to(where_, _shape(a)), axis=axis, keepdims=keepdims, dtype=dtypes.default_float_dtype())
    dtype = a.dtype  # a float16 mean stays float16, as in JAX
    return count if not issubdtype(dtype, np.floating) or dtype == count.dtype else astype(count, dtype)


def mean(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    if dtype is not None:
        a = astype(a, dtype)
    return divide(sum(a, axis=axis, keepdims=keepdims, where=where), _count(a, axis, where, keepdims))


_mean = mean  # var's and nanvar's `mean` parameter hides the function


def _squares(a: Any, center: Any) -> Any:
    """|a - center|**2, real for complex `a`."""
    centered = subtract(a, center)
    if issubdtype(centered.dtype, np.complexfloating):
        return real(multiply(centered, conjugate(centered)))
    return square(centered)


def _as_result(result: Any, dtype: Any) -> Any:
    """A variance (or deviation) in the requested inexact `dtype`, if any."""
    if dtype is None or not issubdtype(_dtype(dtype), np.inexact):
        return result
    return astype(result, dtype)


def var(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    ddof = correction if correction is not None else ddof
    center = _mean(a, axis=axis, keepdims=True, where=where) if mean is None else mean
    total = sum(_squares(a, center), axis=axis, keepdims=keepdims, where=where)
    return _as_result(divide(total, subtract(_count(a, axis, where, keepdims), ddof)), dtype)


def std(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction))


def _arg(primitive: Any, a: ArrayLike, axis: Any, keepdims: bool) -> Any:
    (a,) = _promote(a)
    if axis is None:  # over the flattened array; keepdims keeps every dimension, as size 1
        result = primitive.bind(ravel(a), axes=(0,), index_dtype=dtypes.default_int_dtype())
        return reshape(result, (1,) * a.ndim) if keepdims else result
    (axis,) = _axes(axis, a.ndim)
    result = primitive.bind(a, axes=(axis,), index_dtype=dtypes.default_int_dtype())
    return expand_dims(result, axis) if keepdims else result


def argmax(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _arg(P.argmax, a, axis, keepdims)


def argmin(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _arg(P.argmin, a, axis, keepdims)


def _cumulative(kind: str, a: ArrayLike, axis: Any, dtype: Any) -> Any:
    """As in JAX, cumulative sums and products keep small integer types; only booleans become integers."""
    (a,) = _promote(a)
    a = _strong(a)
    if dtype is not None:
        a = astype(a, dtype)
    elif a.dtype == np.bool_ and kind in ("cumsum", "cumprod"):
        a = astype(a, dtypes.default_int_dtype())
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    return P.CUMULATIVE[kind].bind(a, axis=axis)


def cumsum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return _cumulative("cumsum", a, axis, dtype)


def cumprod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return _cumulative("cumprod", a, axis, dtype)


def _cumulative_with_initial(kind: str, x: ArrayLike, axis: int | None, dtype: Any, include_initial: bool) -> Any:
    x = _promote(x)[0]
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{kind}: axis is required for arrays of rank {x.ndim} > 1.")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"{kind} needs an array of rank at least 1.")
    (axis,) = _axes(axis, x.ndim)
    # unlike cumsum, the Array API's cumulative_sum widens small integers as sum does (cumulative_prod does not)
    widen = kind == "cumulative_sum" or x.dtype == np.bool_
    result = _cumulative("cumsum" if kind == "cumulative_sum" else "cumprod", x, axis,
                         _accumulating_dtype(x, dtype) if widen else dtype)
    if include_initial:
        shape = list(result.shape)
        shape[axis] = 1
        start = full(shape, 0 if kind == "cumulative_sum" else 1, dtype=result.dtype)
        result = concatenate([start, result], axis=axis)
    return result


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    return _cumulative_with_initial("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Any:
    return _cumulative_with_initial("cumulative_prod", x, axis, dtype, include_initial)


def count_nonzero(a: ArrayLike, axis: Any = None, keepdims: bool = False) -> Any:
    return sum(not_equal(a, 0), axis=axis, keepdims=keepdims, dtype=dtypes.default_int_dtype())


def ptp(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return subtract(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


def average(a: ArrayLike, axis: Any = None, weights: ArrayLike = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    if weights is None:
        result = mean(a, axis=axis, keepdims=keepdims)
        total = _promote_inexact(a)[0]
        count = math.prod(_shape(total)[d] for d in _axes(axis, _ndim(total)))
        scale = full_like(result, count) if returned else None
        return (result, scale) if returned else result
    a, weights = _promote_inexact(a, weights)
    if weights.shape != a.shape:
        if axis is None or weights.ndim != 1:
            raise ValueError("average: 1-D weights need an axis; other weights must have the array's shape.")
        (single,) = _axes(axis, a.ndim)
        shape = [1] * a.ndim
        shape[single] = weights.shape[0]
        weights = broadcast_to(reshape(weights, shape), a.shape)
    scale = sum(weights, axis=axis, keepdims=keepdims)
    result = divide(sum(multiply(a, weights), axis=axis, keepdims=keepdims), scale)
    return (result, broadcast_to(scale, result.shape)) if returned else result


# NaN-ignoring reductions

def _without_nan(a: ArrayLike, fill: Any) -> Any:
    (a,) = _promote(a)
    if not issubdtype(a.dtype, np.inexact):
        return a
    return _where(isnan(a), _cast(fill, a.dtype), a)


def nansum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    return sum(_without_nan(a, 0), axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


def nanprod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    return prod(_without_nan(a, 1), axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


def _nan_extreme(function: Any, fill: Any, a: ArrayLike, axis: Any, keepdims: bool, initial: Any, where_: Any) -> Any:
    (a,) = _promote(a)
    if not issubdtype(a.dtype, np.inexact):
        return function(a, axis=axis, keepdims=keepdims, initial=initial, where=where_)
    result = function(_where(isnan(a), _cast(fill, a.dtype), a), axis=axis, keepdims=keepdims, initial=initial,
                      where=where_)
    if initial is not None:  # a slice of NaNs (or of nothing) gives `initial`, as in JAX
        return result
    everything_nan = all(isnan(a), axis=axis, keepdims=keepdims, where=where_)
    return _where(everything_nan, _cast(np.nan, result.dtype), result)


def nanmax(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    return _nan_extreme(max, -np.inf, a, axis, keepdims, initial, where)


def nanmin(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    return _nan_extreme(min, np.inf, a, axis, keepdims, initial, where)


def nanmean(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
            where: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    if dtype is not None:
        a = astype(a, dtype)
    present = logical_not(isnan(a))
    if where is not None:
        present = logical_and(present, where)
    count = sum(present, axis=axis, keepdims=keepdims, dtype=a.dtype)
    return divide(nansum(a, axis=axis, keepdims=keepdims, where=where), count)


def nanvar(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None, mean: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    center = nanmean(a, axis=axis, keepdims=True, where=where) if mean is None else mean
    squares = _squares(a, center)
    present = logical_not(isnan(a))
    if where is not None:
        present = logical_and(present, where)
    count = sum(present, axis=axis, keepdims=keepdims, dtype=squares.dtype)
    return _as_result(divide(nansum(squares, axis=axis, keepdims=keepdims, where=where), subtract(count, ddof)), dtype)


def nanstd(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None, mean: Any = None) -> Any:
    return sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, mean=mean))


def _nan_arg(function: Any, fill: Any, a: ArrayLike, axis: Any, keepdims: bool) -> Any:
    (a,) = _promote(a)
    if not issubdtype(a.dtype, np.inexact):
        return function(a, axis=axis, keepdims=keepdims)
    nan = isnan(a)
    result = function(_where(nan, _cast(fill, a.dtype), a), axis=axis, keepdims=keepdims)
    return _where(all(nan, axis=axis, keepdims=keepdims), _cast(-1, result.dtype), result)


def nanargmax(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _nan_arg(argmax, -np.inf, a, axis, keepdims)


def nanargmin(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _nan_arg(argmin, np.inf, a, axis, keepdims)


def nancumsum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return cumsum(_without_nan(a, 0), axis=axis, dtype=dtype)


def nancumprod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return cumprod(_without_nan(a, 1), axis=axis, dtype=dtype)


# order statistics

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def quantile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: ArrayLike = None) -> Any:
    return _quantile(a, q, axis, method, keepdims, weights, ignore_nan=False)


def nanquantile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: ArrayLike = None) -> Any:
    return _quantile(a, q, axis, method, keepdims, weights, ignore_nan=True)


def percentile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: ArrayLike = None,
               out_sharding: Any = None) -> Any:
    result = _quantile(a, _fraction(a, q), axis, method, keepdims, weights, ignore_nan=False)
    if out_sharding is None:
        return result
    from ..sharding.shardings import to_sharding

    return P.sharding_constraint.bind(result, sharding=to_sharding(out_sharding))


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: ArrayLike = None) -> Any:
    return _quantile(a, _fraction(a, q), axis, method, keepdims, weights, ignore_nan=True)


def median(a: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    return quantile(a, 0.5, axis=axis, keepdims=keepdims)


def nanmedian(a: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    return nanquantile(a, 0.5, axis=axis, keepdims=keepdims)


def _fraction(a: ArrayLike, q: ArrayLike) -> Any:
    """Percentiles as fractions, in the array's inexact type."""
    kind = _promote_inexact(a)[0].dtype
    return divide(_cast(_lift(q), kind), _cast(100, kind))


def _quantile(a: ArrayLike, q: ArrayLike, axis: Any, method: str, keepdims: bool, weights: Any,
              ignore_nan: bool) -> Any:
    """Sort each slice along the reduced axes, then read (and interpolate) the order statistics at q; q may be
    traced, and values out of [0, 1] read the first or last element (as in JAX)."""
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"quantile: method {method!r} is not supported; use one of {', '.join(_QUANTILE_METHODS)}.")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"{method} doesn't support weights; only method 'inverted_cdf' does.")
    a = _promote_inexact(a)[0]
    q = _cast(_lift(q), a.dtype)
    axes = _axes(axis, a.ndim)
    kept = [d for d in range(a.ndim) if d not in axes]
    flat = _slices(a, kept, axes)
    n = flat.shape[-1]
    qs = reshape(q, (1,) * len(kept) + (math.prod(_shape(q)),))  # the quantiles along the last axis
    nan = isnan(flat)
    count = sum(logical_not(nan), axis=-1, keepdims=True, dtype=a.dtype) if ignore_nan else _cast(n, a.dtype)
    if method == "inverted_cdf":
        values = _inverted_cdf(flat, qs, _slice_weights(weights, a, kept, axes), nan if ignore_nan else None)
    else:
        values = _interpolated(sort(flat, axis=-1), qs, count, method)
    if ignore_nan:
        values = _where(equal(count, 0), _cast(np.nan, a.dtype), values)
    else:  # NaNs sort last: a slice holding one gives NaN, as in NumPy and JAX
        values = _where(any(nan, axis=-1, keepdims=True), _cast(np.nan, a.dtype), values)
    values = moveaxis(values, -1, 0)  # the quantiles first
    kept_shape = [1 if d in axes else a.shape[d] for d in range(a.ndim)] if keepdims else [a.shape[d] for d in kept]
    return reshape(values, tuple(_shape(q)) + tuple(kept_shape))


def _slices(a: Any, kept: list[int], axes: tuple[int, ...]) -> Any:
    """`a` with its kept dimensions first and the reduced ones flattened into the last."""
    moved = transpose(a, kept + list(axes))
    return reshape(moved, [a.shape[d] for d in kept] + [math.prod(a.shape[d] for d in axes)])


def _interpolated(ordered: Any, qs: Any, count: Any, method: str) -> Any:
    """The order statistics at qs of sorted slices holding `count` numbers each."""
    position = multiply(qs, subtract(count, _cast(1, ordered.dtype)))
    low, high = floor(position), ceil(position)
    high_weight = subtract(position, low)
    last = builtins.max(ordered.shape[-1] - 1, 0)
    shape = _shape(ordered)[:-1] + _shape(position)[-1:]

    def read(index: Any) -> Any:
        index = broadcast_to(clip(astype(index, dtypes.default_int_dtype()), 0, last), shape)
        return take_along_axis(ordered, index, axis=-1, mode="clip")

    if method == "lower":
        return read(low)
    if method == "higher":
        return read(high)
    if method == "nearest":  # ties go to the lower neighbour, as in JAX
        return read(_where(greater(high_weight, 0.5), high, low))
    low_value, high_value = read(low), read(high)
    if method == "midpoint":
        return multiply(add(low_value, high_value), _cast(0.5, ordered.dtype))
    return add(multiply(low_value, subtract(_cast(1, ordered.dtype), high_weight)), multiply(high_value, high_weight))


def _slice_weights(weights: Any, a: Any, kept: list[int], axes: tuple[int, ...]) -> Any:
    """quantile's weights= laid out as the slices: the array's shape, or 1-D along a single reduced axis."""
    if weights is None:
        return None
    (weights,) = _promote_inexact(weights)
    if _shape(weights) != a.shape:
        if len(axes) != 1 or len(kept) == a.ndim or weights.ndim != 1 or weights.shape[0] != a.shape[axes[0]]:
            raise ValueError(f"quantile: weights of shape {tuple(_shape(weights))} do not fit an array of shape "
                             f"{a.shape}; give them the array's shape, or 1-D along a single axis.")
        shape = [1] * a.ndim
        shape[axes[0]] = weights.shape[0]
        weights = broadcast_to(reshape(weights, shape), a.shape)
    return _slices(astype(weights, a.dtype), kept, axes)


def _inverted_cdf(flat: Any, qs: Any, weights: Any, nan: Any) -> Any:
    """The first sorted element whose cumulative weight reaches q of the total (NaNs weigh nothing when
    ignored)."""
    order = argsort(flat, axis=-1)
    ordered = take_along_axis(flat, order, axis=-1)
    weights = full_like(flat, 1) if weights is None else take_along_axis(weights, order, axis=-1)
    if nan is not None:
        weights = _where(take_along_axis(nan, order, axis=-1), _cast(0, flat.dtype), weights)
    cdf = cumsum(weights, axis=-1)
    target = multiply(qs, cdf[..., -1:])
    below = sum(less(expand_dims(cdf, -2), expand_dims(target, -1)), axis=-1)  # cdf < q * total, per quantile
    index = clip(below, 0, builtins.max(flat.shape[-1] - 1, 0))
    return take_along_axis(ordered, broadcast_to(index, _shape(ordered)[:-1] + _shape(qs)[-1:]), axis=-1,
                           mode="clip")
