"""meshax.numpy's polynomial and signal helpers: coefficient arithmetic (polyadd, polysub, polymul, polydiv,
polyder, polyint, poly of roots), Vandermonde matrices, trim_zeros, convolve/correlate, unwrap and gradient.

Convolutions gather the shifted kernel into a (static-shape) matrix and contract it with one matmul, so they run
eagerly, under jit, grad and vmap alike. Functions whose output shape depends on values (trim_zeros, the
trim_leading_zeros options) need concrete inputs and raise ConcretizationTypeError when traced, as JAX does.
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from .promotion import ArrayLike, _axes, _cast, _promote, _promote_inexact
from .ufuncs import abs, add, conjugate, divide, equal, greater, less, logical_and, multiply, power, remainder, subtract
from .shape_ops import _take_range, atleast_1d, concatenate, flip, moveaxis, reshape, stack
from .creation import ones, zeros
from .indexing import take
from .reductions import cumsum
from .searching import where
from .products import matmul


def _concrete(x: Any, what: str) -> np.ndarray:
    """The NumPy value of `x`, or ConcretizationTypeError (JAX's class) when it is traced."""
    concrete = getattr(x, "_concrete", None)
    return np.asarray(concrete(what) if concrete is not None else x)


def _leading_zeros(x: Any, what: str) -> int:
    """How many leading entries of the 1-D `x` are zero (needs its concrete value)."""
    nonzero = np.flatnonzero(_concrete(x, what))
    return int(nonzero[0]) if nonzero.size else x.shape[0]


def trim_zeros(filt: ArrayLike, trim: str = "fb", axis: int | Sequence[int] | None = None) -> Any:
    """Drop leading ('f') and/or trailing ('b') zeros, along `axis` (all axes when None); needs concrete values."""
    (filt,) = _promote(filt)
    value = _concrete(filt, "the `filt` argument of trim_zeros()")
    trim = trim.lower()
    for ax in _axes(tuple(range(filt.ndim)) if axis is None else axis, filt.ndim):
        others = tuple(d for d in range(filt.ndim) if d != ax)
        nonzero = np.flatnonzero(np.any(value != 0, axis=others))
        if nonzero.size == 0:
            start, stop = 0, 0
        else:
            start = int(nonzero[0]) if "f" in trim else 0
            stop = int(nonzero[-1]) + 1 if "b" in trim else value.shape[ax]
        filt = _take_range(filt, ax, start, stop)
        value = np.take(value, np.arange(start, stop), axis=ax)
    return filt


def _coefficients(p: Any, name: str, error: type = TypeError) -> Any:
    """`p` promoted, checked to be 1-D coefficients (JAX rejects 0-d ones: IndexError in polyadd/polysub)."""
    (p,) = _promote(p)
    if p.ndim != 1:
        raise error(f"{name}: coefficients must be a 1-D array, got shape {p.shape}; pass a 1-D array.")
    return p


def _pad_front(p: Any, length: int) -> Any:
    """`p` with zeros prepended up to `length` entries."""
    extra = length - p.shape[0]
    return p if extra <= 0 else concatenate([zeros((extra,), p.dtype), p])


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Any:
    """The sum of two polynomials given by coefficients, highest power first."""
    a1, a2 = _promote(_coefficients(a1, "polyadd", IndexError), _coefficients(a2, "polyadd", IndexError))
    length = builtins.max(a1.shape[0], a2.shape[0])
    return add(_pad_front(a1, length), _pad_front(a2, length))


def polysub(a1: ArrayLike, a2: ArrayLike) -> Any:
    """The difference of two polynomials given by coefficients, highest power first."""
    a1, a2 = _promote(_coefficients(a1, "polysub", IndexError), _coefficients(a2, "polysub", IndexError))
    length = builtins.max(a1.shape[0], a2.shape[0])
    return subtract(_pad_front(a1, length), _pad_front(a2, length))


def _check_1d(a: Any, v: Any, name: str) -> None:
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs.")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {a.shape} and {v.shape}.")


def _full_convolution_rows(a: Any, v: Any, rows: np.ndarray, precision: Any, preferred_element_type: Any) -> Any:
    """Entries `rows` of the full convolution of `a` and `v`: out[k] = sum_j a[j] v[k - j], one matmul."""
    shift = rows[:, None] - np.arange(a.shape[0])[None, :]
    inside = (shift >= 0) & (shift < v.shape[0])
    kernel = where(inside, take(v, np.clip(shift, 0, v.shape[0] - 1)), _cast(0, v.dtype))
    return matmul(kernel, a, precision=precision, preferred_element_type=preferred_element_type)


