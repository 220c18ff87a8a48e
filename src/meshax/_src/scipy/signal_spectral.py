"""Spectral analysis (as jax.scipy.signal): detrend, the short-time Fourier transform and its inverse, and Welch's
cross and power spectral densities. Segments are gathered with one index array and overlap-added with one
scatter-add, so every function traces, differentiates and batches."""
from __future__ import annotations

import operator
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from .. import numpy as jnp
from ..numpy import _promote_inexact
from ..numpy import fft as _fft


def detrend(data: Any, axis: int = -1, type: str = "linear", bp: int | Sequence[int] | np.ndarray = 0,  # noqa: A002
            overwrite_data: None = None) -> Any:
    """`data` less its mean ('constant') or less its least-squares line on each piece between breakpoints
    `bp` ('linear') along `axis`."""
    if overwrite_data is not None:
        raise NotImplementedError(f"overwrite_data argument not implemented, got {overwrite_data!r}; pass None.")
    if type not in ("constant", "linear"):
        raise ValueError(f"Trend type must be 'linear' or 'constant', got {type!r}.")
    (data,) = _promote_inexact(jnp.asarray(data))
    if type == "constant":
        return data - jnp.mean(data, axis=axis, keepdims=True)
    n = data.shape[axis]
    edges = np.unique(np.concatenate([[0], np.ravel(bp), [n]]).astype(np.int64))
    if edges[0] < 0 or edges[-1] > n:
        raise ValueError(f"Breakpoints must be non-negative and less than length of data along given axis, got "
                         f"bp={bp!r} for length {n}.")
    moved = jnp.moveaxis(data, axis, -1)
    pieces = [_remove_line(moved[..., lo:hi]) for lo, hi in zip(edges[:-1], edges[1:])]
    return jnp.moveaxis(jnp.concatenate(pieces, axis=-1), -1, axis)


def _remove_line(y: Any) -> Any:
    """`y` less its least-squares line along the last axis."""
    n = y.shape[-1]
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2
    norm = float((t * t).sum()) or 1.0
    t = jnp.asarray(t, dtype=y.dtype)
    mean = jnp.mean(y, axis=-1, keepdims=True)
    slope = jnp.sum((y - mean) * t, axis=-1, keepdims=True) / norm
    return y - mean - slope * t


def _window(window: Any, nperseg: int | None, length: int, dtype: Any) -> tuple[Any, int]:
    """The window as an array of `dtype` and the segment length: a named window (or (name, parameters) tuple)
    has `nperseg` points (default the whole signal, at most its length); an array window sets the length."""
    if isinstance(window, (str, tuple)):
        n = length if nperseg is None else int(nperseg)
        if n > length:
            warnings.warn(f"nperseg={n} is greater than input_length={length}, using nperseg={length}")
            n = length
        if window == "hann":
            win = np.ones(1) if n == 1 else np.sin(np.pi * np.arange(n) / n) ** 2
        else:
            from scipy.signal import get_window
            win = get_window(window, n)
        return jnp.asarray(win, dtype=dtype), n
    win = jnp.asarray(window, dtype=dtype)
    n = win.size if nperseg is None else int(nperseg)
    if win.ndim != 1:
        raise ValueError(f"window must be 1-D, got shape {win.shape}.")
    if length < win.size:
        raise ValueError(f"window is longer than input signal ({win.size} > {length}).")
    if n != win.size:
        raise ValueError(f"value specified for nperseg ({n}) is different from length of window ({win.size}).")
    return win, n


def _segments(x: Any, nperseg: int, nstep: int) -> Any:
    """The segments of `x`'s last axis: shape (..., segments, nperseg)."""
    starts = np.arange(0, x.shape[-1] - nperseg + 1, nstep)
    return x[..., starts[:, None] + np.arange(nperseg)]


def _pad_ends(x: Any, n: int, boundary: str | None) -> Any:
    """`x` extended by n points at both ends of its last axis: 'zeros', 'constant' (edge), 'even' (reflect),
    'odd' (point-reflected) or None (unchanged)."""
    if boundary is None or n < 1 and boundary == "odd":
        return x
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary == "zeros":
        return jnp.pad(x, widths)
    if boundary == "constant":
        return jnp.pad(x, widths, mode="edge")
    if boundary == "even":
        return jnp.pad(x, widths, mode="reflect")
    if n > x.shape[-1] - 1:
        raise ValueError(f"The extension length n ({n}) is too big. It must not exceed x.shape[axis]-1, which is "
                         f"{x.shape[-1] - 1}.")
    return jnp.pad(x, widths, mode="reflect", reflect_type="odd")


_BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def _detrender(detrend_type: Any) -> Callable[[Any], Any]:
    """The function applied to each segment (last axis) before windowing."""
    if isinstance(detrend_type, str):
        return lambda d: detrend(d, type=detrend_type, axis=-1)
    if callable(detrend_type):
        return detrend_type
    if not detrend_type:
        return lambda d: d
    raise ValueError(f"Unsupported detrend type: {detrend_type!r}; pass 'constant', 'linear', False or a callable.")


def _windowed_fft(x: Any, win: Any, detrend_func: Callable[[Any], Any], nperseg: int, nstep: int, nfft: int,
                  twosided: bool) -> Any:
    """The FFTs of the detrended, windowed segments of x's last axis: shape (..., segments, frequencies)."""
    if x.dtype.kind == "i":
        x = x.astype(win.dtype)
    frames = x[..., None] if nperseg == 1 and nstep == 1 else _segments(x, nperseg, nstep)
    frames = detrend_func(frames)
    if jnp.iscomplexobj(win) and not jnp.iscomplexobj(frames):
        frames = frames.astype(jnp.result_type(frames.dtype, np.complex64))
    frames = win * frames
    return _fft.fft(frames, n=nfft) if twosided else _fft.rfft(jnp.real(frames), n=nfft)


def _complex_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.complex128) if dtype in (np.float64, np.complex128) else np.dtype(np.complex64)


