"""The gamma distribution (as jax.scipy.stats.gamma)."""
from meshax._src.scipy.stats_shape import (
    gamma_cdf as cdf,
    gamma_logcdf as logcdf,
    gamma_logpdf as logpdf,
    gamma_logsf as logsf,
    gamma_pdf as pdf,
    gamma_sf as sf,
)

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
