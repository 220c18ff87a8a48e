"""Experimental APIs, as in jax.experimental."""
from meshax.experimental import mesh_utils, multihost_utils, shard_map

__all__ = ["mesh_utils", "multihost_utils", "shard_map"]
