"""Interpolation on regular grids (as jax.scipy.interpolate)."""
from meshax._src.scipy.interpolate import RegularGridInterpolator

__all__ = ["RegularGridInterpolator"]
