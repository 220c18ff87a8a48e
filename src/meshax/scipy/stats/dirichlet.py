"""The Dirichlet distribution (as jax.scipy.stats.dirichlet)."""
from meshax._src.scipy.stats_simplex import dirichlet_logpdf as logpdf, dirichlet_pdf as pdf

__all__ = ["logpdf", "pdf"]
