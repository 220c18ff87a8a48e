"""Custom vmap rules (as jax.custom_batching): custom_vmap with def_vmap, and sequential_vmap."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.transforms.custom_batching import custom_vmap, sequential_vmap

__all__ = ["custom_vmap", "sequential_vmap"]