def _convolve(a: Any, v: Any, mode: str, precision: Any, preferred_element_type: Any) -> Any:
    """numpy.convolve's full/same/valid outputs of two 1-D arrays."""
    n, m = a.shape[0], v.shape[0]
    longer, shorter = builtins.max(n, m), builtins.min(n, m)
    if mode == "full":
        start, size = 0, n + m - 1
    elif mode == "same":
        start, size = (shorter - 1) // 2, longer
    elif mode == "valid":
        start, size = shorter - 1, longer - shorter + 1
    else:
        raise ValueError(f"mode must be one of ['full', 'same', 'valid'], got mode={mode!r}.")
    return _full_convolution_rows(a, v, np.arange(start, start + size), precision, preferred_element_type)


def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Any:
    """The discrete linear convolution of two 1-D arrays (numpy.convolve's modes)."""
    a, v = _promote_inexact(a, v)
    _check_1d(a, v, "convolve")
    return _convolve(a, v, mode, precision, preferred_element_type)


def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """The cross-correlation of two 1-D arrays, c[k] = sum_n a[n + k] conj(v[n]) (numpy.correlate's modes)."""
    a, v = _promote_inexact(a, v)
    _check_1d(a, v, "correlate")
    return _convolve(a, flip(conjugate(v)), mode, precision, preferred_element_type)


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Any:
    """The product of two polynomials; trim_leading_zeros (needs concrete values) drops their leading zeros first."""
    a1, a2 = _promote_inexact(_coefficients(a1, "polymul"), _coefficients(a2, "polymul"))
    if trim_leading_zeros:
        a1 = a1[_leading_zeros(a1, "the `a1` argument of polymul()"):]
        a2 = a2[_leading_zeros(a2, "the `a2` argument of polymul()"):]
    a1 = a1 if a1.shape[0] else zeros((1,), a1.dtype)
    a2 = a2 if a2.shape[0] else zeros((1,), a2.dtype)
    return _convolve(a1, a2, "full", None, None)


