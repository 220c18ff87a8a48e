"""Statistical distributions and summary statistics (as jax.scipy.stats)."""
from meshax._src.scipy.stats_kde import gaussian_kde
from meshax._src.scipy.stats_summary import mode, rankdata, sem
from meshax.scipy.stats import (
    bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm, geom, gumbel_l, gumbel_r,
    laplace, logistic, multinomial, multivariate_normal, nbinom, norm, pareto, poisson, t, truncnorm, uniform,
    vonmises, wrapcauchy,
)

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gaussian_kde",
           "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "mode", "multinomial",
           "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "rankdata", "sem", "t", "truncnorm",
           "uniform", "vonmises", "wrapcauchy"]


def __getattr__(name: str):
    """Names of jax.scipy.stats that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.scipy.stats", name)
