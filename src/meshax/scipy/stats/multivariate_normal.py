"""The multivariate normal distribution (as jax.scipy.stats.multivariate_normal)."""
from __future__ import annotations

import math
from typing import Any

from meshax import numpy as jnp
from meshax._src.numpy import _promote_inexact
from meshax._src.lax.linalg import triangular_solve

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, mean: Any, cov: Any, allow_singular: None = None) -> Any:
    """log N(x; mean, cov) for a full covariance matrix (or a scalar / vector of variances)."""
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf is not supported (as in JAX).")
    x, mean, cov = _promote_inexact(x, mean, cov)
    if cov.ndim < 2:
        variance = jnp.broadcast_to(cov, x.shape[-1:])
        diff = x - mean
        n = x.shape[-1]
        return (-0.5 * jnp.sum(diff * diff / variance, axis=-1) - 0.5 * jnp.sum(jnp.log(variance))
                - 0.5 * n * math.log(2 * math.pi))
    n = cov.shape[-1]
    lower = jnp.linalg.cholesky(cov)
    diff = jnp.broadcast_to(x - mean, jnp.broadcast_shapes(x.shape, mean.shape))
    shape = diff.shape
    columns = jnp.reshape(diff, (-1, n)).T
    solved = triangular_solve(lower, columns, left_side=True, lower=True)
    quad = jnp.reshape(jnp.sum(solved * solved, axis=0), shape[:-1])
    log_det = jnp.sum(jnp.log(jnp.diagonal(lower, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * quad - log_det - 0.5 * n * math.log(2 * math.pi)


def pdf(x: Any, mean: Any, cov: Any) -> Any:
    return jnp.exp(logpdf(x, mean, cov))
