"""Lower-level operations (as jax.lax)."""
from meshax._src.jit import with_sharding_constraint

__all__ = ["with_sharding_constraint"]
