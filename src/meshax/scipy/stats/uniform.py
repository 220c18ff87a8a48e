"""The uniform distribution (as jax.scipy.stats.uniform)."""
from meshax._src.scipy.stats_location import (
    uniform_cdf as cdf,
    uniform_logpdf as logpdf,
    uniform_pdf as pdf,
    uniform_ppf as ppf,
)

__all__ = ["cdf", "logpdf", "pdf", "ppf"]
