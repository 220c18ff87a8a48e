"""meshax.numpy's numerical routines composed from the other modules: nan_to_num, differences and integrals
(diff, ediff1d, trapezoid), polynomials (polyval), covariance and correlation (cov, corrcoef)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .promotion import ArrayLike, _axes, _cast, _promote, _promote_inexact
from .ufuncs import add, astype, clip, conjugate, divide, imag, isnan, multiply, not_equal, real, sqrt, subtract
from .shape_ops import _take_range, atleast_2d, broadcast_to, concatenate, expand_dims, ravel, reshape, squeeze
from .creation import zeros_like
from .reductions import mean, sum
from .searching import where
from .products import diagonal, matmul
from .logic import isneginf, isposinf
from ..core.dtypes import finfo, issubdtype


def nan_to_num(x: ArrayLike, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    (x,) = _promote(x)
    if issubdtype(x.dtype, np.complexfloating):
        parts = [nan_to_num(part, nan=nan, posinf=posinf, neginf=neginf) for part in (real(x), imag(x))]
        return add(parts[0], multiply(parts[1], _cast(1j, x.dtype)))
    if not issubdtype(x.dtype, np.inexact):
        return x
    info = finfo(x.dtype)
    out = where(isnan(x), _cast(nan, x.dtype), x)
    out = where(isposinf(x), _cast(info.max if posinf is None else posinf, x.dtype), out)
    return where(isneginf(x), _cast(info.min if neginf is None else neginf, x.dtype), out)


def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike = None, append: ArrayLike = None) -> Any:
    a = _promote(a)[0]
    (axis,) = _axes(axis, a.ndim)

    def edge(extra: ArrayLike) -> Any:
        extra = _promote(extra)[0]
        if extra.ndim == 0:
            shape = list(a.shape)
            shape[axis] = 1
            extra = broadcast_to(extra, shape)
        return extra

    if prepend is not None or append is not None:
        a = concatenate(([edge(prepend)] if prepend is not None else []) + [a] +
                        ([edge(append)] if append is not None else []), axis=axis)
    for _ in range(n):
        first = _take_range(a, axis, 1, a.shape[axis])
        second = _take_range(a, axis, 0, a.shape[axis] - 1)
        a = not_equal(first, second) if a.dtype == np.bool_ else subtract(first, second)
    return a


def ediff1d(ary: ArrayLike, to_end: ArrayLike = None, to_begin: ArrayLike = None) -> Any:
    flat = ravel(ary)
    result = diff(flat) if flat.shape[0] > 0 else flat
    pieces = ([ravel(to_begin)] if to_begin is not None else []) + [result] + \
        ([ravel(to_end)] if to_end is not None else [])
    return concatenate([astype(p, flat.dtype) for p in pieces]) if len(pieces) > 1 else result


def trapezoid(y: ArrayLike, x: ArrayLike = None, dx: ArrayLike = 1.0, axis: int = -1) -> Any:
    y = _promote_inexact(y)[0]
    (axis,) = _axes(axis, y.ndim)
    n = y.shape[axis]
    pairs = add(_take_range(y, axis, 1, n), _take_range(y, axis, 0, n - 1))
    if x is None:
        return multiply(sum(pairs, axis=axis), divide(dx, 2.0))
    x = _promote_inexact(x)[0]
    if x.ndim == 1:
        steps = subtract(x[1:], x[:-1])
        shape = [1] * y.ndim
        shape[axis] = n - 1
        steps = reshape(steps, shape)
    else:
        steps = diff(x, axis=axis)
    return divide(sum(multiply(pairs, steps), axis=axis), 2.0)


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Any:
    p, x = _promote(p, x)
    result = zeros_like(x) if p.shape[0] == 0 else broadcast_to(p[0], x.shape)
    for i in range(1, p.shape[0]):
        result = add(multiply(result, x), p[i])
    return result


def cov(m: ArrayLike, y: ArrayLike = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: ArrayLike = None, aweights: ArrayLike = None, dtype: Any = None) -> Any:
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov: fweights and aweights are not supported.")
    m = atleast_2d(_promote_inexact(m if dtype is None else astype(m, dtype))[0])
    if not rowvar and m.shape[0] != 1:
        m = m.T
    if y is not None:
        y = atleast_2d(_promote_inexact(y)[0])
        if not rowvar and y.shape[0] != 1:
            y = y.T
        m = concatenate([m, y], axis=0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    centered = subtract(m, mean(m, axis=1, keepdims=True))
    count = m.shape[1] - ddof
    product = matmul(centered, conjugate(centered).T)
    return squeeze(divide(product, float(count)))


def corrcoef(x: ArrayLike, y: ArrayLike = None, rowvar: bool = True, dtype: Any = None) -> Any:
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return divide(c, c)
    d = diagonal(c)
    scale = sqrt(real(d)) if issubdtype(c.dtype, np.complexfloating) else sqrt(d)
    c = divide(divide(c, expand_dims(scale, 1)), expand_dims(scale, 0))
    return clip(c, -1, 1) if not issubdtype(c.dtype, np.complexfloating) else c
