"""meshax's version (as jax.version)."""
from meshax import __version__

_version = __version__
__all__ = ["__version__"]
