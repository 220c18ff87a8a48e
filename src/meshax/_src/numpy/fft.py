"""meshax.numpy.fft: jax.numpy.fft's API on the fft primitive (lax/fft.py).

The transformed axes are moved last, cut or zero-padded to the requested lengths, the
primitive applied, and the axes moved back; `norm` ("backward", "ortho", "forward") scales
the result. Real inputs give complex64 spectra (complex128 with x64), as JAX.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from .. import numpy as jnp
from ..core import dtypes
from ..core.core import aval_of
from ..lax import fft as F
from .promotion import ArrayLike, _as_array, _lift, _promote_inexact as _promote_host, _shape
from ..core.dtypes import issubdtype


def _promote_inexact(*args: Any) -> list[Any]:
    """The arguments promoted to one inexact dtype, as arrays (host values placed on the default device)."""
    return [_as_array(x) for x in _promote_host(*args)]


def _as_complex(x: Any) -> Any:
    (x,) = _promote_inexact(x)
    dtype = aval_of(x).dtype
    return x if issubdtype(dtype, np.complexfloating) else x.astype(np.result_type(dtype, np.complex64))


def _as_real(x: Any) -> Any:
    (x,) = _promote_inexact(x)
    if issubdtype(aval_of(x).dtype, np.complexfloating):
        raise TypeError(f"rfft requires a real-valued input; got {aval_of(x).dtype}.")
    return x


def _resize(x: Any, axis: int, n: int) -> Any:
    """`x` cut or zero-padded to length n along `axis`."""
    size = _shape(x)[axis]
    if n < size:
        return _slice(x, axis, n)
    if n > size:
        widths = [(0, 0)] * len(_shape(x))
        widths[axis] = (0, n - size)
        return jnp.pad(x, widths)
    return x


def _slice(x: Any, axis: int, n: int) -> Any:
    index = [slice(None)] * len(_shape(x))
    index[axis] = slice(0, n)
    return x[tuple(index)]


def _axes_and_lengths(x: Any, s: Sequence[int] | None, axes: Sequence[int] | None) -> tuple[list[int], list[int]]:
    nd = len(_shape(x))
    if axes is None:
        axes = list(range(nd)) if s is None else list(range(nd - len(s), nd))
    axes = [operator.index(a) % nd for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"jax.numpy.fft functions require unique axes, got {axes}")
    if s is None:
        s = [_shape(x)[a] for a in axes]
    elif len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    return axes, [operator.index(n) for n in s]


def _scale(y: Any, lengths: Sequence[int], norm: str | None, inverse: bool) -> Any:
    if norm in (None, "backward"):
        return y
    n = float(np.prod(lengths))
    if norm == "ortho":
        factor = np.sqrt(n) if inverse else 1 / np.sqrt(n)
    elif norm == "forward":
        factor = n if inverse else 1 / n
    else:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    return y * np.asarray(factor, np.empty((), aval_of(y).dtype).real.dtype)


def _transform(x: Any, kind: str, s: Sequence[int] | None, axes: Sequence[int] | None, norm: str | None) -> Any:
    x = _as_real(x) if kind == F.RFFT else _as_complex(x)
    axes, lengths = _axes_and_lengths(x, s, axes)
    if not axes:
        return x
    for axis, n in zip(axes[:-1] if kind == F.IRFFT else axes, lengths):
        x = _resize(x, axis, n)
    if kind == F.IRFFT:
        x = _resize(x, axes[-1], lengths[-1] // 2 + 1)
    k = len(axes)
    nd = len(_shape(x))
    ends = list(range(nd - k, nd))
    y = F.fft(jnp.moveaxis(x, axes, ends), kind, tuple(lengths))
    y = jnp.moveaxis(y, ends, axes)
    return _scale(y, lengths, norm, kind in (F.IFFT, F.IRFFT))


def _one(kind: str):
    def transform(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
        a = _lift(a)
        if kind == F.IRFFT and n is None:
            n = 2 * (_shape(a)[axis] - 1)
        return _transform(a, kind, None if n is None else [n], [axis], norm)

    return transform


def _many(kind: str, default_axes: Sequence[int] | None):
    def transform(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = default_axes,
                  norm: str | None = None) -> Any:
        a = _lift(a)
        if kind == F.IRFFT and s is None:
            nd = len(_shape(a))
            ax = list(range(nd)) if axes is None else [x % nd for x in axes]
            s = [_shape(a)[x] for x in ax[:-1]] + [2 * (_shape(a)[ax[-1]] - 1)]
            axes = ax
        return _transform(a, kind, s, axes, norm)

    return transform


fft = _one(F.FFT)
ifft = _one(F.IFFT)
rfft = _one(F.RFFT)
irfft = _one(F.IRFFT)
fftn = _many(F.FFT, None)
ifftn = _many(F.IFFT, None)
rfftn = _many(F.RFFT, None)
irfftn = _many(F.IRFFT, None)
fft2 = _many(F.FFT, (-2, -1))
ifft2 = _many(F.IFFT, (-2, -1))
rfft2 = _many(F.RFFT, (-2, -1))
irfft2 = _many(F.IRFFT, (-2, -1))
for _f, _name, _what in [(fft, "fft", "1-D discrete Fourier transform"), (ifft, "ifft", "1-D inverse DFT"),
                         (rfft, "rfft", "1-D DFT of a real signal (non-negative frequencies)"),
                         (irfft, "irfft", "inverse of rfft"), (fftn, "fftn", "N-D DFT"), (ifftn, "ifftn", "N-D inverse DFT"),
                         (rfftn, "rfftn", "N-D DFT of a real signal"), (irfftn, "irfftn", "inverse of rfftn"),
                         (fft2, "fft2", "2-D DFT"), (ifft2, "ifft2", "2-D inverse DFT"),
                         (rfft2, "rfft2", "2-D DFT of a real signal"), (irfft2, "irfft2", "inverse of rfft2")]:
    _f.__name__ = _f.__qualname__ = _name
    _f.__doc__ = f"The {_what}, as numpy.fft.{_name}."


def hfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The DFT of a signal with Hermitian symmetry (a real spectrum)."""
    a = _lift(a)
    if n is None:
        n = 2 * (_shape(a)[axis] - 1)
    flipped = {"backward": "forward", None: "forward", "forward": "backward", "ortho": "ortho"}[norm]
    return irfft(jnp.conj(_as_complex(a)), n, axis, flipped)


def ihfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of hfft."""
    flipped = {"backward": "forward", None: "forward", "forward": "backward", "ortho": "ortho"}[norm]
    return jnp.conj(rfft(a, n, axis, flipped))


def fftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies of an n-point DFT with sample spacing d."""
    dtype = dtypes.default_float_dtype() if dtype is None else dtype
    n = operator.index(n)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)]) if n else np.zeros(0)
    return jnp.asarray(k, dtype=dtype) / (jnp.asarray(d, dtype=dtype) * n)


def rfftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """Sample frequencies of rfft's output for an n-point signal with spacing d."""
    dtype = dtypes.default_float_dtype() if dtype is None else dtype
    n = operator.index(n)
    return jnp.arange(n // 2 + 1, dtype=dtype) / (jnp.asarray(d, dtype=dtype) * n)


def fftshift(x: ArrayLike, axes: None | int | Sequence[int] = None) -> Any:
    """Moves the zero frequency to the middle."""
    x = _lift(x)
    axes = list(range(len(_shape(x)))) if axes is None else [axes] if isinstance(axes, int) else list(axes)
    return jnp.roll(x, [_shape(x)[a] // 2 for a in axes], axes)


def ifftshift(x: ArrayLike, axes: None | int | Sequence[int] = None) -> Any:
    """The inverse of fftshift."""
    x = _lift(x)
    axes = list(range(len(_shape(x)))) if axes is None else [axes] if isinstance(axes, int) else list(axes)
    return jnp.roll(x, [-(_shape(x)[a] // 2) for a in axes], axes)


__all__ = ["fft", "ifft", "rfft", "irfft", "fftn", "ifftn", "rfftn", "irfftn", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
