"""The ufunc objects of meshax.numpy (the fourteen JAX makes: add, multiply, maximum, logical_or, ...), each
calling the plain function of `ufuncs` and reducing, accumulating and scattering with whole-array operations
where one exists (sum, cumsum, .at[].add, a halving reduction, a doubling scan)."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..core.core import aval_of
from ..core.dtypes import issubdtype
from .promotion import ArrayLike, _axes, _cast, _dtype, _promote, _promote_inexact
from . import ufuncs as U
from .ufunc_methods import doubling_scan, front, halving
from .ufunc_objects import ufunc
from .shape_ops import broadcast_to, moveaxis, reshape, squeeze, transpose
from .creation import asarray
from .reductions import all, any, cumprod, cumsum, max, min, prod, sum

__all__ = ["add", "bitwise_and", "bitwise_or", "bitwise_xor", "logaddexp", "logaddexp2", "logical_and", "logical_or",
           "logical_xor", "maximum", "minimum", "multiply", "negative", "subtract"]


def _typed(a: ArrayLike, dtype: Any) -> Any:
    """`a` as a strongly typed array, cast to `dtype` if given."""
    (a,) = _promote(a)
    return _cast(a, _dtype(dtype) if dtype is not None else aval_of(a).dtype, False)


def _ordered(extreme: Callable[..., Any]) -> Callable[..., Any]:
    """max/min as ufunc.reduce calls them (`dtype` casts first)."""
    def reduce(a: ArrayLike, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Any:
        return extreme(_typed(a, dtype), axis=axis, keepdims=keepdims, initial=initial, where=where)

    return reduce


def _summed(total: Callable[..., Any]) -> Callable[..., Any]:
    def reduce(a: ArrayLike, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Any:
        return total(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    return reduce


def _logical(test: Callable[..., Any], combine: Callable[..., Any]) -> Callable[..., Any]:
    """all/any as logical_and/logical_or.reduce: `initial` is combined with the result."""
    def reduce(a: ArrayLike, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Any:
        result = test(a, axis=axis, keepdims=keepdims, where=where)
        return result if initial is None else combine(result, U.astype(initial, np.bool_))

    return reduce


def _reduce_logical_xor(a: ArrayLike, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    """Whether an odd number of the selected elements are true."""
    count = sum(U.astype(a, np.bool_), axis=axis, keepdims=keepdims, where=where, dtype=np.int32)
    result = U.equal(U.bitwise_and(count, np.int32(1)), np.int32(1))
    return result if initial is None else U.logical_xor(result, U.astype(initial, np.bool_))


def _leading(a: Any, axis: Any) -> tuple[Any, tuple[int, ...], tuple[int, ...]]:
    """`a` with the axes `axis` names flattened into one first axis; the kept shape and the keepdims shape."""
    axes = _axes(axis, a.ndim)
    kept = [d for d in range(a.ndim) if d not in axes]
    size = math.prod(a.shape[d] for d in axes)
    x = reshape(transpose(a, tuple(axes) + tuple(kept)), (size,) + tuple(a.shape[d] for d in kept))
    return x, tuple(a.shape[d] for d in kept), tuple(1 if d in axes else n for d, n in enumerate(a.shape))


def _integral(kind: np.dtype) -> bool:
    return bool(issubdtype(kind, np.integer) or kind == np.bool_)


def _bitwise(call: Callable[..., Any], identity: int) -> Callable[..., Any]:
    """bitwise_and/or/xor.reduce: the selected elements (integers or booleans) combined pairwise by halves."""
    def reduce(a: ArrayLike, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Any:
        a = _typed(a, None)
        if not _integral(aval_of(a).dtype):
            raise ValueError(f"integer argument required; got dtype={aval_of(a).dtype}")
        a = _typed(a, dtype)
        kind = aval_of(a).dtype
        if not _integral(kind):
            raise TypeError(f"bitwise reductions need an integer or boolean dtype; got dtype={kind}.")
        unit = _cast(np.array(identity).astype(kind), kind)
        if where is not None:
            a = U._where(where, a, unit)
        x, kept, kept_dims = _leading(a, axis)
        result = halving(call, x) if x.shape[0] else broadcast_to(unit, kept)
        if keepdims:
            result = reshape(result, kept_dims)
        return result if initial is None else call(result, _cast(asarray(initial), kind))

    return reduce


def _log_sum(power: Callable[..., Any], log: Callable[..., Any], pair: Callable[..., Any]) -> Callable[..., Any]:
    """logaddexp(2).reduce: log(sum(base**(x - peak))) + peak, the peak the largest finite-safe element."""
    def reduce(a: ArrayLike, axis: Any, dtype: Any, keepdims: bool, initial: Any, where: Any) -> Any:
        (a,) = _promote_inexact(a)
        a = _cast(a, aval_of(a).dtype, False)
        low = _cast(-np.inf, aval_of(a).dtype)
        if where is not None:
            a = U._where(where, a, low)
        peak = max(a, axis=axis, keepdims=True, initial=low)
        peak = U._where(U.isfinite(peak), peak, _cast(0, aval_of(a).dtype))
        result = U.add(log(sum(power(U.subtract(a, peak)), axis=axis, keepdims=True)), peak)
        if not keepdims:
            result = squeeze(result, _axes(axis, a.ndim))
        return result if initial is None else pair(result, initial)

    return reduce


def _associative_scan(name: str) -> Callable[..., Any]:
    """accumulate of an associative ufunc: a doubling scan in the type of the ufunc's result."""
    def accumulate(a: ArrayLike, axis: int = 0, dtype: Any = None) -> Any:
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        a, step = _BUILT[name]._scan_typed(a, dtype)
        x, axis = front(a, axis)
        return moveaxis(doubling_scan(step, x), 0, axis)

    return accumulate


