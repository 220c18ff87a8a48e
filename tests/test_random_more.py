"""The jax.random distributions of meshax._src.random.transformed_distributions / random_gamma against real JAX.

Integer-valued samplers (geometric, rademacher, categorical, poisson) and binomial / multinomial must
agree exactly; the float transforms of uniform / normal draws to a few float32 ulps (XLA's log1p, exp, pow,
tan are not correctly rounded), and those with cancellation or a matrix factorisation (logistic, wald,
loggamma, dirichlet, multivariate_normal, orthogonal) to a small absolute tolerance. Also: jit equals
eager, vmap of the rejection samplers equals jax.vmap, float16, and the moments of the gamma family.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import meshax  # noqa: E402
import meshax.random as mr  # noqa: E402
from oracle import ulp_distance  # noqa: E402

SEEDS = [0, 1, 42]


def both(fn, seed):
    return np.asarray(fn(mr, mr.PRNGKey(seed))), np.asarray(jax_sampler(fn)(jax.random.PRNGKey(seed)))


@functools.lru_cache(maxsize=None)
def jax_sampler(fn):
    """fn's JAX side as a function of the key. JAX's eager multinomial compiles anew for every key (~2 s each, 4
    keys here): it runs under one jax.jit instead, whose values are its eager ones (checked for these keys when
    this was written; the comparison is exact)."""
    if fn is EXACT["multinomial"]:
        return jax.jit(lambda key: fn(jax.random, key))
    return lambda key: fn(jax.random, key)


F32 = np.float32
LOGITS = np.log(np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4]], F32))
COV = np.array([[2, 0.5, 0], [0.5, 1, 0.2], [0, 0.2, 1]], F32)

EXACT = {
    "geometric": lambda r, k: r.geometric(k, 0.3, (301,)),
    "geometric_array_p": lambda r, k: r.geometric(k, np.array([0.05, 0.5, 0.9], F32), (20, 3)),
    "rademacher": lambda r, k: r.rademacher(k, (301,)),
    "rademacher_f32": lambda r, k: r.rademacher(k, (4, 5), F32),
    "triangular": lambda r, k: r.triangular(k, 0.0, 0.3, 1.0, (301,)),
    "categorical": lambda r, k: r.categorical(k, LOGITS),
    "categorical_shape": lambda r, k: r.categorical(k, LOGITS, shape=(50, 2)),
    "categorical_axis0": lambda r, k: r.categorical(k, LOGITS.T, axis=0, shape=(7, 2)),
    "categorical_norep": lambda r, k: r.categorical(k, np.linspace(0, 1, 10).astype(F32), shape=(4,),
                                                    replace=False),
    "categorical_norep_batch": lambda r, k: r.categorical(k, np.zeros((3, 6), F32), shape=(4, 3), replace=False),
    "poisson": lambda r, k: r.poisson(k, np.array([0.0, 0.5, 3.0, 12.0, 100.0], F32), (40, 5)),
    "poisson_scalar": lambda r, k: r.poisson(k, 4.0, (50,)),
    "binomial": lambda r, k: r.binomial(k, np.array([5.0, 20.0, 100.0, 1000.0], F32),
                                        np.array([0.1, 0.5, 0.3, 0.9], F32), (40, 4)),
    "binomial_edge": lambda r, k: r.binomial(k, np.array([0.0, -1.0, np.inf, 7.0], F32),
                                             np.array([0.5, 0.5, 0.5, 1.0], F32)),
    "multinomial": lambda r, k: r.multinomial(k, 100.0, np.array([0.2, 0.3, 0.5], F32), shape=(10, 3)),
}

CLOSE = {  # name: (fn, max ulps)
    "exponential": (lambda r, k: r.exponential(k, (5, 7)), 2),
    "exponential_f16": (lambda r, k: r.exponential(k, (301,), np.float16), 1),
    "laplace": (lambda r, k: r.laplace(k, (301,)), 2),
    "cauchy": (lambda r, k: r.cauchy(k, (301,)), 2),
    "pareto": (lambda r, k: r.pareto(k, 2.5, (301,)), 3),
    "rayleigh": (lambda r, k: r.rayleigh(k, 1.5, (301,)), 3),
    "weibull_min": (lambda r, k: r.weibull_min(k, 1.5, 2.0, (301,)), 3),
    "lognormal": (lambda r, k: r.lognormal(k, 0.7, (301,)), 4),
    "maxwell": (lambda r, k: r.maxwell(k, (301,)), 3),
    "double_sided_maxwell": (lambda r, k: r.double_sided_maxwell(k, 0.5, 2.0, (301,)), 6),
    "gamma": (lambda r, k: r.gamma(k, np.array([0.3, 1.0, 2.5, 10.0], F32), (50, 4)), 8),
    "gamma_scalar": (lambda r, k: r.gamma(k, 3.0), 8),
    "beta": (lambda r, k: r.beta(k, 2.0, 3.0, (101,)), 8),
    "chisquare": (lambda r, k: r.chisquare(k, 3.0, (101,)), 8),
    "f": (lambda r, k: r.f(k, 3.0, 5.0, (101,)), 10),
    "t": (lambda r, k: r.t(k, 4.0, (101,)), 8),
    "generalized_normal": (lambda r, k: r.generalized_normal(k, 1.5, (101,)), 10),
    "ball": (lambda r, k: r.ball(k, 3, 2, (50,)), 8),
}

ABS = {  # name: (fn, atol) — cancellation or a matrix factorisation amplifies the ulps
    "logistic": (lambda r, k: r.logistic(k, (301,)), 2e-6),
    "wald": (lambda r, k: r.wald(k, 1.3, (301,)), 2e-5),
    "loggamma": (lambda r, k: r.loggamma(k, np.array([0.3, 1.0, 2.5, 10.0], F32), (50, 4)), 2e-5),
    "dirichlet": (lambda r, k: r.dirichlet(k, np.array([1.0, 2.0, 0.5], F32), (40,)), 2e-6),
    "multivariate_normal": (lambda r, k: r.multivariate_normal(k, np.zeros(3, F32), COV, (50,)), 2e-6),
    "multivariate_normal_eigh": (lambda r, k: r.multivariate_normal(k, np.ones(3, F32), COV, (5,),
                                                                     method="eigh"), 1e-4),
    "orthogonal": (lambda r, k: r.orthogonal(k, 4, (3,)), 1e-5),
    "orthogonal_rect": (lambda r, k: r.orthogonal(k, 2, (), m=5), 1e-5),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact(name, seed):
    a, b = both(EXACT[name], seed)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(CLOSE))
def test_close(name, seed):
    fn, ulps = CLOSE[name]
    a, b = both(fn, seed)
    assert ulp_distance(a, b) <= ulps


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(ABS))
def test_abs(name, seed):
    fn, atol = ABS[name]
    a, b = both(fn, seed)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("name", ["exponential", "gamma", "beta", "t", "ball", "laplace", "cauchy"])
def test_jit_equals_eager(name):
    fn = CLOSE[name][0]
    key = mr.PRNGKey(7)
    np.testing.assert_array_equal(np.asarray(meshax.jit(lambda k: fn(mr, k))(key)), np.asarray(fn(mr, key)))


@pytest.mark.parametrize("name", ["poisson", "binomial", "categorical_shape", "geometric", "multinomial"])
def test_jit_exact(name):
    fn = EXACT[name]
    out = meshax.jit(lambda k: fn(mr, k))(mr.PRNGKey(5))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jax_sampler(fn)(jax.random.PRNGKey(5))))


def test_vmap_rejection_samplers():
    keys_m, keys_j = mr.split(mr.PRNGKey(3), 4), jax.random.split(jax.random.PRNGKey(3), 4)
    g = meshax.vmap(lambda k: mr.gamma(k, 2.0, (3,)))(keys_m)
    gj = jax.vmap(lambda k: jax.random.gamma(k, 2.0, (3,)))(keys_j)
    assert ulp_distance(np.asarray(g), np.asarray(gj)) <= 8
    # batched keys directly (meshax's extension) give jax.vmap's result too
    assert ulp_distance(np.asarray(mr.gamma(keys_m, 2.0, (3,))), np.asarray(gj)) <= 8
    p = meshax.vmap(lambda k: mr.poisson(k, 20.0, (3,)))(keys_m)
    pj = jax.vmap(lambda k: jax.random.poisson(k, 20.0, (3,)))(keys_j)
    np.testing.assert_array_equal(np.asarray(p), np.asarray(pj))


def test_moments():
    key = mr.PRNGKey(11)
    g = np.asarray(mr.gamma(key, 0.5, (4000,)), np.float64)
    assert abs(g.mean() - 0.5) < 0.06 and abs(g.var() - 0.5) < 0.12
    p = np.asarray(mr.poisson(key, 30.0, (4000,)), np.float64)
    assert abs(p.mean() - 30) < 0.5 and abs(p.var() - 30) < 4
    b = np.asarray(mr.binomial(key, 50.0, 0.4, (4000,)), np.float64)
    assert abs(b.mean() - 20) < 0.4 and abs(b.var() - 12) < 1.5
    be = np.asarray(mr.beta(key, 2.0, 5.0, (4000,)), np.float64)
    assert abs(be.mean() - 2 / 7) < 0.01


def test_key_impl_and_dtype():
    assert str(mr.key_impl(mr.PRNGKey(0))) == str(jax.random.key_impl(jax.random.PRNGKey(0)))
    assert str(mr.key_dtype()) == str(jax.random.key_dtype())


def test_errors():
    with pytest.raises(ValueError):
        mr.exponential(mr.PRNGKey(0), (2,), np.int32)
    with pytest.raises(ValueError):
        mr.pareto(mr.PRNGKey(0), np.ones(3, F32), (2,))
    with pytest.raises(ValueError):
        mr.categorical(mr.PRNGKey(0), np.zeros(3, F32), shape=(4,), replace=False)
