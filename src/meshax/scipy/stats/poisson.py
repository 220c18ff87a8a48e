"""The Poisson distribution (as jax.scipy.stats.poisson)."""
from meshax._src.scipy.stats_discrete import (
    poisson_cdf as cdf,
    poisson_entropy as entropy,
    poisson_logpmf as logpmf,
    poisson_pmf as pmf,
)

__all__ = ["cdf", "entropy", "logpmf", "pmf"]
