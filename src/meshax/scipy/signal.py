"""Signal processing (as jax.scipy.signal): convolution, correlation, detrending and spectral analysis."""
from meshax._src.scipy.signal_conv import convolve, convolve2d, correlate, correlate2d, fftconvolve
from meshax._src.scipy.signal_spectral import csd, detrend, istft, stft, welch

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend", "fftconvolve", "istft", "stft",
           "welch"]
