"""jax._src.core for the alias: meshax's public core names."""
from meshax.core import *  # noqa: F401,F403
from meshax.extend.core import *  # noqa: F401,F403
