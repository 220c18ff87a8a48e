"""Experimental APIs, as in jax.experimental."""
from meshax.experimental import multihost_utils, shard_map

__all__ = ["multihost_utils", "shard_map"]
