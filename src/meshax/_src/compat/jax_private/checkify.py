"""jax._src.checkify for the alias: meshax's checkify (flax's `nnx.checkify` wraps it)."""
from meshax.experimental.checkify import *  # noqa: F401,F403
