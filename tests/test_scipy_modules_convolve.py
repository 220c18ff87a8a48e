"""meshax.scipy.signal's convolutions and correlations against JAX 0.12: each over dtypes, shapes, modes and
methods, eagerly and under jit (values, shapes, dtypes, weak types), errors of the same class, grad and vmap."""
from __future__ import annotations

import jax
import jax.scipy.signal  # noqa: F401
import numpy as np
import pytest

import meshax
import meshax.scipy.signal  # noqa: F401
from differential import check_modes, raises_like_jax, random_data

DTYPES = [np.float32, np.int32, np.complex64]


SHAPE_PAIRS = [((5,), (3,)), ((3,), (4,)), ((4, 5), (2, 3)), ((2, 2), (3, 4)), ((3, 3), (2, 2))]
CASES = [(s, np.float32) for s in SHAPE_PAIRS] + [(SHAPE_PAIRS[2], np.complex64), (SHAPE_PAIRS[0], np.int32),
                                                  (SHAPE_PAIRS[3], np.complex64)]


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("shapes,dtype", CASES, ids=str)
@pytest.mark.parametrize("method", ["auto", "fft"])
def test_convolve_correlate(name, shapes, dtype, method):
    a, b = random_data(shapes[0], dtype), random_data(shapes[1], dtype, 1)
    for mode in (["full", "same", "valid"] if method == "auto" else ["full", "valid"]):
        check_modes(lambda L, x, y: getattr(L.scipy.signal, name)(x, y, mode=mode, method=method), a, b,
                    rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
@pytest.mark.parametrize("shapes,dtype", [c for c in CASES if len(c[0][0]) == 2], ids=str)
def test_convolve2d_correlate2d(name, shapes, dtype):
    a, b = random_data(shapes[0], dtype), random_data(shapes[1], dtype, 1)
    for mode in ["full", "same", "valid"]:
        check_modes(lambda L, x, y: getattr(L.scipy.signal, name)(x, y, mode=mode), a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shapes", [((3, 4), (3, 5), 1), ((2, 6, 3), (2, 3, 3), [1]), ((4, 5), (2, 3), (0, 1))],
                         ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.complex64], ids=lambda d: np.dtype(d).name)
def test_fftconvolve_axes(shapes, dtype):
    s1, s2, axes = shapes
    a, b = random_data(s1, dtype), random_data(s2, dtype, 1)
    for mode in ["full", "same", "valid"]:
        check_modes(lambda L, x, y: L.scipy.signal.fftconvolve(x, y, mode=mode, axes=axes), a, b,
                    rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("call", [
    lambda L: L.scipy.signal.convolve(np.ones((3, 4)), np.ones(2)),
    lambda L: L.scipy.signal.convolve(np.ones(3), np.ones(2), mode="bad"),
    lambda L: L.scipy.signal.convolve(np.ones(3), np.ones(2), method="bad"),
    lambda L: L.scipy.signal.convolve(np.ones((3, 6)), np.ones((5, 2))),
    lambda L: L.scipy.signal.convolve(np.ones(0), np.ones(5)),
    lambda L: L.scipy.signal.convolve2d(np.ones(3), np.ones(5)),
    lambda L: L.scipy.signal.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="wrap"),
    lambda L: L.scipy.signal.correlate2d(np.ones((3, 3)), np.ones((2, 2)), fillvalue=1),
    lambda L: L.scipy.signal.fftconvolve(np.ones((3, 4)), np.ones((2, 5)), axes=[1]),
    lambda L: L.scipy.signal.fftconvolve(np.ones((3, 4)), np.ones((2, 5)), mode="valid"),
    lambda L: L.scipy.signal.fftconvolve(np.ones(3), np.ones((2, 5))),
    lambda L: L.scipy.signal.fftconvolve(np.ones(3, np.float16), np.ones(2, np.float16)),
])
def test_convolution_errors(call):
    raises_like_jax(call)


def test_convolution_grad_and_vmap():
    a, b = random_data((6,), np.float32), random_data((3,), np.float32, 1)
    for name in ["convolve", "correlate", "fftconvolve"]:
        check_modes(lambda L, x, y: L.grad(lambda u, v: getattr(L.scipy.signal, name)(u, v).sum() ** 2,
                                           argnums=(0, 1))(x, y), a, b, rtol=1e-4, atol=1e-4)
    batch = random_data((4, 6), np.float32)
    check_modes(lambda L, x, y: L.vmap(lambda u: L.scipy.signal.convolve(u, y, mode="same"))(x), batch, b,
                rtol=1e-4, atol=1e-4)
    check_modes(lambda L, x, y: L.vmap(lambda u: L.scipy.signal.correlate2d(u, y[None], mode="valid"))(x),
                batch[:, None], b, rtol=1e-4, atol=1e-4)
