"""Linear algebra primitives (as jax.lax.linalg): decompositions, triangular and tridiagonal solves, and their
enums."""
from meshax._src.lax.linalg_api import *  # noqa: F401,F403
from meshax._src.lax.linalg_api import __all__  # noqa: F401
