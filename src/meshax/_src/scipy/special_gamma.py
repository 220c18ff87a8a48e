"""Gamma-function relatives of jax.scipy.special: gammasgn, loggamma, beta, comb, bernoulli and the Box-Cox
transforms, composed from meshax.lax and meshax.numpy so they trace and differentiate as JAX's do."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..lax import lax_ops as lax
from ..lax.special import lgamma
from .. import numpy as jnp
from ..core.core import aval_of
from ..core.dtypes import issubdtype
from .special_kernels import inexact, scipy_kernel

__all__ = ["bernoulli", "beta", "boxcox", "boxcox1p", "comb", "gammasgn", "loggamma"]

_complex_loggamma_p = scipy_kernel("loggamma")


def gammasgn(x: Any) -> Any:
    """The sign of the gamma function: NaN at the poles (non-positive integers) and for NaN, -1 at -0."""
    (x,) = inexact("gammasgn", x)
    dtype = aval_of(x).dtype
    floor = lax.floor(x)
    negative = x < 0
    pole = (negative & (x == floor)) | jnp.isnan(x)
    minus = (negative & (floor % 2 != 0)) | ((x == 0) & jnp.signbit(x))
    return jnp.where(pole, np.array(np.nan, dtype), jnp.where(minus, np.array(-1, dtype), np.array(1, dtype)))


def loggamma(x: Any) -> Any:
    """The principal branch of log Gamma: for real x, lgamma where x > 0 and NaN elsewhere."""
    (x,) = inexact("loggamma", x, real=False)
    if issubdtype(aval_of(x).dtype, np.complexfloating):
        return _complex_loggamma_p.bind(x)
    return jnp.where(x > 0, lgamma(x), np.nan)


def beta(a: Any, b: Any) -> Any:
    """The beta function Gamma(a) Gamma(b) / Gamma(a + b), signed by the three gammas' signs."""
    a, b = inexact("beta", a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * lax.exp(lgamma(a) + lgamma(b) - lgamma(a + b))


def comb(N: Any, k: Any, *, repetition: bool = False) -> Any:
    """The number of ways to choose k of N things (with repetition when `repetition`), via log-gamma; 0 where
    k < 0, N < 0 or k > N."""
    N, k = inexact("comb", N, k)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), 1.0, comb(N + k - 1, k))
    valid = (k <= N) & (N >= 0) & (k >= 0)
    n_safe = jnp.where(valid, N, 0.0)
    k_safe = jnp.where(valid, k, 0.0)
    log_count = lgamma(n_safe + 1) - lgamma(k_safe + 1) - lgamma(n_safe + 1 - k_safe)
    return jnp.where(valid, lax.exp(log_count), 0.0)


def _box_cox(log_x: Any, lmbda: Any) -> Any:
    """(exp(lmbda log_x) - 1) / lmbda, and log_x where lmbda is 0."""
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


def boxcox(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform (x**lmbda - 1) / lmbda (log x when lmbda is 0)."""
    x, lmbda = inexact("boxcox", x, lmbda, real=False)
    return _box_cox(jnp.log(x), lmbda)


def boxcox1p(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform of 1 + x, accurate for small x."""
    x, lmbda = inexact("boxcox1p", x, lmbda, real=False)
    return _box_cox(jnp.log1p(x), lmbda)


def bernoulli(n: int) -> Any:
    """The Bernoulli numbers B_0 ... B_n (B_1 = -1/2) as a float32 array of length n + 1."""
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"bernoulli needs a non-negative integer n; got {n}.")
    import scipy.special

    return jnp.asarray(np.asarray(scipy.special.bernoulli(n)[: n + 1], np.float32))
