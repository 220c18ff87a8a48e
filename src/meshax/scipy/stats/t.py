"""The Student's t distribution (as jax.scipy.stats.t)."""
from meshax._src.scipy.stats_shape import t_logpdf as logpdf, t_pdf as pdf

__all__ = ["logpdf", "pdf"]
