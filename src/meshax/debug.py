"""Debugging helpers: drawing how arrays are sharded."""
from meshax._src.visualize import visualize_array_sharding, visualize_sharding

__all__ = ["visualize_array_sharding", "visualize_sharding"]
