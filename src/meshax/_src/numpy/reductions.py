"""meshax.numpy's reductions and scans: sums, products, extremes, means and variances, arg-extremes,
cumulative sums and products, their NaN-ignoring forms, and order statistics (quantile, percentile, median)."""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ..core import dtypes
from ..primitives import array_primitives as P
from ..core.core import Tracer
from .promotion import ArrayLike, _axes, _cast, _dtype, _is_array, _ndim, _promote, _promote_inexact, _shape
from .ufuncs import (
    _where, add, astype, conjugate, divide, isnan, logical_and, logical_not, maximum, minimum, multiply, not_equal,
    real, sqrt, square, subtract,
)
from .shape_ops import broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape, sort, transpose
from .creation import full, full_like
from .indexing import take
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


def _accumulating_dtype(a: Any, dtype: Any) -> Any:
    if dtype is not None:
        return _dtype(dtype)
    kind = dtypes.dtype_of(a)[0] if not _is_array(a) else a.dtype
    if kind == np.bool_ or (issubdtype(kind, np.integer) and kind.itemsize < dtypes.default_int_dtype().itemsize):
        return dtypes.default_uint_dtype() if issubdtype(kind, np.unsignedinteger) else dtypes.default_int_dtype()
    return None


def sum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
        initial: Any = None, where: Any = None) -> Any:
    result = _reduce("sum", a, axis, keepdims, where, 0, _accumulating_dtype(a, dtype))
    return result if initial is None else add(result, initial)


def prod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None) -> Any:
    result = _reduce("prod", a, axis, keepdims, where, 1, _accumulating_dtype(a, dtype))
    return result if initial is None else multiply(result, initial)


def _extreme(kind: str, combine: Any, a: ArrayLike, axis: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    """max or min: reduce, then fold in `initial` (which where= requires)."""
    (a,) = _promote(a)
    if where is not None and initial is None:
        raise ValueError(f"{kind} with where= needs initial= (the value for rows where nothing is selected).")
    _check_identity(kind, a, axis, initial)
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
    return sum(broadcast_to(where_, _shape(a)), axis=axis, keepdims=keepdims, dtype=dtypes.default_float_dtype())


def mean(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    if dtype is not None:
        a = astype(a, dtype)
    return divide(sum(a, axis=axis, keepdims=keepdims, where=where), _count(a, axis, where, keepdims))


def var(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, correction: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    ddof = correction if correction is not None else ddof
    centered = subtract(a, mean(a, axis=axis, keepdims=True, where=where))
    squares = real(multiply(centered, conjugate(centered))) if issubdtype(a.dtype, np.complexfloating) \
        else square(centered)
    total = sum(squares, axis=axis, keepdims=keepdims, where=where)
    return divide(total, subtract(_count(a, axis, where, keepdims), ddof))


def std(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, correction: Any = None) -> Any:
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


def _arg(primitive: Any, a: ArrayLike, axis: Any, keepdims: bool) -> Any:
    (a,) = _promote(a)
    if axis is None:
        a, axis = ravel(a), 0
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
    # unlike cumsum, the Array API's cumulative_sum/prod widen small integers as sum does
    result = _cumulative("cumsum" if kind == "cumulative_sum" else "cumprod", x, axis, _accumulating_dtype(x, dtype))
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
           keepdims: bool = False, where: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    centered = subtract(a, nanmean(a, axis=axis, keepdims=True, where=where))
    squares = real(multiply(centered, conjugate(centered))) if issubdtype(a.dtype, np.complexfloating) \
        else square(centered)
    present = logical_not(isnan(a))
    if where is not None:
        present = logical_and(present, where)
    count = sum(present, axis=axis, keepdims=keepdims, dtype=squares.dtype)
    return divide(nansum(squares, axis=axis, keepdims=keepdims, where=where), subtract(count, ddof))


def nanstd(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None) -> Any:
    return sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where))


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

def quantile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, interpolation: Any = None) -> Any:
    return _quantile(a, q, axis, method if interpolation is None else interpolation, keepdims)


def _quantile(a: ArrayLike, q: ArrayLike, axis: Any, method: str, keepdims: bool) -> Any:
    """Sort along the reduced axes, then read (and interpolate) the order statistics at fixed positions."""
    if method not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"quantile: method {method!r} is not supported; use linear, lower, higher, nearest or "
                         "midpoint.")
    if isinstance(q, Tracer):
        raise TypeError("quantile needs concrete quantiles q (they decide which elements are read).")
    a = _promote_inexact(a)[0]
    qs = np.asarray(q, dtype=np.float64)
    if builtins.any((qs < 0).ravel()) or builtins.any((qs > 1).ravel()):
        raise ValueError("quantiles must be in the range [0, 1].")
    axes = _axes(axis, a.ndim)
    kept = [d for d in range(a.ndim) if d not in axes]
    moved = transpose(a, kept + list(axes))
    moved = reshape(moved, [a.shape[d] for d in kept] + [math.prod(a.shape[d] for d in axes)])
    ordered = sort(moved, axis=-1)
    n = ordered.shape[-1]
    position = qs * (n - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, n - 1)
    flat_low, flat_high = low.ravel(), high.ravel()
    lower_values = take(ordered, flat_low, axis=-1)
    upper_values = take(ordered, flat_high, axis=-1)
    fraction = (position - low).ravel().astype(a.dtype)
    if method == "lower":
        values = lower_values
    elif method == "higher":
        values = take(ordered, np.ceil(position).astype(np.int64).ravel(), axis=-1)
    elif method == "nearest":
        values = take(ordered, np.round(position).astype(np.int64).ravel(), axis=-1)
    elif method == "midpoint":
        higher = take(ordered, np.ceil(position).astype(np.int64).ravel(), axis=-1)
        values = multiply(add(lower_values, higher), _cast(0.5, a.dtype))
    else:
        values = add(lower_values, multiply(subtract(upper_values, lower_values), fraction))
    # NaNs sort last: a slice holding one gives NaN, as in NumPy and JAX
    if issubdtype(a.dtype, np.inexact):
        values = _where(any(isnan(moved), axis=-1, keepdims=True), _cast(np.nan, a.dtype), values)
    values = moveaxis(values, -1, 0)  # the quantiles first
    kept_shape = [a.shape[d] for d in kept]
    if keepdims:
        kept_shape = [1 if d in axes else a.shape[d] for d in range(a.ndim)]
    return reshape(values, qs.shape + tuple(kept_shape))


def percentile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, interpolation: Any = None) -> Any:
    if isinstance(q, Tracer):
        raise TypeError("percentile needs concrete percentiles q.")
    return quantile(a, np.asarray(q, np.float64) / 100, axis, method=method, keepdims=keepdims,
                    interpolation=interpolation)


def median(a: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    return quantile(a, 0.5, axis=axis, keepdims=keepdims)
