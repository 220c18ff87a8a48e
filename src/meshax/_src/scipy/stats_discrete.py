"""Discrete distributions of jax.scipy.stats: bernoulli, betabinom, binom, geom, nbinom and poisson (each function
named `<distribution>_<function>`)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import numpy as jnp
from ..lax import special as lax_special
from .stats_common import betaln, const, lgamma, promote, xlog1py, xlogy

# bernoulli


def bernoulli_logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    k, p, loc = promote(k, p, loc)
    x = k - loc
    value = xlogy(x, p) + xlog1py(const(k, 1) - x, -p)
    return jnp.where((x < 0) | (x > 1), -np.inf, value)


def bernoulli_pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(bernoulli_logpmf(k, p, loc))


def _bad_probability(p: Any) -> Any:
    return jnp.isnan(p) | (p < 0) | (p > 1)


def bernoulli_cdf(k: Any, p: Any) -> Any:
    k, p = promote(k, p)
    conditions = [jnp.isnan(k) | _bad_probability(p), k < 0, (k >= 0) & (k < 1), k >= 1]
    zero, one = const(k, 0), const(k, 1)
    return jnp.select(conditions, [np.nan, zero, one - p, one])


def bernoulli_ppf(q: Any, p: Any) -> Any:
    q, p = promote(q, p)
    zero, one = const(q, 0), const(q, 1)
    return jnp.where(jnp.isnan(q) | _bad_probability(p) | (q < 0) | (q > 1), np.nan,
                     jnp.where(q <= one - p, zero, one))


# binom, betabinom


def binom_logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    k, n, p, loc = promote(k, n, p, loc)
    y = k - loc
    combinations = lgamma(n + 1) - (lgamma(y + 1) + lgamma(n - y + 1))
    linear = xlogy(y, p) + xlog1py(n - y, -p)
    value = jnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, combinations + linear)
    return jnp.where((k >= loc) & (k < loc + n + 1), value, -np.inf)


def binom_pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(binom_logpmf(k, n, p, loc))


def betabinom_logpmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    k, n, a, b, loc = promote(k, n, a, b, loc)
    y = jnp.floor(k) - loc
    one = const(y, 1)
    log_combinations = -(jnp.log1p(n) + betaln(n - y + one, y + one))
    value = log_combinations + (betaln(y + a, n - y + b) - betaln(a, b))
    value = jnp.where((y == 0) & (n == 0), 0.0, value)
    value = jnp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, value)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, value)


def betabinom_pmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    return jnp.exp(betabinom_logpmf(k, n, a, b, loc))


# geom, nbinom


def geom_logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    k, p, loc = promote(k, p, loc)
    x = k - loc
    return jnp.where(x <= 0, -np.inf, xlog1py(x - const(k, 1), -p) + jnp.log(p))


def geom_pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(geom_logpmf(k, p, loc))


def nbinom_logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    k, n, p, loc = promote(k, n, p, loc)
    one, y = const(k, 1), k - loc
    combinations = lgamma(y + n) - lgamma(n) - lgamma(y + one)
    return jnp.where(k < loc, -np.inf, combinations + (xlogy(n, p) + xlogy(y, one - p)))


def nbinom_pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(nbinom_logpmf(k, n, p, loc))


# poisson


def poisson_logpmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    k, mu, loc = promote(k, mu, loc)
    x = k - loc
    value = xlogy(x, mu) - lgamma(x + 1) - mu
    return jnp.where((x < 0) | (jnp.round(x) != x), -np.inf, value)


def poisson_pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    return jnp.exp(poisson_logpmf(k, mu, loc))


def poisson_cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    k, mu, loc = promote(k, mu, loc)
    x = k - loc
    return jnp.where(x < 0, const(k, 0), lax_special.igammac(jnp.floor(1 + x), mu))


def _summed_entropy(mu: Any, terms: int, upper: Any) -> Any:
    """-sum p log p over k < min(terms, upper(mu)) for each mu of a flat vector."""
    k = jnp.arange(terms, dtype=mu.dtype)[:, None]
    log_p = poisson_logpmf(k, mu)
    keep = k < jnp.ceil(upper).astype(mu.dtype)[None, :]
    return jnp.sum(jnp.where(keep, -jnp.exp(log_p) * log_p, 0.0), axis=0)


def poisson_entropy(mu: Any, loc: Any = 0) -> Any:
    """The entropy: summed directly below mu = 100 (over more terms from mu = 10), Stirling's series above."""
    mu, loc = promote(mu, loc)
    shape = jnp.broadcast_shapes(mu.shape, loc.shape)
    flat = jnp.ravel(mu)
    small = jnp.where((flat == 0) | (flat >= 10), 1, flat)
    medium = jnp.where((flat < 10) | (flat >= 100), 10, flat)
    large = jnp.where(flat < 100, 100, flat)
    large_value = 0.5 * jnp.log(2 * math.pi * math.e * large) - 1.0 / (12 * large)
    value = jnp.where(flat == 0, jnp.zeros_like(flat),
                      jnp.where(flat < 10, _summed_entropy(small, 35, small + 20),
                                jnp.where(flat < 100, _summed_entropy(medium, 250, medium + 10 * jnp.sqrt(medium) + 20),
                                          large_value)))
    return jnp.broadcast_to(jnp.reshape(value, mu.shape), shape)
