"""meshax.random: JAX's default PRNG (threefry-2x32), bit for bit, with raw and typed keys.

Raw keys are ordinary meshax arrays of dtype uint32 whose last dimension has size 2 (what
`jax.random.PRNGKey` returns). `key(seed)` returns a typed key array (dtype key<fry>, see
meshax._src.arrays.key_arrays) overlaying the same data; `key_data` / `wrap_key_data` convert between the two, and
split, fold_in and clone return keys of the kind they are given.

The scheme is JAX's default with `jax_threefry_partitionable=True` (the default of the JAX 0.10
used as the test oracle):

* a seed s becomes the key [s >> 32, s & 0xFFFFFFFF] (the high word is 0 unless x64 is on);
* every random value at position i of a shape (i is the row-major flat index, a 64-bit
  counter split in two words) comes from the hash threefry2x32(key, [i >> 32, i & 0xFFFFFFFF]);
* split(key, shape)[i] is that hash itself (both output words), fold_in(key, d) is the
  hash of the counter [0, uint32(d)] (so fold_in(key, i) == split(key, n)[i]);
* 32 random bits are out0 ^ out1 (8 and 16 bits: its low bits; 64: out0 << 32 | out1).

The distributions follow JAX's observable algorithms: uniform sets the top mantissa bits of a float in
[1, 2) (computed here as an exact integer-times-power-of-two) and scales it with one fused multiply-add
for float32/float64, as XLA's CPU backend contracts it; normal is sqrt(2) * erfinv(u) with Giles'
single-precision erfinv, as XLA evaluates it; randint combines two draws of nbits bits.

Three elementwise primitives carry the work besides meshax.numpy: `threefry2x32` (4 uint32 operands
-> 2 uint32 results), `fma` and `erf_inv`; so everything runs eagerly on sharded keys, under jit and
inside shard_map (which evaluates the same primitives per device).

Extension: where JAX needs `jax.vmap` for a batch of keys, the key-level functions here
(split, fold_in, bits, uniform, normal, randint, bernoulli, truncated_normal, gumbel) also
accept a key array of shape (*batch, 2) and return `batch + shape` results equal to
`jax.vmap` of the JAX function (fold_in's data broadcasts against the batch); permutation and
choice need a single key.

This module is the facade: the primitives, keys and bits live in meshax._src.random.prng and the
distributions in meshax._src.random.distributions,
meshax._src.random.transformed_distributions and meshax._src.random.gamma; their public names (and the primitives) are re-exported here.
"""
from .prng import (  # noqa: F401
    PRNGKey,
    bits,
    clone,
    erf_inv,
    erf_inv_p,
    fma_p,
    fold_in,
    key,
    key_data,
    random_bits,
    split,
    threefry2x32,
    threefry2x32_p,
    wrap_key_data,
)
from .distributions import (  # noqa: F401
    bernoulli,
    choice,
    gumbel,
    normal,
    permutation,
    randint,
    truncated_normal,
    uniform,
)
from .gamma import (  # noqa: F401
    ball,
    beta,
    binomial,
    chisquare,
    dirichlet,
    f,
    gamma,
    generalized_normal,
    loggamma,
    multinomial,
    poisson,
    t,
)
from .transformed_distributions import (  # noqa: F401
    categorical,
    cauchy,
    double_sided_maxwell,
    exponential,
    geometric,
    key_dtype,
    key_impl,
    laplace,
    logistic,
    lognormal,
    maxwell,
    multivariate_normal,
    orthogonal,
    pareto,
    rademacher,
    rayleigh,
    triangular,
    wald,
    weibull_min,
)

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "random_bits", "uniform",
    "normal", "randint", "bernoulli", "permutation", "choice", "truncated_normal", "gumbel", "clone",
    "threefry2x32", "erf_inv",
    "ball", "beta", "binomial", "categorical", "cauchy", "chisquare", "dirichlet", "double_sided_maxwell",
    "exponential", "f", "gamma", "generalized_normal", "geometric", "key_dtype", "key_impl", "laplace",
    "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal", "orthogonal",
    "pareto", "poisson", "rademacher", "rayleigh", "t", "triangular", "wald", "weibull_min",
]
