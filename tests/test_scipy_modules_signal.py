"""meshax.scipy.signal's detrend, stft, istft, welch and csd against JAX 0.12: each over dtypes, shapes and
keywords, eagerly and under jit (values, shapes, dtypes, weak types), errors of the same class, grad and vmap.
JAX's stft, istft, welch and csd run under jax.jit: eagerly each of its operations compiles apart (welch over the
cases: 36 s against 5.8 s), and the values agree with the eager ones to 6e-7, against the 2e-4 tolerance."""
from __future__ import annotations

import warnings

import jax
import jax.scipy.signal  # noqa: F401
import numpy as np
import pytest

import meshax
import meshax.scipy.signal  # noqa: F401
from differential import check_against, check_modes, raises_like_jax, random_data, run_jax

DTYPES = [np.float32, np.int32, np.complex64]


def _check(case, *args, **tolerances):
    """check_modes where JAX accepts the inputs (against that one JAX run); otherwise meshax must raise JAX's
    exception class."""
    try:
        theirs = run_jax(case, args)
    except Exception:  # noqa: BLE001 - the class is compared below
        raises_like_jax(case, *args)
        return
    check_against(theirs, case, *args, **tolerances)


SIGNALS = [((40,), -1, np.float32), ((2, 30, 2), 1, np.int32), ((30, 2), 0, np.complex64)]
WELCH_KW = [{}, {"nperseg": 8, "noverlap": 2, "nfft": 12, "average": "median"},
            {"nperseg": 7, "detrend": "linear", "fs": 10.0, "window": "hamming", "scaling": "spectrum"},
            {"nperseg": 8, "return_onesided": False, "detrend": False}, {"window": np.hanning(10).astype(np.float32)}]


def _quiet(case):
    def run(L, *args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return case(L, *args)
    return run


@pytest.mark.parametrize("signal", SIGNALS, ids=str)
@pytest.mark.parametrize("kw", WELCH_KW, ids=lambda k: ",".join(k))
def test_welch_and_csd(signal, kw):
    shape, axis, dtype = signal
    x, y = random_data(shape, dtype), random_data(shape, dtype, 1)
    check_modes(_quiet(lambda L, u: L.scipy.signal.welch(u, axis=axis, **kw)), x, rtol=2e-4, atol=2e-4,
                jax_jitted=True)
    check_modes(_quiet(lambda L, u, v: L.scipy.signal.csd(u, v, axis=axis, **kw)), x, y, rtol=2e-4, atol=2e-4,
                jax_jitted=True)


STFT_KW = [{"nperseg": 8, "noverlap": 3, "nfft": 10}, {"nperseg": 7, "boundary": "even"},
           {"nperseg": 8, "boundary": "odd", "padded": False}, {"nperseg": 8, "boundary": None, "fs": 4.0},
           {"nperseg": 8, "boundary": "constant", "detrend": "linear"},
           {"nperseg": 8, "window": "blackman", "return_onesided": False}]


@pytest.mark.parametrize("signal", SIGNALS, ids=str)
@pytest.mark.parametrize("kw", STFT_KW, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_stft_istft(signal, kw):
    shape, axis, dtype = signal
    x = random_data(shape, dtype)
    forward = check_modes(_quiet(lambda L, u: L.scipy.signal.stft(u, axis=axis, **kw)), x, rtol=2e-4, atol=2e-4,
                          jax_jitted=True)
    if dtype == np.complex64 or not kw.get("return_onesided", True):
        return
    zxx = np.asarray(forward[2])  # JAX's stft of x, as check_modes computed it
    inverse = {k: v for k, v in kw.items() if k in ("nperseg", "noverlap", "nfft", "window", "fs")}
    inverse["boundary"] = kw.get("boundary", "zeros") is not None
    freq_axis = axis if axis >= 0 else -2
    case = lambda L, z: L.scipy.signal.istft(z, freq_axis=freq_axis, time_axis=-1, **inverse)  # noqa: E731
    try:
        theirs = run_jax(case, (zxx,), jitted=True)
    except TypeError:  # JAX's istft needs nfft for an odd nperseg
        raises_like_jax(case, zxx)
        return
    check_against(theirs, case, zxx, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("shape,dtype", [((20,), np.float32), ((3, 12), np.int32), ((12, 3), np.complex64)],
                         ids=str)
@pytest.mark.parametrize("kw", [{"type": "constant"}, {"bp": [5, 9]}, {"bp": 2, "axis": 0}], ids=str)
def test_detrend(shape, dtype, kw):
    _check(lambda L, u: L.scipy.signal.detrend(u, **kw), random_data(shape, dtype), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("call", [
    lambda L: L.scipy.signal.stft(np.ones(10), nperseg=4, noverlap=4),
    lambda L: L.scipy.signal.stft(np.ones(10), boundary="bad"),
    lambda L: L.scipy.signal.welch(np.ones(10), scaling="bad"),
    lambda L: L.scipy.signal.welch(np.ones((3, 10)), average="bad", nperseg=4),
    lambda L: L.scipy.signal.welch(np.ones(10), nperseg=4, nfft=3),
    lambda L: L.scipy.signal.welch(np.ones(10), window=np.ones((2, 2))),
    lambda L: L.scipy.signal.csd(np.ones((2, 10)), np.ones(10)),
    lambda L: L.scipy.signal.detrend(np.ones(10), type="bad"),
    lambda L: L.scipy.signal.detrend(np.ones(10), bp=20),
    lambda L: L.scipy.signal.istft(np.ones(10)),
    lambda L: L.scipy.signal.istft(np.ones((5, 10)), time_axis=0, freq_axis=0),
    lambda L: L.scipy.signal.istft(np.ones((4, 10)), nperseg=7),
    lambda L: L.scipy.signal.istft(np.ones((5, 10)), nperseg=8, noverlap=8),
])
def test_spectral_errors(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        raises_like_jax(call)


def test_spectral_grad_and_vmap():
    x = random_data((40,), np.float32)
    check_modes(lambda L, u: L.grad(lambda v: L.scipy.signal.welch(v, nperseg=8)[1].sum())(u), x,
                rtol=1e-4, atol=1e-4, modes=("jit",))
    check_modes(lambda L, u: L.grad(lambda v: L.numpy.abs(L.scipy.signal.stft(v, nperseg=8)[2]).sum())(u), x,
                rtol=1e-4, atol=1e-4, modes=("jit",))
    check_modes(lambda L, u: L.vmap(lambda v: L.scipy.signal.detrend(v))(u), random_data((3, 10), np.float32),
                rtol=1e-4, atol=1e-4)