"""Continuous distributions of jax.scipy.stats with shape parameters: beta, chi2, gamma, gennorm, t, vonmises and
wrapcauchy (each function named `<distribution>_<function>`), written with the incomplete gamma and beta
functions of meshax.lax."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import numpy as jnp
from ..lax import lax_ops as lax
from ..lax import special as lax_special
from .stats_common import LOG_2PI, betaln, const, lgamma, promote, xlog1py, xlogy

# beta


def beta_logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    one, y = const(x, 1), (x - loc) / scale
    value = -betaln(a, b) + (xlogy(a - one, y) + xlog1py(b - one, -y)) - jnp.log(scale)
    value = jnp.where((x > loc + scale) | (x < loc), -np.inf, value)
    return jnp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, value)


def beta_pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(beta_logpdf(x, a, b, loc, scale))


def _unit(x: Any, loc: Any, scale: Any) -> Any:
    """(x - loc) / scale clamped to [0, 1]."""
    return lax.clamp(const(x, 0), (x - loc) / scale, const(x, 1))


def beta_cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return lax_special.betainc(a, b, _unit(x, loc, scale))


def beta_logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(beta_cdf(x, a, b, loc, scale))


def beta_sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return lax_special.betainc(b, a, 1 - _unit(x, loc, scale))


def beta_logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(beta_sf(x, a, b, loc, scale))


# gamma and chi2 (a gamma distribution of shape df / 2 and twice the scale)


def gamma_logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, loc, scale = promote(x, a, loc, scale)
    one, inside = const(x, 1), x >= loc
    y = jnp.where(inside, (x - loc) / scale, one)
    value = xlogy(a - one, y) - y - (lgamma(a) + jnp.log(scale))
    return jnp.where(inside, value, -np.inf)


def gamma_pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(gamma_logpdf(x, a, loc, scale))


def _nonnegative(x: Any, loc: Any, scale: Any) -> Any:
    return lax.clamp(const(x, 0), (x - loc) / scale, const(x, np.inf))


def gamma_cdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, loc, scale = promote(x, a, loc, scale)
    return lax_special.igamma(a, _nonnegative(x, loc, scale))


def gamma_logcdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(gamma_cdf(x, a, loc, scale))


def gamma_sf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, loc, scale = promote(x, a, loc, scale)
    y = (x - loc) / scale
    return jnp.where(y < 0, 1, lax_special.igammac(a, y))


def gamma_logsf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(gamma_sf(x, a, loc, scale))


def chi2_logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = promote(x, df, loc, scale)
    one, two = const(x, 1), const(x, 2)
    y = (x - loc) / scale
    half = df / two
    kernel = xlogy(half - one, y) - y / two
    normalizer = -(lgamma(half) + jnp.log(two) * df / two)
    return jnp.where(x < loc, -np.inf, normalizer - jnp.log(scale) + kernel)


def chi2_pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(chi2_logpdf(x, df, loc, scale))


def chi2_cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = promote(x, df, loc, scale)
    two = const(scale, 2)
    return lax_special.igamma(df / two, _nonnegative(x, loc, scale * two))


def chi2_logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(chi2_cdf(x, df, loc, scale))


def chi2_sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = promote(x, df, loc, scale)
    two = const(scale, 2)
    return lax_special.igammac(df / two, _nonnegative(x, loc, scale * two))


def chi2_logsf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(chi2_sf(x, df, loc, scale))


# gennorm (the generalized normal distribution, exp(-|x|^beta))


def gennorm_logpdf(x: Any, beta: Any) -> Any:
    x, beta = promote(x, beta)
    return jnp.log(0.5 * beta) - lgamma(1 / beta) - jnp.abs(x) ** beta


def gennorm_pdf(x: Any, beta: Any) -> Any:
    return jnp.exp(gennorm_logpdf(x, beta))


def gennorm_cdf(x: Any, beta: Any) -> Any:
    x, beta = promote(x, beta)
    return 0.5 * (1 + jnp.sign(x) * lax_special.igamma(1 / beta, jnp.abs(x) ** beta))


# t (Student's t)


def t_logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = promote(x, df, loc, scale)
    two = const(x, 2)
    z = (x - loc) / scale
    half = df / two
    half_plus = half + const(x, 0.5)
    normalizer = lgamma(half) + jnp.log(scale * scale * const(x, math.pi) * df) / two - lgamma(half_plus)
    return -(normalizer + half_plus * jnp.log1p(z * z / df))


def t_pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(t_logpdf(x, df, loc, scale))


# vonmises and wrapcauchy (distributions on the circle)


def vonmises_logpdf(x: Any, kappa: Any) -> Any:
    x, kappa = promote(x, kappa)
    value = kappa * (jnp.cos(x) - jnp.sign(kappa)) - LOG_2PI - jnp.log(lax_special.bessel_i0e(kappa))
    return jnp.where(kappa >= 0, value, np.nan)


def vonmises_pdf(x: Any, kappa: Any) -> Any:
    return jnp.exp(vonmises_logpdf(x, kappa))


def wrapcauchy_logpdf(x: Any, c: Any) -> Any:
    x, c = promote(x, c)
    value = jnp.log(1 - c * c) - LOG_2PI - jnp.log(1 + c * c - 2 * c * jnp.cos(x))
    on_circle = jnp.where((x >= 0) & (x <= 2 * math.pi), value, -np.inf)
    return jnp.where((c > 0) & (c < 1), on_circle, np.nan)


def wrapcauchy_pdf(x: Any, c: Any) -> Any:
    return jnp.exp(wrapcauchy_logpdf(x, c))
