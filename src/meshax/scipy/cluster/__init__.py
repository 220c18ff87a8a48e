"""Clustering (as jax.scipy.cluster): the vq submodule."""
from meshax.scipy.cluster import vq

__all__ = ["vq"]
