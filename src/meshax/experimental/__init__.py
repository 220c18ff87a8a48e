"""Experimental APIs, as in jax.experimental."""
from meshax._src.transforms.callbacks import io_callback
from meshax.experimental import mesh_utils, multihost_utils, shard_map

__all__ = ["io_callback", "mesh_utils", "multihost_utils", "shard_map"]
