"""The chi-squared distribution (as jax.scipy.stats.chi2)."""
from meshax._src.scipy.stats_shape import (
    chi2_cdf as cdf,
    chi2_logcdf as logcdf,
    chi2_logpdf as logpdf,
    chi2_logsf as logsf,
    chi2_pdf as pdf,
    chi2_sf as sf,
)

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]
