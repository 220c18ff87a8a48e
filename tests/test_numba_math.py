"""numba_math's float32 exp, tanh and logistic (the forms compiled programs use) against float64 references:
within 2 ulp of the correctly rounded float32 everywhere, NaN for NaN, the limits at the infinities, and results
below float32's normal range zero (meshax flushes subnormals, as XLA's CPU backend does)."""
from __future__ import annotations

import numba
import numpy as np
import pytest

from meshax._src.interpreters.numba_math import exp32, logistic32, tanh32

TINY = np.finfo(np.float32).tiny


@numba.njit(error_model="numpy")
def _each(which, x, out):
    for i in range(x.size):
        if which == 0:
            out[i] = exp32(x[i])
        elif which == 1:
            out[i] = tanh32(x[i])
        else:
            out[i] = logistic32(x[i])


FUNCTIONS = {"exp": (0, np.exp), "tanh": (1, np.tanh), "logistic": (2, lambda x: 1 / (1 + np.exp(-x)))}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, 88.72, 89.0, 100.0, -87.3, -88.0, -103.0, -200.0, 1e-30,
           -1e-30, 1e-45, 0.625, -0.625, 0.62499, 9.0, -9.0, 20.0, -20.0]


def _flushed(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < TINY, np.float32(0), x).astype(np.float32)


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(0)
    parts = [rng.uniform(-100, 100, 100_000), rng.uniform(-10, 10, 100_000), rng.uniform(-1, 1, 100_000),
             rng.uniform(-1e-3, 1e-3, 50_000), SPECIAL]
    return np.concatenate(parts).astype(np.float32)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_within_two_ulp_of_the_correctly_rounded_value(name):
    which, reference = FUNCTIONS[name]
    x = _inputs()
    ours = np.empty_like(x)
    _each(which, x, ours)
    with np.errstate(all="ignore"):
        expected = _flushed(reference(x.astype(np.float64)).astype(np.float32))
    ours = _flushed(ours)
    assert np.array_equal(np.isnan(ours), np.isnan(expected))
    finite = ~np.isnan(expected)
    same = ours[finite] == expected[finite]  # infinities and zeros exactly
    spacing = np.spacing(np.abs(expected[finite])).astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf (`same` there)
        ulps = np.where(same, 0.0, np.abs(ours[finite].astype(np.float64) - expected[finite]) / spacing)
    worst = int(np.argmax(ulps))
    assert ulps[worst] <= 2.0, (name, x[finite][worst], ours[finite][worst], expected[finite][worst])


def test_limits_and_signs():
    x = np.array([np.inf, -np.inf, 0.0, -0.0, 100.0, -120.0], np.float32)
    out = np.empty_like(x)
    _each(0, x, out)
    assert out.tolist() == [np.inf, 0.0, 1.0, 1.0, np.inf, 0.0]
    _each(1, x, out)
    assert out.tolist() == [1.0, -1.0, 0.0, 0.0, 1.0, -1.0] and np.signbit(out[3])
    _each(2, x, out)
    assert out.tolist()[:4] == [1.0, 0.0, 0.5, 0.5]
