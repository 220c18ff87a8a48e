"""Special functions (as jax.scipy.special), built from meshax.lax and meshax.numpy, so they trace and
differentiate like any other operation."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from meshax import lax
from meshax import numpy as jnp
from meshax._src.numpy import _promote_inexact
from meshax._src.transforms.custom_derivatives import custom_jvp
from meshax._src.nn import functions as _nn
from meshax._src.nn.functions import logsumexp
from meshax._src.numpy.bessel import i0
from meshax._src.scipy.special_bessel import bessel_jn, sph_harm_y
from meshax._src.scipy.special_errors import dawsn, erfcinv, erfcx, fresnel, wofz
from meshax._src.scipy.special_expint import exp1, expi, expn, sici, spence
from meshax._src.scipy.special_gamma import bernoulli, beta, boxcox, boxcox1p, comb, gammasgn, loggamma
from meshax._src.scipy.special_hyper import hyp1f1, hyp2f1, owens_t

__all__ = ["bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn", "digamma",
           "entr", "erf", "erfc", "erfcinv", "erfcx", "erfinv", "exp1", "expi", "expit", "expn", "factorial",
           "fresnel", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "hyp1f1", "hyp2f1", "i0", "i0e", "i1",
           "i1e", "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln", "ndtr",
           "ndtri", "owens_t", "poch", "polygamma", "rel_entr", "sici", "softmax", "spence", "sph_harm_y", "wofz",
           "xlog1py", "xlogy", "zeta"]


def _float(*args: Any) -> list[Any]:
    return list(_promote_inexact(*args))


def erf(x: Any) -> Any:
    (x,) = _float(x)
    return lax.erf(x)


def erfc(x: Any) -> Any:
    (x,) = _float(x)
    return lax.erfc(x)


def erfinv(x: Any) -> Any:
    (x,) = _float(x)
    return lax.erf_inv(x)


def gammaln(x: Any) -> Any:
    (x,) = _float(x)
    return lax.lgamma(x)


def digamma(x: Any) -> Any:
    (x,) = _float(x)
    return lax.digamma(x)


def polygamma(n: Any, x: Any) -> Any:
    n, x = _float(n, x)
    return lax.polygamma(n, x)


def zeta(x: Any, q: Any = None) -> Any:
    if q is None:
        raise NotImplementedError("zeta(x) without q (Riemann zeta) is not implemented, as in JAX; pass q=1.")
    x, q = _float(x, q)
    return lax.zeta(x, q)


def gamma(x: Any) -> Any:
    """Gamma(x): the sign of Gamma times exp(gammaln(x))."""
    (x,) = _float(x)
    negative_odd = jnp.logical_and(x < 0, jnp.floor(x) % 2 != 0)
    sign = jnp.where(jnp.logical_and(x < 0, x == jnp.floor(x)), jnp.nan, jnp.where(negative_odd, -1.0, 1.0))
    return (sign * jnp.exp(lax.lgamma(x))).astype(x.dtype)


def betaln(a: Any, b: Any) -> Any:
    a, b = _float(a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def betainc(a: Any, b: Any, x: Any) -> Any:
    a, b, x = _float(a, b, x)
    return lax.betainc(a, b, x)


def gammainc(a: Any, x: Any) -> Any:
    a, x = _float(a, x)
    return lax.igamma(a, x)


def gammaincc(a: Any, x: Any) -> Any:
    a, x = _float(a, x)
    return lax.igammac(a, x)


def factorial(n: Any, exact: bool = False) -> Any:
    if exact:
        raise NotImplementedError("factorial with exact=True is not supported (as in JAX).")
    (n,) = _float(n)
    return jnp.where(n < 0, 0.0, jnp.exp(lax.lgamma(n + 1))).astype(n.dtype)


def poch(z: Any, m: Any) -> Any:
    """The rising factorial Gamma(z + m) / Gamma(z)."""
    z, m = _float(z, m)
    return jnp.where(m == 0, jnp.ones_like(z), gamma(z + m) / gamma(z))


def multigammaln(a: Any, d: Any) -> Any:
    """The log of the multivariate gamma function of dimension `d` (a concrete integer)."""
    d = int(d)
    (a,) = _float(a)
    terms = lax.lgamma(jnp.expand_dims(a, -1) - jnp.arange(d, dtype=a.dtype) / 2)
    return jnp.sum(terms, axis=-1) + d * (d - 1) / 4 * math.log(math.pi)


def i0e(x: Any) -> Any:
    (x,) = _float(x)
    return lax.bessel_i0e(x)


def i1e(x: Any) -> Any:
    (x,) = _float(x)
    return lax.bessel_i1e(x)


def i1(x: Any) -> Any:
    (x,) = _float(x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i1e(x)


@custom_jvp
def xlogy(x: Any, y: Any) -> Any:
    """x * log(y), 0 where x is 0 (whatever y)."""
    x, y = _float(x, y)
    return jnp.where(x == 0, jnp.zeros_like(x * y), x * jnp.log(y))


@xlogy.defjvp
def _xlogy_jvp(primals: Any, tangents: Any) -> Any:
    x, y = primals
    x_dot, y_dot = tangents
    out = xlogy(x, y)
    return out, x_dot * jnp.log(y) + y_dot * jnp.where(x == 0, 0.0, x / y)


@custom_jvp
def xlog1py(x: Any, y: Any) -> Any:
    """x * log1p(y), 0 where x is 0 (whatever y)."""
    x, y = _float(x, y)
    return jnp.where(x == 0, jnp.zeros_like(x * y), x * jnp.log1p(y))


@xlog1py.defjvp
def _xlog1py_jvp(primals: Any, tangents: Any) -> Any:
    x, y = primals
    x_dot, y_dot = tangents
    out = xlog1py(x, y)
    return out, x_dot * jnp.log1p(y) + y_dot * jnp.where(x == 0, 0.0, x / (1 + y))


def entr(x: Any) -> Any:
    """-x log(x) for x > 0, 0 at 0, -inf below."""
    (x,) = _float(x)
    return jnp.where(x < 0, -jnp.inf, -xlogy(x, x))


def rel_entr(p: Any, q: Any) -> Any:
    p, q = _float(p, q)
    both = jnp.logical_and(p > 0, q > 0)
    safe_q = jnp.where(both, q, 1.0)
    value = jnp.where(both, xlogy(p, p / safe_q), jnp.inf)
    return jnp.where(jnp.logical_and(p == 0, q >= 0), 0.0, value)


def kl_div(p: Any, q: Any) -> Any:
    p, q = _float(p, q)
    both = jnp.logical_and(p > 0, q > 0)
    safe_q = jnp.where(both, q, 1.0)
    value = jnp.where(both, xlogy(p, p / safe_q) - p + q, jnp.inf)
    return jnp.where(jnp.logical_and(p == 0, q >= 0), q, value)


def softmax(x: Any, /, *, axis: int | tuple[int, ...] | None = None) -> Any:
    """exp(x) normalized to sum to 1 over `axis` (all axes by default)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x: Any, /, *, axis: int | tuple[int, ...] | None = None) -> Any:
    """x - logsumexp(x) over `axis` (all axes by default)."""
    return _nn.log_softmax(x, axis=axis)


