"""Derivatives of meshax.scipy.special's functions added at JAX 0.12's level (and jnp.i0) against real JAX: grad
under vmap, eagerly and under jit, at ordinary and edge points (JAX's NaNs, infinities and zeros included), and
second derivatives where JAX defines them."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from differential import check_modes
from meshax._src.numpy.bessel import i0 as jnp_i0

jax.config.update("jax_platforms", "cpu")

EDGES = [-2.0, -0.5, 0.0, 0.5, 1.0, 3.0, 20.0, np.inf, -np.inf, np.nan]
POINTS = {
    "dawsn": [-7.5, -1.2, 0.1, 2.5, 9.0],
    "erfcinv": [1e-6, 0.05, 0.7, 1.3, 1.99, 2.0],
    "erfcx": [-9.0, -3.0, 0.1, 2.5, 30.0, 1e5],
    "exp1": [1e-6, 0.05, 1.5, 7.0, 40.0],
    "expi": [-60.0, -7.0, -1e-4, 1e-4, 7.0, 60.0],
    "gammasgn": [-3.5, -1.5, 7.0],
    "loggamma": [1e-3, 0.7, 2.5, 10.0, 1e3],
    "spence": [1e-4, 0.3, 0.9, 1.7, 2.5, 10.0, 1e4],
    "sici": [-30.0, -4.0, 1e-4, 0.9, 4.0, 30.0],
    "fresnel": [-3.3, -0.8, 1e-3, 0.8, 2.2, 3.3],
    "wofz": [-4.0, -0.3, 0.3, 4.0],
    "i0": [-12.0, -4.0, 0.3, 4.0, 12.0],
    "scipy_i0": [-4.0, 0.3, 12.0],
    "scipy_i1": [-4.0, 0.3, 12.0],
}


def _scalar_function(L, name):
    """A real scalar function of one real variable built from the special function `name`."""
    if name == "i0":
        return jax.numpy.i0 if L is jax else jnp_i0
    function = getattr(L.scipy.special, name.removeprefix("scipy_"))
    if name in ("sici", "fresnel"):
        return lambda x: function(x)[0] + 2 * function(x)[1]
    if name == "wofz":
        return lambda x: L.numpy.real(function(x)) + 3 * L.numpy.imag(function(x))
    return function


@pytest.mark.parametrize("name", list(POINTS))
def test_unary_grad(name):
    x = np.array(EDGES + POINTS[name], np.float32)
    check_modes(lambda L, x: L.vmap(L.grad(_scalar_function(L, name)))(x), x, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name", ["dawsn", "erfcx", "erfcinv", "expi", "exp1", "i0", "sici", "fresnel"])
def test_second_derivatives(name):
    x = np.array(POINTS[name][1:4], np.float32)
    check_modes(lambda L, x: L.vmap(L.grad(L.grad(_scalar_function(L, name))))(x), x, rtol=1e-3, atol=1e-5)


A = np.array([-2.5, -0.5, 0.5, 1.0, 2.0, 7.5], np.float32)
B = np.array([0.3, 1.5, -1.5, 4.0, 0.5, 2.0], np.float32)


@pytest.mark.parametrize("name", ["beta", "boxcox", "boxcox1p", "comb", "owens_t"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_binary_grads(name, argnums):
    # JAX's betaln (inside beta) differentiates to NaN at some negative arguments meshax's does not: beta's
    # derivatives are compared at positive ones
    first = np.abs(A) if name in ("boxcox", "comb", "beta") else A
    second = np.abs(B) if name in ("comb", "beta") else B
    check_modes(lambda L, a, b: L.vmap(L.grad(getattr(L.scipy.special, name), argnums=argnums))(a, b), first,
                second, rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, -1])
def test_expn_grad(n):
    x = np.array([0.0, 1e-3, 0.5, 1.0, 5.0, 50.0, 100.0, -1.0, np.inf, np.nan], np.float32)
    check_modes(lambda L, x: L.vmap(L.grad(lambda t: L.scipy.special.expn(n, t)))(x), x, rtol=2e-4, atol=1e-6)
    if n >= 0:  # (JAX's second derivative is 0 where its first is NaN, for n < 0)
        check_modes(lambda L, x: L.vmap(L.grad(L.grad(lambda t: L.scipy.special.expn(n, t))))(x), x[1:6],
                    rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("name", ["dawsn", "erfcx", "expi", "spence", "sici", "wofz", "i0", "loggamma"])
def test_vmap_values(name):
    """vmap over a batch dimension (not the first), eagerly and under jit, matches JAX's vmap."""
    x = np.abs(np.array(POINTS[name], np.float32))[:3]
    batch = np.stack([x, x / 2 + 0.1], axis=1)
    function = (lambda L: jax.numpy.i0 if L is jax else jnp_i0) if name == "i0" else (
        lambda L: getattr(L.scipy.special, name))
    check_modes(lambda L, v: L.vmap(function(L), in_axes=1)(v), batch, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["beta", "boxcox", "comb", "owens_t", "expn", "hyp1f1"])
def test_vmap_binary(name):
    a = np.array([0.5, 1.5, 2.0, 4.0], np.float32)
    args = (a, a[::-1], a / 5) if name == "hyp1f1" else (a if name != "expn" else np.arange(4.0, dtype=np.float32),
                                                          a[::-1])
    in_axes = (0, None) + (0,) * (len(args) - 2)
    check_modes(lambda L, *v: L.vmap(getattr(L.scipy.special, name), in_axes=in_axes)(*v), *args, rtol=1e-4,
                atol=1e-6)
