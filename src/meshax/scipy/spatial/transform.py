"""3-D rotations (as jax.scipy.spatial.transform)."""
from meshax._src.scipy.spatial_transform import Rotation, Slerp

__all__ = ["Rotation", "Slerp"]
