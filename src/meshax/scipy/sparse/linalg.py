"""Iterative linear solvers (as jax.scipy.sparse.linalg)."""
from meshax._src.scipy.sparse_linalg import bicgstab, cg, gmres

__all__ = ["bicgstab", "cg", "gmres"]
