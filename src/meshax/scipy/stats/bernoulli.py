"""The Bernoulli distribution (as jax.scipy.stats.bernoulli)."""
from meshax._src.scipy.stats_discrete import (
    bernoulli_cdf as cdf,
    bernoulli_logpmf as logpmf,
    bernoulli_pmf as pmf,
    bernoulli_ppf as ppf,
)

__all__ = ["cdf", "logpmf", "pmf", "ppf"]
