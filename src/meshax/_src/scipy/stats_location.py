"""Location-scale distributions of jax.scipy.stats with closed forms: cauchy, expon, gumbel_l, gumbel_r, laplace,
pareto and uniform (each function named `<distribution>_<function>`)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import numpy as jnp
from .stats_common import const, log1mexp, promote, standardize

# cauchy


def cauchy_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return -(jnp.log(const(z, math.pi) * scale) + jnp.log1p(z * z))


def cauchy_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(cauchy_logpdf(x, loc, scale))


def cauchy_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, _ = standardize(x, loc, scale)
    return const(z, 0.5) + const(z, 1.0) / const(z, math.pi) * jnp.arctan(z)


def cauchy_logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cauchy_cdf(x, loc, scale))


def cauchy_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    return cauchy_cdf(-x, -loc, scale)


def cauchy_logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    return cauchy_logcdf(-x, -loc, scale)


def cauchy_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """loc + scale tan(pi (q - 1/2)), written as +-1 / tan(pi min(q, 1 - q)) for accuracy in the tails."""
    q, loc, scale = promote(q, loc, scale)
    one = const(q, 1)
    upper = q > 0.5
    angle = const(q, math.pi) * jnp.where(upper, one - q, jnp.abs(q))
    unscaled = jnp.where(q == 0.5, const(q, 0), jnp.where(upper, one, -one) / jnp.tan(angle))
    return jnp.where((q < 0) | (q > 1), np.nan, unscaled * scale + loc)


def cauchy_isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote(q, loc, scale)
    return -cauchy_ppf(q, -loc, scale)


# expon


def expon_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    return jnp.where(x < loc, -np.inf, -((x - loc) / scale + jnp.log(scale)))


def expon_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(expon_logpdf(x, loc, scale))


def expon_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), -jnp.expm1(neg_z))


def expon_logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    z = (x - loc) / scale
    below = x < loc
    return jnp.where(below, -np.inf, log1mexp(jnp.where(below, 1, z)))


def expon_logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    neg_z = (loc - x) / scale
    return jnp.where(x < loc, jnp.zeros_like(neg_z), neg_z)


def expon_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(expon_logsf(x, loc, scale))


def expon_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote(q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc - scale * jnp.log1p(-q))


# gumbel_r (the maximum extreme-value distribution) and gumbel_l (its mirror image)


def _positive_scale(value: Any, scale: Any) -> Any:
    return jnp.where(scale > 0, value, np.nan)


def gumbel_r_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return _positive_scale(-jnp.log(scale) - (z + jnp.exp(-z)), scale)


def gumbel_r_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(gumbel_r_logpdf(x, loc, scale))


def gumbel_r_logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return _positive_scale(-jnp.exp(-z), scale)


def gumbel_r_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(gumbel_r_logcdf(x, loc, scale))


def gumbel_r_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return _positive_scale(const(z, 1) - jnp.exp(-jnp.exp(-z)), scale)


def gumbel_r_logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return _positive_scale(log1mexp(jnp.exp(-z)), scale)


def gumbel_r_ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    p, loc, scale = promote(p, loc, scale)
    return jnp.where((p > 0) & (p < 1), loc - scale * jnp.log(-jnp.log(p)), np.nan)


def gumbel_l_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return _positive_scale(-jnp.log(scale) + (z - jnp.exp(z)), scale)


def gumbel_l_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(gumbel_l_logpdf(x, loc, scale))


def gumbel_l_logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return _positive_scale(jnp.log(-jnp.expm1(-jnp.exp(z))), scale)


def gumbel_l_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(gumbel_l_logcdf(x, loc, scale))


def gumbel_l_logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return _positive_scale(-jnp.exp(z), scale)


def gumbel_l_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(gumbel_l_logsf(x, loc, scale))


def gumbel_l_ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    p, loc, scale = promote(p, loc, scale)
    return jnp.where((p > 0) & (p < 1), loc + scale * jnp.log(-jnp.log1p(-p)), np.nan)


# laplace


def laplace_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    return -(jnp.abs(z) + jnp.log(const(z, 2) * scale))


def laplace_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(laplace_logpdf(x, loc, scale))


def laplace_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, _ = standardize(x, loc, scale)
    half_tail = const(z, 0.5) * jnp.exp(-jnp.abs(z))
    return jnp.where(z < 0, half_tail, const(z, 1) - half_tail)


# pareto


def pareto_logpdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = promote(x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 1, -np.inf, -(jnp.log(scale / b) + (b + const(x, 1)) * jnp.log(z)))


def pareto_pdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(pareto_logpdf(x, b, loc, scale))


def pareto_cdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = promote(x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 1, const(x, 0), const(x, 1) - jnp.power(z, -b))


def pareto_logcdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = promote(x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 1, -np.inf, jnp.log1p(-jnp.power(z, -b)))


def pareto_logsf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, b, loc, scale = promote(x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 1, const(x, 0), -(b * jnp.log(z)))


def pareto_sf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(pareto_logsf(x, b, loc, scale))


def pareto_ppf(q: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, b, loc, scale = promote(q, b, loc, scale)
    one = const(q, 1)
    value = loc + scale * jnp.power(one - q, -(one / b))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, value)


# uniform


def uniform_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, scale = standardize(x, loc, scale)
    inside = (z >= 0) & (z <= 1)
    return jnp.where((z < 0) | (z > 1), -np.inf, jnp.where(inside, -jnp.log(scale), np.nan))


def uniform_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(uniform_logpdf(x, loc, scale))


def uniform_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _, _ = standardize(x, loc, scale)
    return jnp.clip(z, 0, 1)


def uniform_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = promote(q, loc, scale)
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)
