"""Array memory layouts (as jax.experimental.layout). meshax keeps every buffer in NumPy's default (row-major)
layout, so a layout here only describes that; asking for any other is refused."""
from __future__ import annotations

from typing import Any

__all__ = ["Format", "Layout", "with_layout_constraint"]


class Layout:
    """The order of an array's dimensions in memory, minor to major (None: the default row-major order)."""

    def __init__(self, major_to_minor: tuple[int, ...] | None = None, *_: Any, **__: Any) -> None:
        self.major_to_minor = None if major_to_minor is None else tuple(major_to_minor)

    @classmethod
    def AUTO(cls) -> "Layout":  # noqa: N802 - JAX's name
        return cls()

    def check_default(self, ndim: int) -> None:
        if self.major_to_minor not in (None, tuple(range(ndim))):
            raise NotImplementedError(f"meshax arrays are row-major; the layout {self.major_to_minor} is not "
                                      "supported (leave the layout to its default).")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other.major_to_minor == self.major_to_minor

    def __hash__(self) -> int:
        return hash(self.major_to_minor)

    def __repr__(self) -> str:
        return f"Layout(major_to_minor={self.major_to_minor})"


class Format:
    """A layout plus a sharding: where an array lives and how its buffers are laid out."""

    def __init__(self, layout: Layout | None = None, sharding: Any = None) -> None:
        if sharding is None and layout is not None and not isinstance(layout, Layout):
            layout, sharding = None, layout  # Format(sharding)
        self.layout = layout if layout is not None else Layout()
        self.sharding = sharding

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Format) and (other.layout, other.sharding) == (self.layout, self.sharding)

    def __hash__(self) -> int:
        return hash((self.layout, self.sharding))

    def __repr__(self) -> str:
        return f"Format({self.layout!r}, {self.sharding!r})"


def with_layout_constraint(x: Any, layout: Layout) -> Any:
    """`x` itself, once its layout is checked to be the default one."""
    from meshax._src.tree.tree_util import tree_map

    def constrain(leaf: Any) -> Any:
        layout.check_default(len(getattr(leaf, "shape", ())))
        return leaf

    return tree_map(constrain, x)
