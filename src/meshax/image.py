"""Image resizing (as jax.image): `resize`, `scale_and_translate` and the `ResizeMethod` kernels."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.nn.image import ResizeMethod, resize, scale_and_translate

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]
