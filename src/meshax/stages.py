"""jax.stages: the stages of a jitted call (`jit(f).trace(...)`, `.lower()`, `.compile()`)."""
from ._src.transforms.stages import ArgInfo, Compiled, Lowered, Traced
from ._src.compat.small_modules import CompilerOptions, Wrapped

__all__ = ["ArgInfo", "CompilerOptions", "Compiled", "Lowered", "Traced", "Wrapped"]