def _spectral(x: Any, y: Any, fs: Any, window: Any, nperseg: Any, noverlap: Any, nfft: Any, detrend_type: Any,
              return_onesided: bool, scaling: str, axis: int, stft_mode: bool, boundary: str | None = None,
              padded: bool = False) -> tuple[Any, Any, Any]:
    """(frequencies, segment times, spectra) of x (with y: the cross spectra conj(X)·Y; stft_mode: the scaled
    FFTs themselves), frequencies moved to `axis` and segments last."""
    if boundary not in _BOUNDARIES:
        raise ValueError(f"Unknown boundary option '{boundary}', must be one of: {list(_BOUNDARIES)}")
    x = jnp.asarray(x)
    axis = operator.index(axis)
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise ValueError(f"axis {axis} is out of bounds for an array of rank {x.ndim}.")
    axis %= max(x.ndim, 1)
    if y is None:
        (x,) = _promote_inexact(x)
        outer = x.shape[:axis] + x.shape[axis + 1:]
    else:
        x, y = _promote_inexact(x, jnp.asarray(y))
        if x.ndim != y.ndim:
            raise ValueError(f"two-arguments must have the same rank ({x.ndim} vs {y.ndim}).")
        try:
            outer = np.broadcast_shapes(x.shape[:axis] + x.shape[axis + 1:], y.shape[:axis] + y.shape[axis + 1:])
        except ValueError as err:
            raise ValueError(f"x and y cannot be broadcast together, got shapes {x.shape} and {y.shape}.") from err
    result_dtype = _complex_dtype(x.dtype)
    freq_dtype = np.dtype(np.float64 if result_dtype == np.complex128 else np.float32)
    if nperseg is not None and int(nperseg) < 1:
        raise ValueError(f"nperseg must be a positive integer, got {nperseg!r}.")
    win, nperseg = _window(window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    nfft = nperseg if nfft is None else int(nfft)
    if y is None and x.size == 0:
        return (jnp.zeros(x.shape, freq_dtype), jnp.zeros(x.shape, freq_dtype), jnp.zeros(x.shape, result_dtype))
    if y is not None and (x.size == 0 or y.size == 0):
        shape = outer[:axis] + (min(x.shape[axis], y.shape[axis]),) + outer[axis:]
        return jnp.zeros(shape, freq_dtype), jnp.zeros(shape, freq_dtype), jnp.zeros(shape, result_dtype)
    x = jnp.moveaxis(x, axis, -1)
    if y is not None:
        y = jnp.moveaxis(y, axis, -1)
        longest = max(x.shape[-1], y.shape[-1])
        x, y = (jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, longest - v.shape[-1])]) for v in (x, y))
    if nfft < nperseg:
        raise ValueError(f"nfft must be greater than or equal to nperseg, got nfft={nfft}, nperseg={nperseg}.")
    if noverlap >= nperseg:
        raise ValueError(f"noverlap must be less than nperseg, got noverlap={noverlap}, nperseg={nperseg}.")
    nstep = nperseg - noverlap
    signals = [v for v in (x, y) if v is not None]
    signals = [_pad_ends(v, nperseg // 2, boundary) for v in signals]
    if padded:
        extra = (-(signals[0].shape[-1] - nperseg) % nstep) % nperseg
        signals = [jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, extra)]) for v in signals]
    detrend_func = _detrender(detrend_type)
    if scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / jnp.sum(win) ** 2
    else:
        raise ValueError(f"Unknown scaling: {scaling!r}; pass 'density' or 'spectrum'.")
    if stft_mode:
        scale = jnp.sqrt(scale)
    twosided = not return_onesided
    if return_onesided and any(jnp.iscomplexobj(v) for v in signals):
        twosided = True
        warnings.warn("Input data is complex, switching to return_onesided=False")
    ticks = np.fft.fftfreq(nfft) * nfft if twosided else np.arange(nfft // 2 + 1)
    freqs = (jnp.asarray(ticks, freq_dtype) * (jnp.asarray(fs) / nfft)).astype(freq_dtype)
    spectra = [_windowed_fft(v, win, detrend_func, nperseg, nstep, nfft, twosided) for v in signals]
    if y is not None:
        result = jnp.conj(spectra[0]) * spectra[1]
    elif not stft_mode:
        result = jnp.conj(spectra[0]) * spectra[0]
    else:
        result = spectra[0]
    result = result * scale.astype(_complex_dtype(np.dtype(scale.dtype)))
    if not twosided and not stft_mode:
        doubled = np.ones(result.shape[-1])
        doubled[1:None if nfft % 2 else -1] = 2
        result = result * jnp.asarray(doubled, dtype=freq_dtype)
    length = signals[0].shape[-1]
    ticks = np.arange(nperseg / 2, length - nperseg / 2 + 1, nstep, dtype=np.float64)
    if boundary is not None:
        ticks = ticks - nperseg / 2
    time = (jnp.asarray(ticks, freq_dtype) / fs).astype(freq_dtype)
    result = result.astype(result_dtype)
    if y is None and not stft_mode:
        result = jnp.real(result)
    return freqs, time, jnp.moveaxis(result, -1, axis)


def stft(x: Any, fs: Any = 1.0, window: str = "hann", nperseg: int = 256, noverlap: int | None = None,
         nfft: int | None = None, detrend: bool = False, return_onesided: bool = True,
         boundary: str | None = "zeros", padded: bool = True, axis: int = -1) -> tuple[Any, Any, Any]:
    """The short-time Fourier transform of x along `axis`: (frequencies, segment times, Zxx)."""
    return _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, "spectrum", axis,
                     stft_mode=True, boundary=boundary, padded=padded)


def _median_bias(n: int) -> float:
    """How much the median of n exponentially distributed periodograms underestimates their mean."""
    k = np.arange(2.0, n, 2)
    return float(1 + np.sum(1.0 / (k + 1) - 1.0 / k))


def csd(x: Any, y: Any, fs: Any = 1.0, window: str = "hann", nperseg: int | None = None,
        noverlap: int | None = None, nfft: int | None = None, detrend: str = "constant",
        return_onesided: bool = True, scaling: str = "density", axis: int = -1,
        average: str = "mean") -> tuple[Any, Any]:
    """Welch's estimate of the cross power spectral density of x and y (y=None: of x with itself):
    (frequencies, Pxy), the segments' periodograms averaged by 'mean' or 'median'."""
    freqs, _, pxy = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
                              axis, stft_mode=False)
    if pxy.ndim >= 2 and pxy.size > 0:
        if pxy.shape[-1] > 1:
            if average == "median":
                bias = _median_bias(pxy.shape[-1])
                if jnp.iscomplexobj(pxy):
                    pxy = jnp.median(jnp.real(pxy), axis=-1) + 1j * jnp.median(jnp.imag(pxy), axis=-1)
                else:
                    pxy = jnp.median(pxy, axis=-1)
                pxy = pxy / jnp.asarray(bias, dtype=pxy.dtype)
            elif average == "mean":
                pxy = jnp.mean(pxy, axis=-1)
            else:
                raise ValueError(f'average must be "median" or "mean", got {average}')
        else:
            pxy = jnp.reshape(pxy, pxy.shape[:-1])
    return freqs, pxy


