"""Exponential and trigonometric integrals of jax.scipy.special (exp1, expi, expn, sici) over SciPy's kernels, and
Spence's dilogarithm composed from meshax.numpy (Cephes' rational approximation), each differentiable as in JAX."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import numpy as jnp
from ..core.core import aval_of
from ..core.dtypes import finfo
from ..interpreters.ad import defjvp
from .special_kernels import const, inexact, kernel, scipy_kernel

__all__ = ["exp1", "expi", "expn", "sici", "spence"]


def _expn(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """E_n(x) with n truncated to an integer; NaN for negative n or x, infinite n, or NaN."""
    import scipy.special

    order = np.floor(n)
    invalid = (order < 0) | (x < 0) | np.isnan(order) | np.isnan(x) | np.isinf(order)
    return np.where(invalid, np.nan, scipy.special.expn(np.where(invalid, 1.0, order), np.where(invalid, 1.0, x)))


def _expn_slope(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d/dx E_n(x): -E_(n-1)(x) for n >= 1, -(x + 1) exp(-x) / x**2 for n = 0 (-inf at 0, 0 at inf)."""
    order = np.floor(n)
    at_zero = np.where(x == 0, -np.inf, np.where(x == np.inf, 0.0, -(x + 1) * np.exp(-x) / (x * x)))
    slope = np.where(order == 0, at_zero, -_expn(order - 1, x))
    return np.where((order < 0) | (x < 0) | np.isnan(order) | np.isnan(x) | np.isinf(order), np.nan, slope)


def _sici(part: int) -> Any:
    def function(x: np.ndarray) -> np.ndarray:
        import scipy.special

        return scipy.special.sici(x)[part]

    return function


_expn_p = kernel("expn", _expn)
_expn_slope_p = kernel("expn_slope", _expn_slope)
_expi_p = scipy_kernel("expi")
_si_p = kernel("sici_si", _sici(0))
_ci_p = kernel("sici_ci", _sici(1))

defjvp(_expn_p, None, lambda g, ans, n, x: g * _expn_slope_p.bind(n, x))


def _expn_curvature(g: Any, ans: Any, n: Any, x: Any) -> Any:
    """d/dx of d/dx E_n(x): -(d/dx E_(n-1)), and exp(-x) (x**2 + 2 x + 2) / x**3 for n = 0."""
    order_zero = jnp.exp(-x) * (x * x + 2 * x + 2) / (x * x * x)
    return g * jnp.where(jnp.floor(n) == 0, order_zero, -_expn_slope_p.bind(n - 1, x))


defjvp(_expn_slope_p, None, _expn_curvature)
defjvp(_expi_p, lambda g, ans, x: g * (jnp.exp(x) / x))
defjvp(_si_p, lambda g, ans, x: g * jnp.sinc(x / const(math.pi, x)))
defjvp(_ci_p, lambda g, ans, x: g * (jnp.cos(x) / x))


def expn(n: Any, x: Any) -> Any:
    """The generalized exponential integral E_n(x) (n truncated to an integer), differentiable in x."""
    n, x = inexact("expn", n, x)
    return _expn_p.bind(n, x)


def exp1(x: Any) -> Any:
    """The exponential integral E_1(x) (NaN for x < 0)."""
    (x,) = inexact("exp1", x)
    return _expn_p.bind(jnp.ones_like(x), x)


def expi(x: Any) -> Any:
    """The exponential integral Ei(x); in JAX's precision it overflows to inf where exp(x) does (NaN at +inf)."""
    (x,) = inexact("expi", x)
    overflow = const(math.log(float(finfo(aval_of(x).dtype).max)), x)
    value = _expi_p.bind(x)
    return jnp.where(x == np.inf, np.nan, jnp.where(x > overflow, np.inf, value))


def sici(x: Any) -> tuple[Any, Any]:
    """The sine and cosine integrals (Si(x), Ci(x)); Ci of negative x is Ci(|x|), as in JAX."""
    (x,) = inexact("sici", x)
    return _si_p.bind(x), _ci_p.bind(x)


# Cephes' rational approximation of the dilogarithm near w = 0 (numerator, then denominator, highest power first).
_SPENCE_P = (4.65128586073990045278e-5, 7.31589045238094711071e-3, 1.33847639578309018650e-1,
             8.79691311754530315341e-1, 2.71149851196553469920e0, 4.25697156008121755724e0,
             3.29771340985225106936e0, 1.00000000000000000126e0)
_SPENCE_Q = (6.90990488912553276999e-4, 2.54043763932544379113e-2, 2.82974860602568089943e-1,
             1.41172597751831069617e0, 3.63800533345137075418e0, 5.03278880143316990390e0,
             3.54771340985225096217e0, 9.99999999999999998740e-1)


def _horner(coefficients: tuple[float, ...], w: Any) -> Any:
    total = jnp.zeros_like(w)
    for c in coefficients:
        total = total * w + const(c, w)
    return total


def _spence_positive(x: Any) -> Any:
    """Spence's function for x > 0 (x != 1): reflected into [0.5, 1.5] and corrected by the log identities."""
    big = x > 2.0
    x = jnp.where(big, 1.0 / x, x)
    above = x > 1.5
    below = x < 0.5
    inverted = big | above
    w = jnp.where(above, 1.0 / x - 1.0, jnp.where(below, -x, x - 1.0))
    y = -w * _horner(_SPENCE_P, w) / _horner(_SPENCE_Q, w)
    y = jnp.where(below, const(math.pi ** 2 / 6, x) - jnp.log(x) * jnp.log(1.0 - x) - y, y)
    return jnp.where(inverted, -0.5 * jnp.log(x) ** 2 - y, y)


def spence(x: Any) -> Any:
    """Spence's function (the dilogarithm) of float32 or float64 x: NaN for x < 0, pi**2/6 at 0, 0 at 1."""
    x = jnp.asarray(x)
    dtype = aval_of(x).dtype
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"spence takes float32 or float64 values; got dtype {dtype}: cast x to a float.")
    # the special points take constants (zero derivative), the others the approximation (NaN derivative in
    # (1, 2], where the unused log(1 - x) branch is NaN, as in JAX)
    inside = ~((x <= 0) | (x == 1))
    value = _spence_positive(jnp.where(inside, x, const(0.5, x)))
    value = jnp.where(x == 0.0, const(math.pi ** 2 / 6, x), value)
    value = jnp.where(x == 1.0, const(0, x), value)
    return jnp.where(x < 0.0, const(np.nan, x), value)
