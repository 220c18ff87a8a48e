"""Image interpolation (as jax.scipy.ndimage)."""
from meshax._src.scipy.ndimage import map_coordinates

__all__ = ["map_coordinates"]
