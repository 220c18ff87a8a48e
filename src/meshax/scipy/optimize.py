"""Unconstrained minimization (as jax.scipy.optimize)."""
from meshax._src.scipy.optimize import OptimizeResults, minimize

__all__ = ["OptimizeResults", "minimize"]