def expit(x: Any) -> Any:
    (x,) = _float(x)
    return lax.logistic(x)


def logit(x: Any) -> Any:
    (x,) = _float(x)
    return jnp.log(x / (1 - x))


_SQRT_HALF = math.sqrt(0.5)


def ndtr(x: Any) -> Any:
    """The standard normal CDF."""
    (x,) = _float(x)
    z = x * _SQRT_HALF
    return jnp.where(jnp.abs(z) < _SQRT_HALF, 0.5 + 0.5 * lax.erf(z),
                     jnp.where(z > 0, 1 - 0.5 * lax.erfc(z), 0.5 * lax.erfc(-z)))


def ndtri(p: Any) -> Any:
    """The inverse of the standard normal CDF."""
    (p,) = _float(p)
    return math.sqrt(2) * lax.erf_inv(2 * p - 1)


def log_ndtr(x: Any, series_order: int = 3) -> Any:
    """log(ndtr(x)), accurate far into both tails (an asymptotic series below x = -5)."""
    (x,) = _float(x)
    lower = -10.0 if np.dtype(x.dtype) == np.float64 else -5.0
    safe_low = jnp.minimum(x, lower)
    x2 = safe_low * safe_low
    series, term = jnp.ones_like(x), jnp.ones_like(x)
    for n in range(1, series_order + 1):
        term = term * -(2 * n - 1) / x2
        series = series + term
    tail = -0.5 * x2 - jnp.log(-safe_low) - 0.5 * math.log(2 * math.pi) + jnp.log(series)
    middle = jnp.log(ndtr(jnp.maximum(x, lower)))
    return jnp.where(x > lower, jnp.where(x > 5, -ndtr(-x), middle), tail)


def __getattr__(name: str):
    """Names of jax.scipy.special that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.scipy.special", name)
