"""The multinomial distribution (as jax.scipy.stats.multinomial)."""
from meshax._src.scipy.stats_simplex import multinomial_logpmf as logpmf, multinomial_pmf as pmf

__all__ = ["logpmf", "pmf"]
