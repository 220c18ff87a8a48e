"""What the distributions of meshax.scipy.stats share: argument promotion and the few special functions they
are written with (x log y, the normal CDF and its log), built on meshax.numpy and meshax.lax."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import numpy as jnp
from ..lax import lax_ops as lax
from ..lax import special as lax_special
from ..transforms.custom_derivatives import custom_jvp

_SQRT_HALF = math.sqrt(0.5)
LOG_2PI = math.log(2 * math.pi)


def promote(*args: Any) -> list[Any]:
    """The arguments as arrays of one inexact dtype (integers become float32; Python scalars stay weak)."""
    return list(jnp._promote_inexact(*args))


def const(example: Any, value: float) -> Any:
    """`value` as a constant of example's dtype: weakly typed only when `example` is a weakly typed scalar (as
    JAX's distributions make their constants, which decides the weak type of their results)."""
    weak = bool(getattr(example, "weak_type", False)) and np.ndim(example) == 0
    return jnp.full_like(example, value, shape=()) if weak else jnp.asarray(value, dtype=example.dtype)


def standardize(x: Any, loc: Any, scale: Any) -> tuple[Any, Any, Any]:
    """(x, loc, scale) promoted, and z = (x - loc) / scale."""
    x, loc, scale = promote(x, loc, scale)
    return (x - loc) / scale, loc, scale


def normal_logpdf(x: Any, loc: Any, scale: Any) -> Any:
    """log N(x; loc, scale^2) of promoted arguments (through scale^2: a negative scale acts as its absolute value)."""
    variance = scale * scale
    return (jnp.log(const(x, 2 * math.pi) * variance) + (x - loc) * (x - loc) / variance) / const(x, -2)


def lgamma(x: Any) -> Any:
    return lax_special.lgamma(x)


def betaln(a: Any, b: Any) -> Any:
    return lgamma(a) + lgamma(b) - lgamma(a + b)


@custom_jvp
def xlogy(x: Any, y: Any) -> Any:
    """x * log(y), 0 where x is 0 (and y is not NaN)."""
    x, y = promote(x, y)
    return jnp.where((x == 0) & ~jnp.isnan(y), jnp.zeros_like(x * y), x * jnp.log(y))


@xlogy.defjvp
def _xlogy_jvp(primals: Any, tangents: Any) -> Any:
    x, y = primals
    x_dot, y_dot = tangents
    return xlogy(x, y), x_dot * jnp.log(y) + y_dot * jnp.where(x == 0, 0.0, x / y)


@custom_jvp
def xlog1py(x: Any, y: Any) -> Any:
    """x * log1p(y), 0 where x is 0 (and y is not NaN)."""
    x, y = promote(x, y)
    return jnp.where((x == 0) & ~jnp.isnan(y), jnp.zeros_like(x * y), x * jnp.log1p(y))


@xlog1py.defjvp
def _xlog1py_jvp(primals: Any, tangents: Any) -> Any:
    x, y = primals
    x_dot, y_dot = tangents
    return xlog1py(x, y), x_dot * jnp.log1p(y) + y_dot * jnp.where(x == 0, 0.0, x / (1 + y))


def log1mexp(x: Any) -> Any:
    """log(1 - exp(-x)) for x >= 0, accurate for small and large x."""
    return jnp.where(x > math.log(2), jnp.log1p(-jnp.exp(-x)), jnp.log(-jnp.expm1(-x)))


def ndtr(x: Any) -> Any:
    """The standard normal CDF."""
    z = x * _SQRT_HALF
    return jnp.where(jnp.abs(z) < _SQRT_HALF, 0.5 + 0.5 * lax.erf(z),
                     jnp.where(z > 0, 1 - 0.5 * lax_special.erfc(z), 0.5 * lax_special.erfc(-z)))


def log_ndtr(x: Any) -> Any:
    """log(ndtr(x)), accurate far into both tails (an asymptotic series below the lower cut)."""
    lower = -10.0 if np.dtype(x.dtype) == np.float64 else -5.0
    safe_low = jnp.minimum(x, lower)
    x2 = safe_low * safe_low
    series, term = jnp.ones_like(x), jnp.ones_like(x)
    for n in range(1, 4):
        term = term * -(2 * n - 1) / x2
        series = series + term
    tail = -0.5 * x2 - jnp.log(-safe_low) - 0.5 * LOG_2PI + jnp.log(series)
    middle = jnp.log(ndtr(jnp.maximum(x, lower)))
    return jnp.where(x > lower, jnp.where(x > 5, -ndtr(-x), middle), tail)
