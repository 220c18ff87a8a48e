"""Pseudo-random numbers (as jax.random): JAX's default threefry-2x32 PRNG with raw uint32[2] keys."""
from meshax._src import methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.random import (  # noqa: F401
    PRNGKey,
    bernoulli,
    bits,
    choice,
    clone,
    fold_in,
    gumbel,
    key,
    key_data,
    normal,
    permutation,
    randint,
    random_bits,
    split,
    threefry2x32,
    truncated_normal,
    uniform,
    wrap_key_data,
)

__all__ = [
    "PRNGKey", "bernoulli", "bits", "choice", "clone", "fold_in", "gumbel", "key", "key_data", "normal", "permutation",
    "randint", "random_bits", "split", "threefry2x32", "truncated_normal", "uniform",
    "wrap_key_data",
]


def __getattr__(name: str):
    """Names of jax.random that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.missing import missing_attribute

    missing_attribute("jax.random", name)
