"""The Pareto distribution (as jax.scipy.stats.pareto)."""
from meshax._src.scipy.stats_location import (
    pareto_cdf as cdf,
    pareto_logcdf as logcdf,
    pareto_logpdf as logpdf,
    pareto_logsf as logsf,
    pareto_pdf as pdf,
    pareto_ppf as ppf,
    pareto_sf as sf,
)

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]
