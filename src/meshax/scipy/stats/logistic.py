"""The logistic distribution (as jax.scipy.stats.logistic)."""
from __future__ import annotations

from typing import Any

from meshax import lax
from meshax import numpy as jnp
from meshax._src.numpy import _promote_inexact
from meshax._src.scipy.stats_common import const

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]


def _standard(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    x, loc, scale = _promote_inexact(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = _standard(x, loc, scale)
    two = const(z, 2)
    return -two * jnp.logaddexp(z / two, -z / two) - jnp.log(scale)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return lax.logistic(_standard(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return lax.logistic(-_standard(x, loc, scale)[0])


def ppf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = _promote_inexact(x, loc, scale)
    return jnp.log(x / (const(x, 1) - x)) * scale + loc


def isf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = _promote_inexact(x, loc, scale)
    return -jnp.log(x / (const(x, 1) - x)) * scale + loc
