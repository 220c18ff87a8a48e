"""Pseudo-random numbers (as jax.random): JAX's default threefry-2x32 PRNG with raw uint32[2] keys."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.random import (  # noqa: F401
    PRNGKey,
    ball,
    bernoulli,
    beta,
    binomial,
    bits,
    categorical,
    cauchy,
    chisquare,
    choice,
    clone,
    dirichlet,
    double_sided_maxwell,
    exponential,
    f,
    fold_in,
    gamma,
    generalized_normal,
    geometric,
    gumbel,
    key,
    key_data,
    key_dtype,
    key_impl,
    laplace,
    loggamma,
    logistic,
    lognormal,
    maxwell,
    multinomial,
    multivariate_normal,
    normal,
    orthogonal,
    pareto,
    permutation,
    poisson,
    rademacher,
    randint,
    random_bits,
    rayleigh,
    split,
    t,
    threefry2x32,
    triangular,
    truncated_normal,
    uniform,
    wald,
    weibull_min,
    wrap_key_data,
)
from meshax._src.compat.small_modules import Key, random_gamma_p

__all__ = [
    "Key", "PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare",
    "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential", "f", "fold_in", "gamma",
    "generalized_normal", "geometric", "gumbel", "key", "key_data", "key_dtype", "key_impl", "laplace",
    "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal", "normal",
    "orthogonal", "pareto", "permutation", "poisson", "rademacher", "randint", "random_bits", "rayleigh",
    "split", "t", "threefry2x32", "triangular", "truncated_normal", "uniform", "wald", "weibull_min",
    "wrap_key_data", "random_gamma_p",
]


def __getattr__(name: str):
    """Names of jax.random that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.random", name)
