"""jax._src.state.types for the alias: the type of an array ref (`jax.typeof(ref)`)."""
from meshax._src.transforms.sharding_in_types import RefType as AbstractRef

__all__ = ["AbstractRef"]
