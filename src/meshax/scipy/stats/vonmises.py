"""The von Mises distribution (as jax.scipy.stats.vonmises)."""
from meshax._src.scipy.stats_shape import vonmises_logpdf as logpdf, vonmises_pdf as pdf

__all__ = ["logpdf", "pdf"]
