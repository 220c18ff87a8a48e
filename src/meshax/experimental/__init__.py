"""Experimental APIs, as in jax.experimental."""
from meshax.experimental import checkify, layout, mesh_utils, multihost_utils, shard_map

__all__ = ["checkify", "layout", "mesh_utils", "multihost_utils", "shard_map"]
