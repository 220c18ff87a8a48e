"""The truncated normal distribution (as jax.scipy.stats.truncnorm)."""
from meshax._src.scipy.stats_truncnorm import (
    truncnorm_cdf as cdf,
    truncnorm_logcdf as logcdf,
    truncnorm_logpdf as logpdf,
    truncnorm_logsf as logsf,
    truncnorm_pdf as pdf,
    truncnorm_sf as sf,
)

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
