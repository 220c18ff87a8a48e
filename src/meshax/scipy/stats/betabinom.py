"""The beta-binomial distribution (as jax.scipy.stats.betabinom)."""
from meshax._src.scipy.stats_discrete import betabinom_logpmf as logpmf, betabinom_pmf as pmf

__all__ = ["logpmf", "pmf"]
