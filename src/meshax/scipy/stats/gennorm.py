"""The generalized normal distribution (as jax.scipy.stats.gennorm)."""
from meshax._src.scipy.stats_shape import gennorm_cdf as cdf, gennorm_logpdf as logpdf, gennorm_pdf as pdf

__all__ = ["cdf", "logpdf", "pdf"]
