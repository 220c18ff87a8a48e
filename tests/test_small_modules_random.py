"""jax.random.random_gamma_p against real JAX 0.12: per-key gamma samples (and their logs), eagerly, under jit and
under vmap (kept apart: gamma's rejection loops make each case take a few seconds)."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp

from differential import assert_matches

ALPHA = np.asarray([[2.0, 0.1], [1.5, 9.0]], np.float32)


def _case(L, a, log_space, key_shape):
    keys = L.random.split(L.random.key(0), a.shape) if key_shape == "full" else L.random.key(1)
    return L.random.random_gamma_p.bind(keys, a, log_space=log_space)


@pytest.mark.parametrize("log_space", [False, True])
@pytest.mark.parametrize("key_shape", ["full", "scalar"])
def test_random_gamma_p_eager(log_space, key_shape):
    assert_matches(_case(meshax, mnp.asarray(ALPHA), log_space, key_shape),
                   _case(jax, jax.numpy.asarray(ALPHA), log_space, key_shape), rtol=2e-5, atol=2e-6)


def test_random_gamma_p_jit_and_vmap():
    ours = meshax.jit(lambda v: _case(meshax, v, True, "scalar"))(mnp.asarray(ALPHA[0]))
    assert_matches(ours, _case(jax, jax.numpy.asarray(ALPHA[0]), True, "scalar"), rtol=2e-5, atol=2e-6)
    ours = meshax.vmap(lambda v: _case(meshax, v, False, "full"))(mnp.asarray(ALPHA))
    theirs = jax.vmap(lambda v: _case(jax, v, False, "full"))(ALPHA)
    assert_matches(ours, theirs, rtol=2e-5, atol=2e-6)


def test_random_gamma_p_names():
    assert meshax.random.random_gamma_p.name == jax.random.random_gamma_p.name
    assert meshax.random.random_gamma_p.multiple_results == jax.random.random_gamma_p.multiple_results
