"""Pytrees: the node registry and jax.tree_util's functions."""
