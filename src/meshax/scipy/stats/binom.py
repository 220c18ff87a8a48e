"""The binomial distribution (as jax.scipy.stats.binom)."""
from meshax._src.scipy.stats_discrete import binom_logpmf as logpmf, binom_pmf as pmf

__all__ = ["logpmf", "pmf"]
