"""The left-skewed Gumbel distribution (as jax.scipy.stats.gumbel_l)."""
from meshax._src.scipy.stats_location import (
    gumbel_l_cdf as cdf,
    gumbel_l_logcdf as logcdf,
    gumbel_l_logpdf as logpdf,
    gumbel_l_logsf as logsf,
    gumbel_l_pdf as pdf,
    gumbel_l_ppf as ppf,
    gumbel_l_sf as sf,
)

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
