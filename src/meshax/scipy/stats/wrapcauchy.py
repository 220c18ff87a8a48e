"""The wrapped Cauchy distribution (as jax.scipy.stats.wrapcauchy)."""
from meshax._src.scipy.stats_shape import wrapcauchy_logpdf as logpdf, wrapcauchy_pdf as pdf

__all__ = ["logpdf", "pdf"]
