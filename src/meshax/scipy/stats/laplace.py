"""The Laplace distribution (as jax.scipy.stats.laplace)."""
from meshax._src.scipy.stats_location import laplace_cdf as cdf, laplace_logpdf as logpdf, laplace_pdf as pdf

__all__ = ["cdf", "logpdf", "pdf"]
