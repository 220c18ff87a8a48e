"""Discrete cosine transforms (as jax.scipy.fft): type II and its inverse, along one axis or several, computed
with one FFT of the reordered signal (Makhoul's algorithm)."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from .. import numpy as jnp
from ..numpy import fft as _fft


def _check(type: int, norm: str | None) -> None:  # noqa: A002
    if type != 2:
        raise NotImplementedError(f"Only DCT type 2 is implemented, got type={type}.")
    if norm not in (None, "ortho", "backward"):
        raise ValueError(f"jax.scipy.fft.dct: norm={norm!r} is not implemented; pass None, 'backward' or 'ortho'.")


def _canonical_axis(axis: int, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _resize(x: Any, n: int | None, axis: int) -> Any:
    """x truncated or zero-padded to n points along axis."""
    if n is None or n == x.shape[axis]:
        return x
    if n < 1:
        raise TypeError(f"the transform length n must be positive, got n={n}.")
    if n < x.shape[axis]:
        return jnp.take(x, np.arange(n), axis=axis)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, n - x.shape[axis])
    return jnp.pad(x, widths)


def _inexact(x: Any) -> Any:
    x = jnp.asarray(x)
    if x.dtype.kind in "biu" or (x.dtype.kind == "f" and x.dtype.itemsize < 4):
        return x.astype(np.float32)
    return x


def _ortho_scale(n: int, dtype: Any) -> Any:
    """The factors taking SciPy's unnormalized DCT-II to the orthonormal one."""
    scale = np.full(n, np.sqrt(1.0 / (2 * n)))
    scale[0] = np.sqrt(1.0 / (4 * n))
    return jnp.asarray(scale, dtype=dtype)


def _complex(dtype: Any) -> np.dtype:
    return np.dtype(np.complex128 if dtype == np.float64 else np.complex64)


def _dct_last(x: Any, norm: str | None) -> Any:
    """The DCT-II of a real x along its last axis."""
    n = x.shape[-1]
    v = jnp.concatenate([x[..., ::2], jnp.flip(x[..., 1::2], axis=-1)], axis=-1)
    twiddle = np.exp(-1j * np.pi * np.arange(n) / (2 * n))
    out = 2 * jnp.real(_fft.fft(v, axis=-1) * jnp.asarray(twiddle, dtype=_complex(x.dtype)))
    out = out.astype(x.dtype)
    return out * _ortho_scale(n, x.dtype) if norm == "ortho" else out


def _idct_last(x: Any, norm: str | None) -> Any:
    """The inverse of the DCT-II of a real x along its last axis."""
    n = x.shape[-1]
    if norm == "ortho":
        x = x / _ortho_scale(n, x.dtype)
    mirrored = jnp.concatenate([jnp.zeros_like(x[..., :1]), jnp.flip(x[..., 1:], axis=-1)], axis=-1)
    twiddle = jnp.asarray(np.exp(1j * np.pi * np.arange(n) / (2 * n)) / 2, dtype=_complex(x.dtype))
    v = jnp.real(_fft.ifft((x - 1j * mirrored) * twiddle, axis=-1)).astype(x.dtype)
    half = (n + 1) // 2
    order = np.empty(n, dtype=np.int64)
    order[::2] = np.arange(half)
    order[1::2] = np.arange(n - 1, half - 1, -1)
    return v[..., order]


def _along(transform: Any, x: Any, axis: int, norm: str | None) -> Any:
    """`transform` (a last-axis real DCT) of x along axis; complex x transforms its two parts."""
    x = jnp.moveaxis(x, axis, -1)
    if jnp.iscomplexobj(x):
        out = transform(jnp.real(x), norm) + 1j * transform(jnp.imag(x), norm)
        out = out.astype(x.dtype)
    else:
        out = transform(x, norm)
    return jnp.moveaxis(out, -1, axis)


def dct(x: Any, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:  # noqa: A002
    """The discrete cosine transform (type II) of x along axis, truncated or zero-padded to n points."""
    _check(type, norm)
    x = _inexact(x)
    axis = _canonical_axis(axis, x.ndim)
    return _along(_dct_last, _resize(x, n, axis), axis, norm)


def idct(x: Any, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:  # noqa: A002
    """The inverse of the type II discrete cosine transform of x along axis."""
    _check(type, norm)
    x = _inexact(x)
    axis = _canonical_axis(axis, x.ndim)
    return _along(_idct_last, _resize(x, n, axis), axis, norm)


def _axes_and_sizes(x: Any, s: Sequence[int] | None, axes: Sequence[int] | None) -> list[tuple[int, Any]]:
    """(axis, size) pairs: `axes` (default the last len(s) axes, or all) paired with `s` (default: unchanged)."""
    if axes is None:
        axes = range(x.ndim) if s is None else range(x.ndim - len(s), x.ndim)
    axes = [_canonical_axis(a, x.ndim) for a in axes]
    sizes = [None] * len(axes) if s is None else list(s)
    return list(zip(axes, sizes))


def dctn(x: Any, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,  # noqa: A002
         norm: str | None = None) -> Any:
    """The type II discrete cosine transform of x over several axes (default all), sizes `s`."""
    _check(type, norm)
    x = _inexact(x)
    for axis, size in _axes_and_sizes(x, s, axes):
        x = _along(_dct_last, _resize(x, size, axis), axis, norm)
    return x


def idctn(x: Any, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,  # noqa: A002
          norm: str | None = None) -> Any:
    """The inverse of dctn over several axes (default all), sizes `s`."""
    _check(type, norm)
    x = _inexact(x)
    for axis, size in _axes_and_sizes(x, s, axes):
        x = _along(_idct_last, _resize(x, size, axis), axis, norm)
    return x
