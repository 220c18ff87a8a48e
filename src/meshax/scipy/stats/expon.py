"""The exponential distribution (as jax.scipy.stats.expon)."""
from meshax._src.scipy.stats_location import (
    expon_cdf as cdf,
    expon_logcdf as logcdf,
    expon_logpdf as logpdf,
    expon_logsf as logsf,
    expon_pdf as pdf,
    expon_ppf as ppf,
    expon_sf as sf,
)

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
