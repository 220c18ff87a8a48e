"""Distributed checkpoints in Orbax's format: Zarr arrays written shard by shard, committed atomically."""