def welch(x: Any, fs: Any = 1.0, window: str = "hann", nperseg: int | None = None, noverlap: int | None = None,
          nfft: int | None = None, detrend: str = "constant", return_onesided: bool = True,
          scaling: str = "density", axis: int = -1, average: str = "mean") -> tuple[Any, Any]:
    """Welch's estimate of the power spectral density of x: (frequencies, Pxx)."""
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap, nfft=nfft,
                     detrend=detrend, return_onesided=return_onesided, scaling=scaling, axis=axis,
                     average=average)
    return freqs, jnp.real(pxx)


def _overlap_add(frames: Any, nstep: int) -> Any:
    """Frames (..., count, length) summed into one signal, frame i starting at i * nstep."""
    count, length = frames.shape[-2:]
    out = jnp.zeros(frames.shape[:-2] + (nstep * (count - 1) + length,), frames.dtype)
    index = (np.arange(count)[:, None] * nstep + np.arange(length)).reshape(-1)
    return out.at[..., index].add(jnp.reshape(frames, frames.shape[:-2] + (count * length,)))


def _axis(axis: int, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of rank {ndim}.")
    return axis % ndim


def istft(Zxx: Any, fs: Any = 1.0, window: str = "hann", nperseg: int | None = None,  # noqa: N803
          noverlap: int | None = None, nfft: int | None = None, input_onesided: bool = True,
          boundary: bool = True, time_axis: int = -1, freq_axis: int = -2) -> tuple[Any, Any]:
    """The inverse short-time Fourier transform: (times, x) from the STFT Zxx, by windowed overlap-add."""
    zxx = jnp.asarray(Zxx)
    if zxx.ndim < 2:
        raise ValueError(f"Input stft must be at least 2d!, got shape {zxx.shape}.")
    freq_axis, time_axis = _axis(freq_axis, zxx.ndim), _axis(time_axis, zxx.ndim)
    if freq_axis == time_axis:
        raise ValueError(f"Must specify differing time and frequency axes!, got both {time_axis}.")
    zxx = zxx.astype(_complex_dtype(zxx.dtype))
    n_default = 2 * (zxx.shape[freq_axis] - 1) if input_onesided else zxx.shape[freq_axis]
    nperseg = int(nperseg or n_default)
    if nperseg < 1:
        raise ValueError(f"nperseg must be a positive integer, got {nperseg}.")
    size = n_default + (1 if input_onesided and nperseg == n_default + 1 else 0) if nfft is None else int(nfft)
    if size < nperseg:
        raise ValueError(f"FFT length ({size}) must be longer than nperseg ({nperseg}).")
    noverlap = int(noverlap or nperseg // 2)
    if noverlap >= nperseg:
        raise ValueError(f"noverlap must be less than nperseg, got noverlap={noverlap}, nperseg={nperseg}.")
    outer = [d for d in range(zxx.ndim) if d not in (freq_axis, time_axis)]
    zxx = jnp.transpose(zxx, outer + [time_axis, freq_axis])
    inverse = _fft.irfft if input_onesided else _fft.ifft
    frames = inverse(zxx, n=None if nfft is None else size, axis=-1)[..., :nperseg]
    if isinstance(window, (str, tuple)):
        win, _ = _window(window, nperseg, nperseg, frames.dtype)
    else:
        win = jnp.asarray(window)
        if win.ndim != 1:
            raise ValueError(f"window must be 1-D, got shape {win.shape}.")
        if win.shape[0] != nperseg:
            raise ValueError(f"window must have length of {nperseg}, got {win.shape[0]}.")
    if frames.shape[-1] != nperseg:
        raise TypeError(f"the inverse FFTs have {frames.shape[-1]} points, fewer than nperseg={nperseg}; pass "
                        f"nfft={nperseg} (an odd nperseg needs it).")
    frames = frames * jnp.sum(win)
    nstep = nperseg - noverlap
    x = _overlap_add(frames * win, nstep)
    norm = _overlap_add(jnp.broadcast_to(win * win, (frames.shape[-2], nperseg)), nstep)
    if boundary:
        half = nperseg // 2
        x, norm = x[..., half:-half], norm[..., half:-half]
    x = x / jnp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != zxx.ndim - 1:
        x = jnp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    time = jnp.arange(x.shape[0], dtype=np.finfo(x.dtype).dtype) / fs
    return time, x
