"""The fft primitive (as jax.lax.fft): NumPy's FFTs over the trailing `len(fft_lengths)` dimensions.

Four kinds: FFT and IFFT (complex to complex, IFFT scaled by 1/n), RFFT (real to the
non-negative frequencies) and IRFFT (back to a real signal of the given lengths). All are
linear over the reals, so each has a jvp that applies it to the tangent and a transpose:
FFT and IFFT are their own transposes (the DFT matrix is symmetric), RFFT's transpose pads
the cotangent to full length and takes the real part of its FFT, IRFFT's weighs the IFFT of
the cotangent by 1 (zero and Nyquist frequencies) or 2 (the others, which stand for a
conjugate pair).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.core import ShapedArray, aval_of
from ..interpreters.ad import Zero, jvp_rules, transpose_rules
from .linalg import _batched, _define  # noqa: F401  (shared primitive machinery)

FFT, IFFT, RFFT, IRFFT = "FFT", "IFFT", "RFFT", "IRFFT"


def _complex_dtype(dtype: np.dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.empty((), dtype).real.dtype


def _fft_impl(x: np.ndarray, *, fft_type: str, fft_lengths: tuple[int, ...]) -> np.ndarray:
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == FFT:
        return np.fft.fftn(x, axes=axes).astype(x.dtype, copy=False)
    if fft_type == IFFT:
        return np.fft.ifftn(x, axes=axes).astype(x.dtype, copy=False)
    if fft_type == RFFT:
        return np.fft.rfftn(x, axes=axes).astype(_complex_dtype(x.dtype), copy=False)
    return np.fft.irfftn(x, s=fft_lengths, axes=axes).astype(_real_dtype(x.dtype), copy=False)


def _fft_aval(x: ShapedArray, *, fft_type: str, fft_lengths: tuple[int, ...]) -> ShapedArray:
    lead = x.shape[:x.ndim - len(fft_lengths)]
    if fft_type in (FFT, IFFT):
        return ShapedArray(x.shape, x.dtype)
    if fft_type == RFFT:
        return ShapedArray(lead + tuple(fft_lengths[:-1]) + (fft_lengths[-1] // 2 + 1,), _complex_dtype(x.dtype))
    return ShapedArray(lead + tuple(fft_lengths), _real_dtype(x.dtype))


fft_p = _define("fft", _fft_impl, _fft_aval, core=lambda *, fft_lengths, **_: len(fft_lengths))


def fft(x: Any, fft_type: str, fft_lengths: tuple[int, ...]) -> Any:
    """jax.lax.fft: the transform `fft_type` over the trailing len(fft_lengths) dimensions."""
    fft_type = getattr(fft_type, "name", fft_type).upper()
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=tuple(int(n) for n in fft_lengths))


def _fft_jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
    ans = fft_p.bind(primals[0], **params)
    t = tangents[0]
    return ans, t if isinstance(t, Zero) else fft_p.bind(t, **params)


def _fft_transpose(ct: Any, x: Any, *, fft_type: str, fft_lengths: tuple[int, ...]) -> list[Any]:
    from .. import numpy as jnp

    if isinstance(ct, Zero):
        return [None]
    if fft_type in (FFT, IFFT):
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    if fft_type == RFFT:
        n = fft_lengths[-1]
        pad = [(0, 0)] * (aval_of(ct).ndim - 1) + [(0, n - aval_of(ct).shape[-1])]
        full = fft_p.bind(jnp.pad(ct, pad), fft_type=FFT, fft_lengths=fft_lengths)
        return [jnp.astype(jnp.real(full), x.aval.dtype)]
    n = fft_lengths[-1]
    half = n // 2 + 1
    weights = np.full(half, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    spectrum = fft_p.bind(jnp.astype(ct, x.aval.dtype), fft_type=IFFT, fft_lengths=fft_lengths)
    return [spectrum[..., :half] * weights.astype(_real_dtype(x.aval.dtype))]


jvp_rules[fft_p] = _fft_jvp
transpose_rules[fft_p] = _fft_transpose

__all__ = ["fft", "fft_p", "FFT", "IFFT", "RFFT", "IRFFT"]
