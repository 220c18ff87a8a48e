"""Array memory layouts (as jax.experimental.layout). meshax keeps every buffer in NumPy's default (row-major)
layout, so a layout here only describes that; asking for any other is refused."""
from meshax._src.arrays.formats import Format, Layout, with_layout_constraint

__all__ = ["Format", "Layout", "with_layout_constraint"]
