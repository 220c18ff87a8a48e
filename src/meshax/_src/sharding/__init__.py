"""Sharding: meshes, shardings, where each primitive's operands and results are placed, and sharding in types."""
