"""hyp2f1 of meshax.scipy.special against real JAX 0.12: values over a grid of parameters (poles, terminating
series, x beyond 1, non-finite x included) and derivatives in all four arguments, eagerly, under jit and vmap.
(JAX compiles hyp2f1 anew for each shape, slowly: the file makes two such calls.)"""
from __future__ import annotations

import jax
import numpy as np

from differential import check_modes

jax.config.update("jax_platforms", "cpu")

PARAMS = np.array([-2.5, -1.0, 0.0, 0.5, 1.0, 2.0, 7.5], np.float32)
X = np.array([-150.0, -20.0, -2.0, -0.5, 0.0, 0.3, 0.97, 1.0, 3.0, 50.0, 150.0, np.inf, -np.inf, np.nan], np.float32)
POINTS = np.array([0.3, 0.5, 1.2, 2.5], np.float32)


def _negative_integer(v: np.ndarray) -> np.ndarray:
    return (v <= 0) & (v == np.round(v))


def test_hyp2f1_grid():
    """Every c of a grid at once (one JAX compilation). Where a, b, c - a or c - b is a negative integer, or
    c - a - b an integer, and x is just below 1, JAX's float32 sums cancel to rounding noise: x = 0.97 is left out
    for those."""
    a, b, c, x = (v.ravel() for v in np.meshgrid(PARAMS, PARAMS, np.array([-3.0, -1.5, 0.0, 0.5, 2.5, 4.0],
                                                                            np.float32), X, indexing="ij"))
    near_one = x == np.float32(0.97)
    integral = _negative_integer(a) | _negative_integer(b) | _negative_integer(c - a) | _negative_integer(c - b)
    integral |= c - a - b == np.round(c - a - b)
    a, b, c, x = (v[~(near_one & integral)] for v in (a, b, c, x))
    check_modes(lambda L, a, b, c, x: L.scipy.special.hyp2f1(a, b, c, x), a, b, c, x, rtol=1e-4, atol=1e-6)


def test_hyp2f1_grads():
    argnums = (0, 1, 2, 3)
    check_modes(lambda L, a, b, c, x: L.vmap(L.grad(L.scipy.special.hyp2f1, argnums=argnums))(a, b, c, x), POINTS,
                POINTS[::-1] + 1, POINTS + 2, POINTS / 2 - 0.5, rtol=2e-4, atol=1e-5)
