"""SciPy's API on meshax arrays (as jax.scipy): special functions, statistical distributions, linear algebra."""
from meshax.scipy import linalg, special, stats

__all__ = ["linalg", "special", "stats"]
