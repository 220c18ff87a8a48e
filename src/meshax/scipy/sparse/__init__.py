"""Sparse linear algebra (as jax.scipy.sparse): the linalg submodule of iterative solvers."""
from meshax.scipy.sparse import linalg

__all__ = ["linalg"]