def _cumulative(running: Callable[..., Any]) -> Callable[..., Any]:
    def accumulate(a: ArrayLike, axis: int = 0, dtype: Any = None) -> Any:
        return running(a, axis=axis, dtype=dtype)

    return accumulate


def _scatter(method: str) -> Callable[..., Any]:
    """at() as one indexed update (a.at[indices].add(b), ...) in `a`'s type: repeated indices combine as the ufunc
    would."""
    def at(a: ArrayLike, indices: Any, b: ArrayLike) -> Any:
        return getattr(asarray(a).at[indices], method)(b)

    return at


def _scatter_extreme(method: str) -> Callable[..., Any]:
    """maximum/minimum.at as one indexed max/min, in the type of the ufunc's result on `a` and `b` (as JAX's)."""
    def at(a: ArrayLike, indices: Any, b: ArrayLike) -> Any:
        a, b = _promote(a, b)
        return getattr(_cast(a, aval_of(a).dtype, False).at[indices], method)(b)

    return at


def _make(name: str, identity: Any, **methods: Any) -> ufunc:
    """The ufunc object over the plain function `ufuncs.<name>`."""
    function = getattr(U, name)
    nin = 1 if name == "negative" else 2
    made = ufunc(function, nin=nin, nout=1, name=name, identity=identity, call=function, **methods)
    _BUILT[name] = made
    return made


_BUILT: dict[str, ufunc] = {}
add = _make("add", 0, reduce=_summed(sum), accumulate=_cumulative(cumsum), at=_scatter("add"))
multiply = _make("multiply", 1, reduce=_summed(prod), accumulate=_cumulative(cumprod), at=_scatter("multiply"))
subtract = _make("subtract", None, at=_scatter("subtract"))
negative = _make("negative", None)
maximum = _make("maximum", None, reduce=_ordered(max), accumulate=_associative_scan("maximum"),
                at=_scatter_extreme("max"))
minimum = _make("minimum", None, reduce=_ordered(min), accumulate=_associative_scan("minimum"),
                at=_scatter_extreme("min"))
logical_and = _make("logical_and", True, reduce=_logical(all, U.logical_and),
                    accumulate=_associative_scan("logical_and"))
logical_or = _make("logical_or", False, reduce=_logical(any, U.logical_or), accumulate=_associative_scan("logical_or"))
logical_xor = _make("logical_xor", False, reduce=_reduce_logical_xor, accumulate=_associative_scan("logical_xor"))
bitwise_and = _make("bitwise_and", -1, reduce=_bitwise(U.bitwise_and, -1), accumulate=_associative_scan("bitwise_and"))
bitwise_or = _make("bitwise_or", 0, reduce=_bitwise(U.bitwise_or, 0), accumulate=_associative_scan("bitwise_or"))
bitwise_xor = _make("bitwise_xor", 0, reduce=_bitwise(U.bitwise_xor, 0), accumulate=_associative_scan("bitwise_xor"))
logaddexp = _make("logaddexp", -np.inf, reduce=_log_sum(U.exp, U.log, U.logaddexp),
                  accumulate=_associative_scan("logaddexp"))
logaddexp2 = _make("logaddexp2", -np.inf, reduce=_log_sum(U.exp2, U.log2, U.logaddexp2),
                   accumulate=_associative_scan("logaddexp2"))
