"""Spatial algorithms (as jax.scipy.spatial): the transform submodule of 3-D rotations."""
from meshax.scipy.spatial import transform

__all__ = ["transform"]
