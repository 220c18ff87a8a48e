"""The logistic distribution (as jax.scipy.stats.logistic)."""
from __future__ import annotations

from typing import Any

from meshax import lax
from meshax import numpy as jnp
from meshax._src.numpy import _promote_inexact

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def _standard(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    x, loc, scale = _promote_inexact(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = _standard(x, loc, scale)
    return -z - 2 * jnp.logaddexp(0, -z) - jnp.log(scale)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return lax.logistic(_standard(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return lax.logistic(-_standard(x, loc, scale)[0])


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = _promote_inexact(q, loc, scale)
    return jnp.log(q / (1 - q)) * scale + loc


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = _promote_inexact(q, loc, scale)
    return -jnp.log(q / (1 - q)) * scale + loc
