"""Primitives by family, each with its rules side by side (as jax._src.lax)."""
