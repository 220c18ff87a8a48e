"""Memory layouts and formats (jax.experimental.layout): meshax keeps every buffer in NumPy's row-major order, so
a layout describes that order; asking for another one is refused."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..sharding.shardings import PartitionSpec, Sharding
from ..tree.tree_util import tree_map


class _AutoLayout:
    """`Layout.AUTO`: let the compiler choose (meshax's choice is always row-major)."""

    def __repr__(self) -> str:
        return "AutoLayout"  # JAX 0.12 (0.10.2 printed AUTO)


AUTO = _AutoLayout()


class Layout:
    """The order of an array's dimensions in memory, from the slowest-varying (major) to the fastest (minor)."""

    AUTO = AUTO

    def __init__(self, major_to_minor: tuple[int, ...], tiling: Any = None, sub_byte_element_size_in_bits: int = 0
                 ) -> None:
        self.major_to_minor = tuple(major_to_minor)
        self.tiling = None if tiling is None else tuple(tuple(t) for t in tiling)
        self.sub_byte_element_size_in_bits = sub_byte_element_size_in_bits

    def check_default(self, ndim: int) -> None:
        """Refuse an order other than row-major (the only one meshax's NumPy buffers have)."""
        if self.major_to_minor != tuple(range(ndim)):
            raise NotImplementedError(f"meshax arrays are row-major; the layout major_to_minor={self.major_to_minor} "
                                      f"is not supported (use Layout.AUTO or major_to_minor={tuple(range(ndim))}).")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and (other.major_to_minor, other.tiling or ()) == \
            (self.major_to_minor, self.tiling or ())

    def __hash__(self) -> int:
        return hash(self.major_to_minor)

    def __repr__(self) -> str:
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")


def row_major(ndim: int) -> Layout:
    """The layout of every meshax buffer of rank `ndim`."""
    return Layout(tuple(range(ndim)), tiling=())


class Format:
    """A layout plus a sharding: how an array's buffers are laid out and where they live."""

    def __init__(self, layout: Layout | _AutoLayout | None = None, sharding: Any = None) -> None:
        if layout is not None and not isinstance(layout, (Layout, _AutoLayout)):
            raise TypeError("Invalid value received for the layout argument. Expected values are `None`, "
                            f"`Layout.AUTO` or an instance of `Layout`. Got {layout!r} of type {type(layout)}")
        self.layout = layout
        self.sharding = sharding

    def check_layout(self, ndim: int) -> None:
        if isinstance(self.layout, Layout):
            self.layout.check_default(ndim)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Format) and (other.layout, other.sharding) == (self.layout, self.sharding)

    def __hash__(self) -> int:
        return hash((self.layout, self.sharding))

    def __repr__(self) -> str:
        return f"Format(layout={self.layout!r}, sharding={self.sharding!r})"


def sharding_of_format(target: Any, value: Any) -> Any:
    """A placement target for `value` with a Format replaced by its sharding (its layout checked to be row-major
    for `value`'s rank); any other target as it is."""
    if isinstance(target, Format):
        target.check_layout(value.ndim if hasattr(value, "ndim") else np.ndim(value))
        return target.sharding
    return target


def with_layout_constraint(x: Any, layout: Layout) -> Any:
    """`x` itself, once its layout is checked to be row-major."""
    def constrain(leaf: Any) -> Any:
        if isinstance(layout, Layout):
            layout.check_default(len(getattr(leaf, "shape", ())))
        return leaf

    return tree_map(constrain, x)


def shardings_of_formats(tree: Any) -> Any:
    """jit's in_shardings/out_shardings with each Format replaced by its sharding (its layout checked)."""
    def sharding(leaf: Any) -> Any:
        if not isinstance(leaf, Format):
            return leaf
        if isinstance(leaf.layout, Layout):
            leaf.layout.check_default(len(leaf.layout.major_to_minor))
        return leaf.sharding

    if isinstance(tree, Format) or tree is None:
        return sharding(tree)
    return tree_map(sharding, tree, is_leaf=lambda x: isinstance(x, (Format, Sharding, PartitionSpec)) or x is None)
