"""meshax.scipy.special's binary functions added at JAX 0.12's level (beta, boxcox, boxcox1p, comb, owens_t, expn),
bernoulli, the errors JAX raises, and the names and signatures of the whole module, against real JAX."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from differential import check_modes
from meshax._src.numpy.bessel import i0 as jnp_i0

jax.config.update("jax_platforms", "cpu")


GRID_A = np.array([-2.5, -1.0, 0.0, 0.5, 1.0, 2.0, 7.5, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("name", ["beta", "boxcox", "boxcox1p", "comb", "owens_t"])
def test_binary_values(name):
    """Binary functions over a grid of first and second arguments, and against a Python scalar second argument."""
    a, b = (v.ravel() for v in np.meshgrid(GRID_A, np.array([-1.5, 0.0, 0.5, 1.0, 3.0, np.nan], np.float32)))
    check_modes(lambda L, a, b: getattr(L.scipy.special, name)(a, b), a, b, rtol=1e-4, atol=1e-6)
    check_modes(lambda L, a: getattr(L.scipy.special, name)(a, 0.5), GRID_A, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name,args", [("beta", (0.5, 2)), ("boxcox", (2, 0.5)), ("boxcox1p", (2, 0)),
                                       ("comb", (5, 2)), ("owens_t", (1, 0.5)), ("expn", (2, 1.5)),
                                       ("comb", (np.float32(5), 2))])
def test_binary_scalar_kinds(name, args):
    from differential import assert_matches

    theirs = getattr(jax.scipy.special, name)(*args)
    assert_matches(getattr(meshax.scipy.special, name)(*args), theirs, rtol=1e-4, atol=1e-6)
    assert_matches(meshax.jit(lambda: getattr(meshax.scipy.special, name)(*args))(), theirs, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("repetition", [False, True])
def test_comb_grid(repetition):
    n, k = np.meshgrid(np.array([-1, 0, 1, 3, 5, 10, 30], np.float32), np.array([-1, 0, 1, 2, 5, 11], np.float32))
    check_modes(lambda L, n, k: L.scipy.special.comb(n, k, repetition=repetition), n, k, rtol=1e-4)


@pytest.mark.parametrize("n", [0, 1, 2, 1.7, -1, 40])
def test_expn(n):
    x = np.array([0.0, 1e-3, 0.5, 1.0, 5.0, 50.0, 100.0, -1.0, np.inf, np.nan], np.float32)
    check_modes(lambda L, x: L.scipy.special.expn(n, x), x, rtol=1e-4, atol=1e-6)
    check_modes(lambda L, n, x: L.scipy.special.expn(n, x), np.full(x.shape, n, np.float32), x, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 2, 5, 12, 30])
def test_bernoulli(n):
    from differential import assert_matches

    assert_matches(meshax.scipy.special.bernoulli(n), jax.scipy.special.bernoulli(n), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [-1, 2.5])
def test_bernoulli_errors(n):
    with pytest.raises(Exception) as error:
        jax.scipy.special.bernoulli(n)
    with pytest.raises(error.type):
        meshax.scipy.special.bernoulli(n)


def test_errors_match_jax():
    """Complex arguments where JAX refuses them, spence of integers, zeta without q, sph_harm_y's diff_n."""
    cases = [("dawsn", (1j,)), ("exp1", (1j,)), ("expi", (1j,)), ("erfcinv", (1j,)), ("gammasgn", (1j,)),
             ("beta", (1j, 1.0)), ("sici", (1j,)), ("fresnel", (1j,)), ("spence", (1,)), ("zeta", (2.0,)),
             ("hyp1f1", (1.0, 2.0, 1j)), ("expn", (1, 1j))]
    for name, args in cases:
        with pytest.raises(Exception) as error:
            getattr(jax.scipy.special, name)(*[jax.numpy.asarray(a) for a in args])
        with pytest.raises(error.type):
            getattr(meshax.scipy.special, name)(*[meshax.numpy.asarray(a) for a in args])
    with pytest.raises(NotImplementedError):
        meshax.scipy.special.sph_harm_y(np.array([1]), np.array([0]), 0.5, 0.5, diff_n=1)
    with pytest.raises(ValueError):
        jnp_i0(meshax.numpy.asarray([1j]))
    with pytest.raises(ValueError):
        meshax.scipy.special.bessel_jn(meshax.numpy.asarray([1j]), v=1)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1), -1])
def test_softmax_signatures(axis):
    """jax.scipy.special's softmax and log_softmax normalize over all axes by default."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 3
    for name in ["softmax", "log_softmax"]:
        if axis is None:
            check_modes(lambda L, v: getattr(L.scipy.special, name)(v), x)
        else:
            check_modes(lambda L, v: getattr(L.scipy.special, name)(v, axis=axis), x)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_multigammaln_array_d(d):
    a = np.array([2.5, 3.0, 7.5], np.float32)
    check_modes(lambda L, a: L.scipy.special.multigammaln(a, np.int32(d)), a, rtol=1e-5)


def test_names_and_signatures_match_jax():
    import inspect

    public = sorted(n for n in dir(jax.scipy.special) if not n.startswith("_"))
    assert sorted(meshax.scipy.special.__all__) == public
    for name in public:
        ours = inspect.signature(getattr(meshax.scipy.special, name)).parameters.values()
        theirs = inspect.signature(getattr(jax.scipy.special, name)).parameters.values()
        assert [(p.name, p.kind, p.default) for p in ours] == [(p.name, p.kind, p.default) for p in theirs], name
