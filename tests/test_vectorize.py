"""jnp.vectorize against real JAX, eagerly, under jit and inside shard_map (see differential.py)."""
from __future__ import annotations

import numpy as np
import pytest

import meshax.numpy as mnp
from differential import MODES, check_case

X = np.arange(12.0, dtype=np.float32).reshape(3, 4)
CASES = {
    "dot_signature": lambda L, x: L.numpy.vectorize(L.numpy.dot, signature="(n),(n)->()")(x, x),
    "dot_broadcast": lambda L, x: L.numpy.vectorize(L.numpy.vdot, signature="(n),(n)->()")(x, x[0]),
    "elementwise": lambda L, x: L.numpy.vectorize(lambda a, b: a * 2 + b)(x, 1.0),
    "excluded_position": lambda L, x: L.numpy.vectorize(lambda a, p: a ** p, excluded={1})(x[0], 2),
    "reduce_core": lambda L, x: L.numpy.vectorize(lambda v: L.numpy.max(v), signature="(n)->()")(x),
    "two_outputs": lambda L, x: L.numpy.vectorize(lambda v: (v.sum(), v * 2), signature="(n)->(),(n)")(x),
    "matrix_core": lambda L, x: L.numpy.vectorize(lambda m: m @ m.T, signature="(a,b)->(a,a)")(x.reshape(3, 2, 2)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_vectorize_matches_jax(name: str, mode: str) -> None:
    check_case(CASES[name], (X,), mode, rtol=1e-6)


def test_vectorize_reports_inconsistent_core_sizes() -> None:
    with pytest.raises(ValueError, match="core dimension 'n'"):
        mnp.vectorize(mnp.dot, signature="(n),(n)->()")(X, X[:, :2])
    with pytest.raises(ValueError, match="signature"):
        mnp.vectorize(mnp.dot, signature="(n),(n)")
