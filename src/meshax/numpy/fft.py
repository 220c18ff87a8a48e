"""meshax.numpy.fft (as jax.numpy.fft)."""
from meshax._src.numpy.fft import *  # noqa: F401,F403
from meshax._src.numpy.fft import __all__  # noqa: F401
