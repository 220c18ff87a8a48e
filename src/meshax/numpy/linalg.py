"""meshax.numpy.linalg (as jax.numpy.linalg)."""
from meshax._src.numpy.linalg import *  # noqa: F401,F403
from meshax._src.numpy.linalg import __all__  # noqa: F401
