"""Statistical distributions (as jax.scipy.stats)."""
from meshax.scipy.stats import logistic, multivariate_normal, norm

__all__ = ["logistic", "multivariate_normal", "norm"]
