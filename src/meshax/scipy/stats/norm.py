"""The normal distribution (as jax.scipy.stats.norm)."""
from __future__ import annotations

import math
from typing import Any

from meshax import numpy as jnp
from meshax._src.numpy import _promote_inexact
from meshax.scipy import special

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _standard(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    x, loc, scale = _promote_inexact(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = _standard(x, loc, scale)
    return -0.5 * z * z - jnp.log(scale) - 0.5 * math.log(2 * math.pi)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.ndtr(_standard(x, loc, scale)[0])


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.log_ndtr(_standard(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.ndtr(-_standard(x, loc, scale)[0])


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.log_ndtr(-_standard(x, loc, scale)[0])


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = _promote_inexact(q, loc, scale)
    return special.ndtri(q) * scale + loc


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = _promote_inexact(q, loc, scale)
    return special.ndtri(1 - q) * scale + loc


def __getattr__(name: str):
    """Names of jax.scipy.stats.norm that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.scipy.stats.norm", name)
