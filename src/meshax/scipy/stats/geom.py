"""The geometric distribution (as jax.scipy.stats.geom)."""
from meshax._src.scipy.stats_discrete import geom_logpmf as logpmf, geom_pmf as pmf

__all__ = ["logpmf", "pmf"]
