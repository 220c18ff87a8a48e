"""Debugging helpers: drawing how arrays are sharded."""
from meshax._src import methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.visualize import visualize_array_sharding, visualize_sharding

__all__ = ["visualize_array_sharding", "visualize_sharding"]
