"""Vector quantization (as jax.scipy.cluster.vq)."""
from meshax._src.scipy.cluster import vq

__all__ = ["vq"]
