"""Statistical distributions (as jax.scipy.stats)."""
from meshax.scipy.stats import logistic, multivariate_normal, norm

__all__ = ["logistic", "multivariate_normal", "norm"]


def __getattr__(name: str):
    """Names of jax.scipy.stats that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.scipy.stats", name)
