"""The normal distribution (as jax.scipy.stats.norm)."""
from __future__ import annotations

from typing import Any

import numpy as np

from meshax import numpy as jnp
from meshax._src.core import dtypes
from meshax._src.numpy import _promote_inexact
from meshax._src.scipy.stats_common import log_ndtr, ndtr, normal_logpdf
from meshax.scipy import special

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _standard(x: Any, loc: Any, scale: Any) -> Any:
    x, loc, scale = _promote_inexact(x, loc, scale)
    return (x - loc) / scale


def _strong(x: Any) -> Any:
    """x without a weak type (as JAX's normal CDF functions return, even for Python scalars)."""
    return jnp.asarray(x, dtype=x.dtype)


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return normal_logpdf(*_promote_inexact(x, loc, scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return _strong(ndtr(_standard(x, loc, scale)))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return _strong(log_ndtr(_standard(x, loc, scale)))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return _strong(ndtr(-_standard(x, loc, scale)))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return _strong(log_ndtr(-_standard(x, loc, scale)))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function; q must be floating (integer q raise TypeError, as in JAX)."""
    dtype, _ = dtypes.result_type(q)
    if not np.issubdtype(dtype, np.inexact):
        raise TypeError(f"norm.ppf: q of dtype {dtype} is not supported; pass floating-point probabilities.")
    return jnp.asarray(special.ndtri(q) * scale + loc, dtypes.default_float_dtype())


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    q, loc, scale = _promote_inexact(q, loc, scale)
    return -ppf(q, -loc, scale)


def __getattr__(name: str):
    """Names of jax.scipy.stats.norm that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.scipy.stats.norm", name)
