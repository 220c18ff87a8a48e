"""Discrete cosine transforms (as jax.scipy.fft)."""
from meshax._src.scipy.fft import dct, dctn, idct, idctn

__all__ = ["dct", "dctn", "idct", "idctn"]
