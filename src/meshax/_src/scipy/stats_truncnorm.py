"""The truncated normal distribution (jax.scipy.stats.truncnorm): a standard normal cut to [a, b] (in standard
units), then shifted by loc and scaled by scale. Masses are computed in log space, from the nearer tail."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import numpy as jnp
from ..nn.functions import logsumexp
from .stats_common import log_ndtr, ndtr, normal_logpdf, promote


def _log_difference(x: Any, y: Any) -> Any:
    """log(exp(x) - exp(y)), NaN where y > x."""
    return logsumexp(jnp.stack([x, y]), b=jnp.stack([jnp.ones_like(x), -jnp.ones_like(y)]), axis=0)


def _log_mass(a: Any, b: Any) -> Any:
    """log(ndtr(b) - ndtr(a)): from the lower tail, the upper one (mirrored) or the middle, whichever is accurate."""
    a, b = jnp.broadcast_arrays(a, b)
    left, right = b <= 0, a > 0
    tail = _log_difference(log_ndtr(jnp.where(right, -a, b)), log_ndtr(jnp.where(right, -b, a)))
    central = jnp.log1p(-ndtr(a) - ndtr(-b))
    return jnp.where(~(left | right), central, tail)


def truncnorm_logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    z = (x - loc) / scale
    value = normal_logpdf(x, loc, scale) - _log_mass(a, b)
    value = jnp.where((z < a) | (z > b), -np.inf, value)
    return jnp.where(a < b, value, np.nan)


def truncnorm_pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(truncnorm_logpdf(x, a, b, loc, scale))


def truncnorm_logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    x, a, b = jnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    total = _log_mass(a, b)
    below = _log_mass(a, z) - total
    above = _log_mass(z, b) - total
    value = jnp.select([z >= b, z <= a, below > -0.1, z > a],
                       [0, -np.inf, jnp.log1p(-jnp.exp(above)), below],
                       np.nan)
    return jnp.where(a < b, value, np.nan)


def truncnorm_cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(truncnorm_logcdf(x, a, b, loc, scale))


def truncnorm_logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return truncnorm_logcdf(-x, -b, -a, -loc, scale)


def truncnorm_sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(truncnorm_logsf(x, a, b, loc, scale))
