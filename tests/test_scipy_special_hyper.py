"""hyp1f1, bessel_jn and sph_harm_y of meshax.scipy.special against real JAX 0.12: values over grids of
parameters (poles, terminating series, x beyond 1, non-finite x included), derivatives, jit and vmap."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from differential import check_modes

jax.config.update("jax_platforms", "cpu")

PARAMS = np.array([-2.5, -1.0, 0.0, 0.5, 1.0, 2.0, 7.5], np.float32)
X = np.array([-150.0, -20.0, -2.0, -0.5, 0.0, 0.3, 0.97, 1.0, 3.0, 50.0, 150.0, np.inf, -np.inf, np.nan], np.float32)


@pytest.mark.parametrize("b", list(PARAMS))
def test_hyp1f1_grid(b):
    a, x = (v.ravel() for v in np.meshgrid(PARAMS, X, indexing="ij"))
    check_modes(lambda L, a, x: L.scipy.special.hyp1f1(a, b, x), a, x, rtol=1e-4, atol=1e-6)


POINTS = np.array([0.3, 0.5, 1.2, 2.5], np.float32)


@pytest.mark.parametrize("argnums", [0, 1, 2])
def test_hyp1f1_grads(argnums):
    check_modes(lambda L, a, b, x: L.vmap(L.grad(L.scipy.special.hyp1f1, argnums=argnums))(a, b, x), POINTS,
                POINTS[::-1] + 1, POINTS * 4 - 3, rtol=2e-4, atol=1e-5)


def test_hyp1f1_scalar_kinds():
    from differential import assert_matches
    import meshax

    for args in [(1, 2, 0.5), (0.5, 1.5, 2), (np.float32(1), 2, 3)]:
        assert_matches(meshax.scipy.special.hyp1f1(*args), jax.scipy.special.hyp1f1(*args), rtol=1e-5)


Z = np.array([0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0, -2.0, -10.0, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("v", [0, 1, 3, 6])
@pytest.mark.parametrize("n_iter", [50, 20, 80])
def test_bessel_jn(v, n_iter):
    """Values of orders 0..v (NaN where JAX's float32 recurrence overflows: small and negative z)."""
    check_modes(lambda L, z: L.scipy.special.bessel_jn(z, v=v, n_iter=n_iter), Z, rtol=1e-4, atol=1e-6)


def test_bessel_jn_shapes_and_scalars():
    check_modes(lambda L, z: L.scipy.special.bessel_jn(z, v=2), Z[4:10].reshape(2, 3), rtol=1e-4, atol=1e-6)
    check_modes(lambda L, z: L.scipy.special.bessel_jn(z, v=2), np.float32(7.5), rtol=1e-4, atol=1e-6)
    from differential import assert_matches
    import meshax

    assert_matches(meshax.scipy.special.bessel_jn(7, v=1), jax.scipy.special.bessel_jn(7, v=1), rtol=1e-4)


def test_bessel_jn_grad():
    """(Below z = 10 JAX's derivative of its float32 recurrence is rounding noise: compared from 10 on.)"""
    z = np.array([10.0, 12.5, 30.0, 100.0, -10.0, np.inf, np.nan], np.float32)
    check_modes(lambda L, z: L.vmap(L.grad(lambda t: L.scipy.special.bessel_jn(t, v=2).sum()))(z), z, rtol=1e-3,
                atol=1e-5)


N = np.array([0, 1, 1, 2, 2, 3, 3, 2, 1, 4])
M = np.array([0, 1, -1, 2, -2, 1, -3, 3, 0, -4])
THETA = np.linspace(0.1, 3.0, 10).astype(np.float32)
PHI = np.linspace(0.2, 6.0, 10).astype(np.float32)


@pytest.mark.parametrize("n_max", [None, 2, 4, 6])
def test_sph_harm_y(n_max):
    """Values, n_max clipping degrees and orders (as JAX does), |m| > n giving 0; without n_max only eagerly (it
    is max(n), which needs n's value)."""
    check_modes(lambda L, n, m, t, p: L.scipy.special.sph_harm_y(n, m, t, p, n_max=n_max), N, M, THETA, PHI,
                rtol=1e-4, atol=1e-6, modes=("eager",) if n_max is None else ("eager", "jit"))


def test_sph_harm_y_scalar_angles():
    check_modes(lambda L, n, m: L.scipy.special.sph_harm_y(n, m, 0.5, 0.3, n_max=3), N[3:4], M[3:4], rtol=1e-4,
                atol=1e-6)


def test_sph_harm_y_traced_degrees_need_n_max():
    import meshax

    with pytest.raises(Exception) as error:
        jax.jit(lambda n: jax.scipy.special.sph_harm_y(n, n, 0.5, 0.3))(N[:3])
    assert "concrete" in str(error.value).lower()
    with pytest.raises(Exception, match="concrete"):
        meshax.jit(lambda n: meshax.scipy.special.sph_harm_y(n, n, 0.5, 0.3))(N[:3])


@pytest.mark.parametrize("part", ["real", "imag"])
@pytest.mark.parametrize("argnums", [0, 1])
def test_sph_harm_y_grads(part, argnums):
    def case(L, n, m, t, p):
        def scalar(t, p, n, m):
            value = L.scipy.special.sph_harm_y(n[None], m[None], t, p, n_max=4)[0]
            return getattr(L.numpy, part)(value)

        return L.vmap(L.grad(scalar, argnums=argnums))(t, p, n, m)

    check_modes(case, N, M, THETA, PHI, rtol=1e-3, atol=1e-5)
