"""jax.stages: the stages of a jitted call (`jit(f).trace(...)`, `.lower()`, `.compile()`)."""
from ._src.transforms.stages import ArgInfo, Compiled, Lowered, Traced

__all__ = ["ArgInfo", "Compiled", "Lowered", "Traced"]
