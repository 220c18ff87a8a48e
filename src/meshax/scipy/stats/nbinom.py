"""The negative binomial distribution (as jax.scipy.stats.nbinom)."""
from meshax._src.scipy.stats_discrete import nbinom_logpmf as logpmf, nbinom_pmf as pmf

__all__ = ["logpmf", "pmf"]
