"""Segment reductions (as jax.ops): segment_sum, segment_prod, segment_max, segment_min."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.lax.segments import segment_max, segment_min, segment_prod, segment_sum

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]
