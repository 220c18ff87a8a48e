"""jax.version for the alias: the JAX API level meshax follows."""
from meshax._src.compat.jax_alias import JAX_API_VERSION as __version__  # noqa: F401
from meshax._src.compat.jax_alias import JAX_API_VERSION_INFO as __version_info__  # noqa: F401

_version = __version__