def polydiv(u: ArrayLike, v: ArrayLike, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """Quotient and remainder of polynomial division; trim_leading_zeros (needs concrete values) drops the
    remainder's leading entries within sqrt(eps) of zero."""
    u, v = _promote_inexact(_coefficients(u, "polydiv"), _coefficients(v, "polydiv"))
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = divide(_cast(1, u.dtype), v[0])
    quotient, remainder_ = [], u
    for k in range(m - n + 1):
        digit = multiply(scale, remainder_[k])
        quotient.append(digit)
        remainder_ = subtract(remainder_, concatenate([zeros((k,), u.dtype), multiply(digit, v),
                                                       zeros((m - n - k,), u.dtype)]))
    quotient = stack(quotient) if quotient else zeros((1,), u.dtype)
    if trim_leading_zeros:
        value = _concrete(remainder_, "the remainder of polydiv() with trim_leading_zeros=True")
        large = np.flatnonzero(~(np.abs(value) <= np.sqrt(np.finfo(value.dtype).eps)))
        remainder_ = remainder_[int(large[0]) if large.size else value.shape[0]:]
    return quotient, remainder_


def polyder(p: ArrayLike, m: int = 1) -> Any:
    """The m-th derivative of a polynomial's coefficients."""
    if m < 0:
        raise ValueError(f"polyder: order of derivative must be positive, got m={m}.")
    (p,) = _promote_inexact(_coefficients(p, "polyder"))
    n = p.shape[0]
    if m >= n:
        return p[:0]
    powers = np.arange(n - 1, m - 1, -1)[:, None] - np.arange(m)[None, :]
    return multiply(p[:n - m], _cast(np.prod(powers, axis=1), p.dtype))


def polyint(p: ArrayLike, m: int = 1, k: int | ArrayLike | None = None) -> Any:
    """The m-th antiderivative of a polynomial, with integration constants `k` (zeros by default)."""
    if m < 0:
        raise ValueError(f"polyint: order of integral must be positive, got m={m}.")
    (p,) = _promote_inexact(_coefficients(p, "polyint"))
    if m == 0:
        return p
    if isinstance(k, (list, tuple)):
        raise TypeError(f"polyint requires ndarray or scalar arguments, got {type(k)} for k; pass an array.")
    k = zeros((m,), p.dtype) if k is None else atleast_1d(_promote_inexact(k)[0])
    if k.shape[0] == 1:
        k = concatenate([k] * m)
    if k.shape[0] != m:
        raise ValueError(f"polyint: k must be a scalar or a sequence of m={m} constants, got shape {k.shape}.")
    for i in range(m):
        n = p.shape[0]
        p = concatenate([divide(p, _cast(np.arange(n, 0, -1), p.dtype)), _cast(k[i:i + 1], p.dtype)])
    return p


def poly(seq_of_zeros: ArrayLike) -> Any:
    """The coefficients of the monic polynomial with the given 1-D sequence of roots."""
    (zeros_,) = _promote_inexact(seq_of_zeros)
    if zeros_.ndim != 1:
        raise ValueError(f"poly: input must be a 1-D sequence of roots, got shape {zeros_.shape}.")
    coefficients = ones((1,), zeros_.dtype)
    for i in range(zeros_.shape[0]):
        factor = concatenate([ones((1,), zeros_.dtype), -zeros_[i:i + 1]])
        coefficients = _convolve(coefficients, factor, "full", None, None)
    return coefficients


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Any:
    """The Vandermonde matrix of a 1-D `x`: columns are powers of x (decreasing unless `increasing`)."""
    (x,) = _promote(x)
    if x.ndim != 1:
        raise ValueError(f"x must be a one-dimensional array, got shape {x.shape}.")
    N = x.shape[0] if N is None else N
    if N < 0:
        raise ValueError(f"N must be nonnegative, got N={N}.")
    exponents = np.arange(N) if increasing else np.arange(N - 1, -1, -1)
    return power(reshape(x, (-1, 1)), _cast(exponents, x.dtype))


def unwrap(p: ArrayLike, discont: ArrayLike | None = None, axis: int = -1, period: ArrayLike = 2 * np.pi) -> Any:
    """`p` with jumps larger than `discont` (period/2 by default) along `axis` replaced by their period complement."""
    (p,) = _promote_inexact(p)
    (axis,) = _axes(axis, p.ndim)
    half = divide(period, 2)
    discont = half if discont is None else discont
    n = p.shape[axis]
    steps = subtract(_take_range(p, axis, 1, n), _take_range(p, axis, 0, n - 1))
    wrapped = subtract(remainder(add(steps, half), period), half)
    wrapped = where(logical_and(equal(wrapped, -half), greater(steps, 0)), half, wrapped)
    correction = where(less(abs(steps), discont), _cast(0, p.dtype), subtract(wrapped, steps))
    shifted = cumsum(correction, axis=axis).astype(p.dtype)
    return concatenate([_take_range(p, axis, 0, 1), add(_take_range(p, axis, 1, n), shifted)], axis=axis)


def _gradient_along(f: Any, axis: int, spacing: Any) -> Any:
    """Second-order central differences along `axis`, first-order one-sided ones at the edges."""
    n = f.shape[axis]
    if n < 2:
        raise ValueError(f"gradient: shape {f.shape} is too small along axis {axis}; each needs at least 2 entries.")
    forward = subtract(_take_range(f, axis, 1, n), _take_range(f, axis, 0, n - 1))
    if spacing.ndim == 0:
        steps = spacing
        inner = divide(add(_take_range(forward, axis, 1, n - 1), _take_range(forward, axis, 0, n - 2)),
                       multiply(2, steps))
        first = divide(_take_range(forward, axis, 0, 1), steps)
        last = divide(_take_range(forward, axis, n - 2, n - 1), steps)
        return concatenate([first, inner, last], axis=axis)
    if spacing.shape != (n,):
        raise ValueError(f"gradient: spacing coordinates of shape {spacing.shape} do not match the {n} samples along "
                         f"axis {axis}; pass a 1-D array of length {n} or a scalar step.")
    h = moveaxis(reshape(subtract(spacing[1:], spacing[:-1]), (-1,) + (1,) * (f.ndim - 1)), 0, axis)
    h_before, h_after = _take_range(h, axis, 0, n - 2), _take_range(h, axis, 1, n - 1)
    f_before, f_mid, f_after = (_take_range(f, axis, 0, n - 2), _take_range(f, axis, 1, n - 1),
                                _take_range(f, axis, 2, n))
    total = multiply(h_before, h_after)
    inner = divide(add(subtract(multiply(multiply(h_before, h_before), f_after),
                                multiply(multiply(h_after, h_after), f_before)),
                       multiply(subtract(multiply(h_after, h_after), multiply(h_before, h_before)), f_mid)),
                   multiply(total, add(h_before, h_after)))
    first = divide(_take_range(forward, axis, 0, 1), _take_range(h, axis, 0, 1))
    last = divide(_take_range(forward, axis, n - 2, n - 1), _take_range(h, axis, n - 2, n - 1))
    return concatenate([first, inner, last], axis=axis)


def gradient(f: ArrayLike, *varargs: ArrayLike, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Any:
    """The gradient of sampled values `f` along `axis` (all when None); varargs give scalar steps or coordinates."""
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    (f,) = _promote_inexact(f)
    axes = _axes(tuple(range(f.ndim)) if axis is None else axis, f.ndim)
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"gradient: expected 0, 1 or {len(axes)} spacing arguments, got {len(varargs)}.")
    spacings = [_promote_inexact(s)[0] for s in spacings]
    results = [_gradient_along(f, ax, _cast(s, f.dtype) if s.ndim == 0 else s) for ax, s in zip(axes, spacings)]
    return results[0] if len(results) == 1 else results


__all__ = ["convolve", "correlate", "gradient", "poly", "polyadd", "polyder", "polydiv", "polyint", "polymul",
           "polysub", "trim_zeros", "unwrap", "vander"]
