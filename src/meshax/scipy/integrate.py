"""Numerical integration (as jax.scipy.integrate)."""
from meshax._src.scipy.integrate import trapezoid

__all__ = ["trapezoid"]
