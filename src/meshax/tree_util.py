"""Pytree utilities, mirroring ``jax.tree_util``."""
from meshax._src.tree_util import *  # noqa: F401,F403
from meshax._src.tree_util import __all__  # noqa: F401
