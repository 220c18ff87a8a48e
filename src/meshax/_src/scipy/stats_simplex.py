"""Distributions over the simplex in jax.scipy.stats: dirichlet (proportions) and multinomial (counts)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import numpy as jnp
from .stats_common import const, lgamma, promote, xlogy


def _on_simplex(x: Any) -> Any:
    """Whether each column of x (components along axis 0) is positive and sums to 1 (to 1e-6)."""
    return jnp.all(x > 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1) < 1e-6)


def dirichlet_logpdf(x: Any, alpha: Any) -> Any:
    """log density of Dirichlet(alpha) at x, whose axis 0 holds the components (the last one may be left out)."""
    x, alpha = promote(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet: alpha must be one-dimensional; got alpha.shape={alpha.shape}.")
    if x.ndim == 0 or x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError(f"dirichlet: x must have as many entries along axis 0 as alpha, or one fewer; got "
                         f"x.shape={x.shape}, alpha.shape={alpha.shape}.")
    one = const(x, 1)
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, one - jnp.sum(x, axis=0, keepdims=True)], axis=0)
    normalizer = jnp.sum(lgamma(alpha)) - lgamma(jnp.sum(alpha))
    alpha = jnp.reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))
    value = jnp.sum(xlogy(alpha - one, x), axis=0) - normalizer
    return jnp.where(_on_simplex(x), value, -np.inf)


def dirichlet_pdf(x: Any, alpha: Any) -> Any:
    return jnp.exp(dirichlet_logpdf(x, alpha))


def _arraylike(name: str, *args: Any) -> None:
    for arg in args:
        if not (hasattr(arg, "dtype") or isinstance(arg, (bool, int, float, complex, np.generic))):
            raise TypeError(f"multinomial.{name} requires ndarray or scalar arguments, got {type(arg).__name__}; "
                            f"wrap it with jnp.asarray.")


def multinomial_logpmf(x: Any, n: Any, p: Any) -> Any:
    """log P(counts x | n trials, probabilities p), along the last axis; -inf where x does not sum to n."""
    _arraylike("logpmf", x, n, p)
    (p,) = promote(p)
    x, n = (jnp.asarray(v) for v in jnp._promote(x, n))
    if not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"multinomial: x and n must be of integer type; got x.dtype={x.dtype}, n.dtype={n.dtype}.")
    in_support = jnp.sum(x, axis=-1, dtype=x.dtype) == n
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    value = lgamma(n + 1) + jnp.sum(xlogy(x, p) - lgamma(x + 1), axis=-1)
    return jnp.where(in_support, value, -np.inf)


def multinomial_pmf(x: Any, n: Any, p: Any) -> Any:
    return jnp.exp(multinomial_logpmf(x, n, p))
