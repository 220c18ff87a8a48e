"""meshax.numpy's searching and counting: where, nonzero and argwhere, searchsorted, isin, unique and
bincount."""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ..core import dtypes
from ..core.core import Tracer, aval_of
from .promotion import ArrayLike, _as_array, _cast, _host_result, _lift, _promote, _shape
from .ufuncs import _where, astype, clip, equal, floor_divide, less, less_equal, logical_not, not_equal, remainder
from .shape_ops import argsort, concatenate, expand_dims, ravel, reshape, stack
from .creation import ones, zeros
from .indexing import take
from .reductions import any, sum
from ..core.dtypes import issubdtype


def where(condition: ArrayLike, x: ArrayLike = None, y: ArrayLike = None) -> Any:
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("where needs both x and y, or neither.")
    return _where(condition, x, y)


def nonzero(a: ArrayLike, *, size: Any = None, fill_value: Any = None) -> tuple[Any, ...]:
    """The indices of the nonzero elements, one array per dimension. The result's length depends on the
    data, so under jit pass `size=` (the first `size` indices, padded with `fill_value`, 0 by default)."""
    index_dtype = dtypes.default_int_dtype()
    if size is None:
        if isinstance(a, Tracer):
            raise TypeError("nonzero has a data-dependent shape; inside jit pass size= or use where.")
        found = np.nonzero(np.asarray(a))
        return tuple(_host_result(i.astype(index_dtype), a) for i in found)
    shape = _shape(a)
    if not shape:
        raise ValueError("nonzero of a 0-d array; use atleast_1d first.")
    flat = ravel(not_equal(a, 0))
    count = sum(flat)
    order = argsort(logical_not(flat))[:size] if flat.size >= size else \
        concatenate([argsort(logical_not(flat)), np.zeros(size - flat.size, index_dtype)])
    valid = less(np.arange(size, dtype=index_dtype), count)
    fills = fill_value if isinstance(fill_value, tuple) else (0 if fill_value is None else fill_value,) * len(shape)
    out, rest = [], order
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    for d, stride in enumerate(strides):
        coordinate = floor_divide(rest, stride) if stride > 1 else rest
        rest = remainder(rest, stride) if stride > 1 else rest
        out.append(astype(where(valid, coordinate, fills[d]), index_dtype))
    return tuple(out)


def flatnonzero(a: ArrayLike, *, size: Any = None, fill_value: Any = None) -> Any:
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: Any = None, fill_value: Any = None) -> Any:
    a = _as_array(a)
    if a.ndim == 0:
        a = reshape(a, (1,))
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=-1)


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike = None, *,
                 method: str = "scan") -> Any:
    """Where `v` would go in the sorted 1-D `a`: the number of elements of `a` before each value."""
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
    element = _promote(element)[0]
    found = any(equal(expand_dims(element, -1), ravel(test_elements)), axis=-1)
    return logical_not(found) if invert else found


def bincount(x: ArrayLike, weights: ArrayLike = None, minlength: int = 0, *, length: int | None = None) -> Any:
    x = _lift(x)
    if not issubdtype(aval_of(x).dtype, np.integer):
        raise TypeError("bincount needs integer input.")
    if length is None:
        if isinstance(x, Tracer):
            raise TypeError("bincount under jit needs a static length=.")
        length = builtins.max(int(np.max(np.asarray(x), initial=-1)) + 1, minlength)
    values = ones(_shape(x), dtypes.default_int_dtype()) if weights is None else _promote(weights)[0]
    base = zeros(length, values.dtype)
    flat = ravel(x)
    return base.at[clip(flat, 0, None)].add(where(less(flat, 0), _cast(0, values.dtype), ravel(values)))


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, size: Any = None, fill_value: Any = None, equal_nan: bool = True) -> Any:
    """As numpy.unique, computed on the host: the result's shape depends on the data (eager only)."""
    if isinstance(ar, Tracer):
        raise TypeError("unique has a data-dependent shape, so it needs concrete values (it cannot run under jit).")
    if size is not None:
        raise NotImplementedError("unique(size=...) is not supported; call it outside jit.")
    value = np.asarray(ar)
    out = np.unique(value, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts,
                    axis=axis, equal_nan=equal_nan)
    if not isinstance(out, tuple):
        return _host_result(out, ar)
    index_dtype = dtypes.default_int_dtype()
    return tuple([_host_result(out[0], ar)] + [_host_result(o.astype(index_dtype), ar) for o in out[1:]])
