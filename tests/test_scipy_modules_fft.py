"""meshax.scipy.fft (the discrete cosine transforms) against JAX 0.12: dct, idct, dctn and idctn over dtypes,
shapes, lengths, axes and norms, eagerly and under jit; errors of the same class; grad and vmap."""
from __future__ import annotations

import jax
import jax.scipy.fft  # noqa: F401
import numpy as np
import pytest

import meshax
import meshax.scipy.fft  # noqa: F401
from differential import check_modes, raises_like_jax, random_data


FFT_CASES = [((1,), np.float32), ((5,), np.float32), ((6,), np.int32), ((3, 4), np.complex64),
             ((2, 3, 5), np.float32), ((4,), np.float16)]


@pytest.mark.parametrize("name", ["dct", "idct"])
@pytest.mark.parametrize("shape,dtype", FFT_CASES, ids=str)
@pytest.mark.parametrize("norm", [None, "ortho", "backward"])
def test_dct_idct(name, shape, dtype, norm):
    x = random_data(shape, dtype)
    tol = 2e-2 if dtype == np.float16 else 1e-4
    for n, axis in [(None, -1), (1, 0), (7, len(shape) - 1)]:
        check_modes(lambda L, u: getattr(L.scipy.fft, name)(u, n=n, axis=axis, norm=norm), x, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["dctn", "idctn"])
@pytest.mark.parametrize("shape,dtype", FFT_CASES[:5], ids=str)
@pytest.mark.parametrize("kw", [{}, {"norm": "ortho"}, {"s": [4]}, {"axes": [0]}, {"axes": [0, -1], "s": [3, 2]}],
                         ids=str)
def test_dctn_idctn(name, shape, dtype, kw):
    if len(kw.get("axes", ())) > len(shape):
        return
    check_modes(lambda L, u: getattr(L.scipy.fft, name)(u, **kw), random_data(shape, dtype), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("call", [
    lambda L: L.scipy.fft.dct(np.ones(3), type=1),
    lambda L: L.scipy.fft.idct(np.ones(3), type=3),
    lambda L: L.scipy.fft.dct(np.ones(3), norm="forward"),
    lambda L: L.scipy.fft.dctn(np.ones((3, 2)), norm="bad"),
    lambda L: L.scipy.fft.dct(np.ones(3), axis=1),
    lambda L: L.scipy.fft.dct(np.ones(3), n=0),
])
def test_dct_errors(call):
    raises_like_jax(call)


def test_dct_grad_and_vmap():
    x = random_data((3, 6), np.float32)
    for name in ["dct", "idct", "dctn", "idctn"]:
        check_modes(lambda L, u: L.grad(lambda v: (getattr(L.scipy.fft, name)(v, norm="ortho") ** 3).sum())(u), x,
                    rtol=1e-4, atol=1e-4, modes=("eager",))
        check_modes(lambda L, u: L.vmap(getattr(L.scipy.fft, name))(u), x, rtol=1e-4, atol=1e-4)
