"""Implementation of meshax.export: a jitted function's program serialized and run back (as jax.export)."""
