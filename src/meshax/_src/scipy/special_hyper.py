"""Hypergeometric functions 1F1 and 2F1 and Owen's T of jax.scipy.special.

JAX sums the hypergeometric series in the operands' precision (at most 250 terms, stopping once a term is below
machine epsilon relative to the sum), so its values differ from SciPy's where the series converges slowly or
not at all (2F1 for x < -1, 1F1 for large negative x): the kernels here sum the same series the same way, in the
operands' dtype, and use SciPy only where JAX's algorithm is exact to rounding (2F1 near x = 1, and its
polynomial case)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..lax import lax_ops as lax
from .. import numpy as jnp
from ..interpreters.ad import defjvp
from .special_kernels import const, inexact, kernel, scipy_kernel

__all__ = ["hyp1f1", "hyp2f1", "owens_t"]

_MAX_TERMS = 250


def _gamma(x: np.ndarray) -> np.ndarray:
    import scipy.special

    return scipy.special.gamma(x.astype(np.float64)).astype(x.dtype)


def _digamma(x: np.ndarray) -> np.ndarray:
    import scipy.special

    return scipy.special.psi(x.astype(np.float64)).astype(x.dtype)


def _sum_series(total: np.ndarray, term: np.ndarray, weight: Any, ratio: Any, relative: bool) -> np.ndarray:
    """`total` plus weight(k) * term_k for k = 1, 2, ..., with term_(k+1) = term_k * ratio(k), elementwise until
    the next term is below epsilon relative to the sum (as a ratio |term|/|sum| when `relative`, which never stops
    on a zero sum) or 250 terms."""
    eps = np.finfo(total.dtype).eps
    for k in range(1, _MAX_TERMS):
        kk = np.asarray(k, total.dtype)
        active = np.abs(term) / np.abs(total) > eps if relative else np.abs(term) > eps * np.abs(total)
        if not active.any():
            break
        total = np.where(active, total + weight(kk) * term, total)
        term = np.where(active, term * ratio(kk), term)
    return total


def _one(like: np.ndarray) -> np.ndarray:
    return np.ones_like(like)


def _hyp1f1(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """1F1(a; b; x): the power series for |x| < 100, the large-|x| asymptotic series beyond."""
    series = _sum_series(_one(x), a / b * x, lambda k: 1, lambda k: (a + k) / (b + k) * x / (k + 1), True)
    tail = _sum_series(_one(x), (b - a) * (1 - a) / x, lambda k: 1, lambda k: (b - a + k) * (1 - a + k) / (k + 1) / x,
                       True)
    asymptotic = _gamma(b) / _gamma(a) * np.exp(x) * x ** (a - b) * tail
    value = np.where(np.abs(x) < 100, series, asymptotic)
    special = np.where(a == 0, 1, np.where((a == b) & (a != 0), 2, np.where((b == 0) & (a != 0), 3, 0)))
    return np.choose(special, [value, _one(x), np.exp(x), np.full_like(x, np.inf)])


def _hyp1f1_da(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    base = _digamma(a)
    return _sum_series(np.zeros_like(x), a / b * x, lambda k: _digamma(a + k) - base,
                       lambda k: (a + k) / (b + k) * x / (k + 1), True)


def _hyp1f1_db(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    base = _digamma(b)
    return _sum_series(np.zeros_like(x), a / b * x, lambda k: base - _digamma(b + k),
                       lambda k: (a + k) / (b + k) * x / (k + 1), True)


def _near_integer(v: np.ndarray) -> np.ndarray:
    return np.abs(v - np.round(v)) < np.finfo(v.dtype).eps * 50


def _hyp2f1_polynomial(a: np.ndarray, b: np.ndarray, c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """2F1 where a or b is a non-positive integer: the terminating series summed in the operands' precision, as
    JAX sums it (over |a| terms, a and b swapped first when b is the integer below a)."""
    swap = (b < a) & _near_integer(b) & ~((c % 1 == 0) & (c <= 0) & (c > b))
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    a = np.abs(a)
    total, term = _one(x), _one(x)
    finite = np.isfinite(a)
    stop = int(min(np.max(a[finite], initial=0) + 1, 1e5))
    for i in range(1, stop + 1):
        k = np.asarray(i, x.dtype)
        active = k < a + 1
        if not active.any():
            break
        term = np.where(active, term * (-(a - k + 1) / (c + k - 1) * (b + k - 1) / k * x), term)
        total = np.where(active, total + term, total)
    return total


def _hyp2f1_series_or_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """2F1 by its power series, by the terminating series where a or b is a non-positive integer, or by SciPy where
    x > 0.9 and c - a - b is an integer (NaN from x = 1 on, where JAX's transformation takes log(1 - x))."""
    import scipy.special

    series = _sum_series(np.zeros_like(x), _one(x), lambda k: 1,
                         lambda k: (a + k - 1) * (b + k - 1) / (c + k - 1) / k * x, False)
    polynomial = ((a <= 0) & _near_integer(a)) | ((b <= 0) & _near_integer(b))
    transformed = ~polynomial & (x > 0.9) & _near_integer(c - a - b)
    out = series
    if transformed.any():
        wide = [v.astype(np.float64) for v in (a, b, c, x)]
        exact = np.where(x < 1, scipy.special.hyp2f1(*wide), np.nan).astype(x.dtype)
        out = np.where(transformed, exact, out)
    if polynomial.any():
        out = np.where(polynomial, _hyp2f1_polynomial(*(np.where(polynomial, v, 0) for v in (a, b, c)), x), out)
    return out


def _hyp2f1(a: np.ndarray, b: np.ndarray, c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """2F1(a, b; c; x) for x <= 1 (infinite beyond, and at poles in c), choosing among the classical identities
    as JAX does."""
    d, s = c - a - b, 1 - x
    one = (x == 0) | (((a == 0) | (b == 0)) & (c != 0))
    pole = (c == 0) | ((c < 0) & (c % 1 == 0))
    euler = (d <= -1) & ~((np.abs(d - np.round(d)) >= np.finfo(x.dtype).eps * 50) & (s < 0))
    cases = [one, pole, euler, (d <= 0) & (x == 1), (x < 1) & (b == c), (x < 1) & (a == c), x > 1, x == 1]
    values = [lambda: _one(x), lambda: np.full_like(x, np.inf),
              lambda: s ** d * _hyp2f1_series_or_exact(c - a, c - b, c, x), lambda: np.full_like(x, np.inf),
              lambda: s ** -a, lambda: s ** -b, lambda: np.full_like(x, np.inf),
              lambda: _gamma(c) * _gamma(d) / (_gamma(c - a) * _gamma(c - b))]
    out = _hyp2f1_series_or_exact(a, b, c, x)
    decided = np.zeros(x.shape, bool)
    for case, value in zip(cases, values):
        chosen = case & ~decided
        if chosen.any():
            out = np.where(chosen, value(), out)
        decided |= case
    return out


def _hyp2f1_slope(which: str) -> Any:
    """The series for the derivative of 2F1 with respect to a, b or c."""

    def function(a: np.ndarray, b: np.ndarray, c: np.ndarray, x: np.ndarray) -> np.ndarray:
        base = {"a": a, "b": b, "c": c}[which]
        start, sign = _digamma(base), (-1 if which == "c" else 1)
        return _sum_series(np.zeros_like(x), a * b / c * x, lambda k: sign * (_digamma(base + k) - start),
                           lambda k: (a + k) * (b + k) / (c + k) / (k + 1) * x, True)

    return function


_hyp1f1_p = kernel("hyp1f1", _hyp1f1, widen=False)
_hyp1f1_da_p = kernel("hyp1f1_da", _hyp1f1_da, widen=False)
_hyp1f1_db_p = kernel("hyp1f1_db", _hyp1f1_db, widen=False)
_hyp2f1_p = kernel("hyp2f1", _hyp2f1, widen=False)
_hyp2f1_dabc = [kernel(f"hyp2f1_d{w}", _hyp2f1_slope(w), widen=False) for w in "abc"]
_owens_t_p = scipy_kernel("owens_t")

defjvp(_hyp1f1_p, lambda g, ans, a, b, x: g * _hyp1f1_da_p.bind(a, b, x),
       lambda g, ans, a, b, x: g * _hyp1f1_db_p.bind(a, b, x),
       lambda g, ans, a, b, x: g * (a / b * _hyp1f1_p.bind(a + 1, b + 1, x)))
defjvp(_hyp2f1_p, *[lambda g, ans, a, b, c, x, p=p: g * p.bind(a, b, c, x) for p in _hyp2f1_dabc],
       lambda g, ans, a, b, c, x: g * (a * b / c * _hyp2f1_p.bind(a + 1, b + 1, c + 1, x)))


def _owens_t_dh(g: Any, ans: Any, h: Any, a: Any) -> Any:
    normal = jnp.exp(-0.5 * h * h) / const(2 * math.sqrt(2 * math.pi), h)
    return g * (-normal * lax.erf(a * h / const(math.sqrt(2), h)))


def _owens_t_da(g: Any, ans: Any, h: Any, a: Any) -> Any:
    return g * (jnp.exp(-0.5 * (a * a + 1) * h * h) / (const(2 * math.pi, a) * (a * a + 1)))


defjvp(_owens_t_p, _owens_t_dh, _owens_t_da)


def hyp1f1(a: Any, b: Any, x: Any) -> Any:
    """Kummer's confluent hypergeometric function 1F1(a; b; x) of real arguments."""
    return _hyp1f1_p.bind(*inexact("hyp1f1", a, b, x))


def hyp2f1(a: Any, b: Any, c: Any, x: Any) -> Any:
    """The Gauss hypergeometric function 2F1(a, b; c; x) of real arguments (infinite for x > 1)."""
    return _hyp2f1_p.bind(*inexact("hyp2f1", a, b, c, x))


def owens_t(h: Any, a: Any) -> Any:
    """Owen's T function: the probability that X > h and 0 < Y < a X for independent standard normals."""
    return _owens_t_p.bind(*inexact("owens_t", h, a))
