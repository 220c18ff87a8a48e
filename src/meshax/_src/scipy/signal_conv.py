"""Convolution and correlation (as jax.scipy.signal): direct N-D convolutions through lax.conv_general_dilated,
FFT convolutions through jnp.fft."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from .. import numpy as jnp
from ..lax import conv as _conv
from ..numpy import _promote_inexact
from ..numpy import fft as _fft

_MODES = ("full", "same", "valid")


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of ['full', 'same', 'valid'], got mode={mode!r}.")


def _window(n1: int, n2: int, mode: str, same_start: int) -> tuple[int, int]:
    """(start, length) of the `mode` output inside the full convolution of lengths n1 and n2 along one axis."""
    if mode == "full":
        return 0, n1 + n2 - 1
    if mode == "same":
        return same_start, n1
    return min(n1, n2) - 1, abs(n1 - n2) + 1


def _direct(in1: Any, in2: Any, mode: str, precision: Any, same_starts: Sequence[int] | None = None) -> Any:
    """The N-D convolution of in1 and in2 (same rank, one no larger than the other in every dimension), its
    `mode` part; `same_starts` overrides where each axis's 'same' window begins in the full result."""
    _check_mode(mode)
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    if in1.ndim != in2.ndim:
        raise ValueError(f"in1 and in2 must have the same number of dimensions, got shapes {in1.shape} and "
                         f"{in2.shape}.")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes {in1.shape} and {in2.shape}.")
    in1, in2 = _promote_inexact(in1, in2)
    s1, s2 = in1.shape, in2.shape
    if not (all(a >= b for a, b in zip(s1, s2)) or all(a <= b for a, b in zip(s1, s2))):
        raise ValueError(f"One input must be smaller than the other in every dimension, got shapes {s1} and {s2}.")
    starts = same_starts if same_starts is not None else [(b - 1) // 2 for b in s2]
    big, small = (in1, in2) if all(a >= b for a, b in zip(s1, s2)) else (in2, in1)
    padding = []
    for n1, n2, k, start in zip(s1, s2, small.shape, starts):
        lo, length = _window(n1, n2, mode, start)
        padding.append((k - 1 - lo, lo + length - (n1 + n2 - 1) + k - 1))
    out = _conv.conv_general_dilated(big[None, None], jnp.flip(small)[None, None], (1,) * big.ndim, padding,
                                     precision=precision)
    return out[0, 0]


def _check_method(method: str) -> None:
    if method not in ("auto", "fft", "direct"):
        raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")


def convolve(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """The N-dimensional convolution of in1 and in2 ('full', 'same' as in1, or 'valid'), directly or by FFT."""
    _check_method(method)
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    return _direct(in1, in2, mode, precision)


def correlate(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """The N-dimensional cross-correlation of in1 and in2: in1 convolved with in2 reversed and conjugated."""
    _check_method(method)
    in2 = jnp.flip(jnp.conj(jnp.asarray(in2)))
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    return _direct(in1, in2, mode, precision)


def _check_2d(name: str, in1: Any, in2: Any, boundary: str, fillvalue: Any) -> None:
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0, got boundary={boundary!r}, "
                                  f"fillvalue={fillvalue!r}.")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs, got shapes {np.shape(in1)} and "
                         f"{np.shape(in2)}.")


def convolve2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: float = 0,
               precision: Any = None) -> Any:
    """The 2-D convolution of in1 and in2 (only boundary='fill' with fillvalue 0)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _direct(in1, in2, mode, precision)


def correlate2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: float = 0,
                precision: Any = None) -> Any:
    """The 2-D cross-correlation of in1 and in2 (only boundary='fill' with fillvalue 0); as SciPy's, its 'same'
    window is centred at in2's length // 2 and its 'valid' result for a larger in2 is in2 correlated with in1."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    if mode == "valid" and in1.shape != in2.shape and all(a <= b for a, b in zip(in1.shape, in2.shape)):
        return _direct(jnp.flip(in2), jnp.conj(in1), mode, precision)
    starts = [b // 2 for b in in2.shape]
    return _direct(in1, jnp.flip(jnp.conj(in2)), mode, precision, same_starts=starts)


def _fft_axes(in1: Any, in2: Any, axes: Any) -> tuple[int, ...]:
    """The convolved axes (normalized); every other axis must have the same length in both inputs."""
    if in1.ndim != in2.ndim:
        raise ValueError(f"in1 and in2 should have the same dimensionality, got shapes {in1.shape} and "
                         f"{in2.shape}.")
    if axes is None:
        return tuple(range(in1.ndim))
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    axes = tuple(sorted({operator.index(a) % max(in1.ndim, 1) for a in axes}))
    mapped = [d for d in range(in1.ndim) if d not in axes]
    if any(in1.shape[d] != in2.shape[d] for d in mapped):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={in1.shape} in2.shape={in2.shape} "
                         f"axes={axes}.")
    return axes


def fftconvolve(in1: Any, in2: Any, mode: str = "full", axes: Sequence[int] | None = None) -> Any:
    """The convolution of in1 and in2 along `axes` (default all) computed with FFTs."""
    _check_mode(mode)
    in1, in2 = _promote_inexact(jnp.asarray(in1), jnp.asarray(in2))
    if in1.dtype.kind == "f" and in1.dtype.itemsize < 4:
        raise ValueError(f"RFFT input must be float32 or float64, got {in1.dtype}; cast the inputs to float32.")
    axes = _fft_axes(in1, in2, axes)
    if mode == "valid":
        s1, s2 = [in1.shape[a] for a in axes], [in2.shape[a] for a in axes]
        if not all(a >= b for a, b in zip(s1, s2)):
            if not all(a <= b for a, b in zip(s1, s2)):
                raise ValueError(f"For 'valid' mode, One input must be at least as large as the other in every "
                                 f"dimension, got shapes {in1.shape} and {in2.shape}.")
            in1, in2 = in2, in1
    full = [in1.shape[a] + in2.shape[a] - 1 for a in axes]
    if jnp.iscomplexobj(in1):
        out = _fft.ifftn(_fft.fftn(in1, s=full, axes=axes) * _fft.fftn(in2, s=full, axes=axes), s=full, axes=axes)
    else:
        out = _fft.irfftn(_fft.rfftn(in1, s=full, axes=axes) * _fft.rfftn(in2, s=full, axes=axes), s=full,
                          axes=axes)
    index = [slice(None)] * out.ndim
    for a, n1 in zip(axes, [in1.shape[a] for a in axes]):
        start, length = _window(n1, in2.shape[a], mode, (in2.shape[a] - 1) // 2)
        index[a] = slice(start, start + length)
    return out[tuple(index)].astype(in1.dtype)
