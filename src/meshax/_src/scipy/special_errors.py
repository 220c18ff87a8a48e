"""Error-function relatives of jax.scipy.special: erfcinv, erfcx, dawsn, wofz (the Faddeeva function) and the
Fresnel integrals, as primitives over SciPy's kernels with their derivatives."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import numpy as jnp
from ..core.core import aval_of
from ..core.dtypes import issubdtype
from ..interpreters.ad import defjvp
from .special_kernels import const, inexact, kernel, scipy_kernel

__all__ = ["dawsn", "erfcinv", "erfcx", "fresnel", "wofz"]

_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _erfcx_slope(x: np.ndarray) -> np.ndarray:
    """d/dx erfcx(x) = 2 x erfcx(x) - 2/sqrt(pi), from its asymptotic series where that difference cancels."""
    import scipy.special

    direct = 2 * x * scipy.special.erfcx(x) - _TWO_OVER_SQRT_PI
    if np.iscomplexobj(x):
        return direct
    large = x > 1e4
    safe = np.where(large, x, 1.0)
    tail = -1 / (math.sqrt(math.pi) * safe * safe) * (1 - 1.5 / (safe * safe))
    return np.where(large, tail, direct)


def _wofz(z: np.ndarray) -> np.ndarray:
    """The Faddeeva function, NaN (in both parts) at non-finite z as JAX computes it."""
    import scipy.special

    return np.where(np.isfinite(z), scipy.special.wofz(z), complex(np.nan, np.nan))


def _fresnel(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import scipy.special

    return scipy.special.fresnel(x)


_erfcinv_p = scipy_kernel("erfcinv")
_erfcx_p = scipy_kernel("erfcx")
_erfcx_slope_p = kernel("erfcx_slope", _erfcx_slope)
_dawsn_p = scipy_kernel("dawsn")
_wofz_p = kernel("wofz", _wofz, complex_result=True)
_fresnel_s_p = kernel("fresnel_s", lambda x: _fresnel(x)[0])
_fresnel_c_p = kernel("fresnel_c", lambda x: _fresnel(x)[1])

defjvp(_erfcinv_p, lambda g, ans, y: g * (const(-math.sqrt(math.pi) / 2, y) * jnp.exp(ans * ans)))
defjvp(_erfcx_p, lambda g, ans, x: g * _erfcx_slope_p.bind(x))
defjvp(_erfcx_slope_p, lambda g, ans, x: g * (2 * _erfcx_p.bind(x) + 2 * x * ans))
defjvp(_dawsn_p, lambda g, ans, x: g * (1 - 2 * x * ans))
defjvp(_wofz_p, lambda g, ans, z: g * (-2 * z * ans + const(_TWO_OVER_SQRT_PI * 1j, ans)))
defjvp(_fresnel_s_p, lambda g, ans, x: g * jnp.sin(const(math.pi / 2, x) * x * x))
defjvp(_fresnel_c_p, lambda g, ans, x: g * jnp.cos(const(math.pi / 2, x) * x * x))


def erfcinv(y: Any) -> Any:
    """The inverse of erfc: x with erfc(x) = y, for y in [0, 2] (NaN outside)."""
    (y,) = inexact("erfcinv", y)
    return _erfcinv_p.bind(y)


def erfcx(x: Any) -> Any:
    """The scaled complementary error function exp(x**2) erfc(x)."""
    (x,) = inexact("erfcx", x, real=False)
    return _erfcx_p.bind(x)


def dawsn(x: Any) -> Any:
    """Dawson's integral exp(-x**2) times the integral of exp(t**2) from 0 to x."""
    (x,) = inexact("dawsn", x)
    return _dawsn_p.bind(x)


def wofz(z: Any) -> Any:
    """The Faddeeva function exp(-z**2) erfc(-i z), complex for real and complex z alike."""
    (z,) = inexact("wofz", z, real=False)
    return _wofz_p.bind(z)


def fresnel(x: Any) -> tuple[Any, Any]:
    """The Fresnel integrals (S(x), C(x)) of sin and cos of pi t**2 / 2 from 0 to x."""
    (x,) = inexact("fresnel", x, real=False)
    if issubdtype(aval_of(x).dtype, np.complexfloating):
        raise NotImplementedError(f"fresnel of complex values (dtype {aval_of(x).dtype}) is not implemented, as in "
                                  f"JAX; pass real values.")
    return _fresnel_s_p.bind(x), _fresnel_c_p.bind(x)
