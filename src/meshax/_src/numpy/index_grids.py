"""meshax.numpy's index objects that build arrays from slice notation: mgrid and ogrid (dense and open grids) and
r_ and c_ (slices, scalars and arrays concatenated along the first or last axis), as NumPy's and JAX's."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.core import Tracer
from .promotion import _as_array, _promote
from .shape_ops import concatenate, reshape, stack, swapaxes, transpose
from .creation import arange, asarray, linspace, meshgrid

__all__ = ["c_", "mgrid", "ogrid", "r_"]


def _known(value: Any, what: str) -> Any:
    """A slice bound, which must be a Python value (a traced one cannot set a shape)."""
    if isinstance(value, Tracer):
        raise TypeError(f"{what} must be a concrete value, not a traced one: the grid's length depends on it.")
    return value


def _line(s: slice, name: str) -> Any:
    """The 1-D grid a slice stands for: arange(start, stop, step), or with an imaginary step Nj, N points from
    start to stop inclusive."""
    start = _known(s.start, f"slice start of jnp.{name}") or 0
    stop = _known(s.stop, f"slice stop of jnp.{name}")
    step = _known(s.step, f"slice step of jnp.{name}") or 1
    if np.iscomplex(step):
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


class _Grid:
    """mgrid/ogrid: grid[a:b:s, ...] is the dense (or, sparse, the open) grid of the slices' 1-D ranges."""

    def __init__(self, sparse: bool, name: str) -> None:
        self._sparse, self._name = sparse, name

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        if isinstance(key, slice):
            return _line(key, self._name)
        lines = _promote(*(_line(k, self._name) for k in key)) if key else []
        if self._sparse:
            return list(meshgrid(*lines, indexing="ij", sparse=True))
        if not lines:
            return arange(0)
        return stack(meshgrid(*lines, indexing="ij"), 0)


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


def _directive(text: str, defaults: tuple[int, int, int]) -> tuple[int, int, int] | str:
    """'r', 'c', or 'axis[,ndmin[,trans1d]]' as three ints (those not given from `defaults`)."""
    if text in ("r", "c"):
        return text
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"could not understand directive {text!r}") from None
    if not 1 <= len(numbers) <= 3:
        raise ValueError(f"could not understand directive {text!r}")
    return tuple(numbers) + defaults[len(numbers):]  # type: ignore[return-value]


def _raised(item: Any, ndmin: int, trans1d: int) -> Any:
    """`item` with leading dimensions added up to `ndmin`, its own dimensions placed as `trans1d` says."""
    rank = item.ndim
    if rank >= ndmin:
        return item
    item = reshape(item, (1,) * (ndmin - rank) + item.shape)
    if trans1d == -1:
        return item
    k1 = trans1d + (ndmin - rank) + 1 if trans1d < 0 else trans1d
    k2 = ndmin - rank
    axes = list(range(ndmin))
    return transpose(item, tuple(axes[:k1] + axes[k2:] + axes[k1:k2]))


class _AxisConcat:
    """r_/c_: items (slices as ranges, scalars, arrays) joined along `axis`, each raised to `ndmin` dimensions;
    a leading string directive overrides axis, ndmin and trans1d ('r'/'c': a row or column matrix)."""

    def __init__(self, axis: int, ndmin: int, trans1d: int, name: str) -> None:
        self.axis, self.ndmin, self.trans1d, self._name = axis, ndmin, trans1d, name

    def __getitem__(self, key: Any) -> Any:
        key = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, None
        if key and isinstance(key[0], str):
            directive = _directive(key[0], (axis, ndmin, trans1d))
            if isinstance(directive, str):
                matrix = directive
            else:
                axis, ndmin, trans1d = directive
            key = key[1:]
        items = []
        for item in key:
            if isinstance(item, slice):
                line = reshape(_line(item, self._name), (1,) * max(ndmin - 1, 0) + (-1,))
                items.append(swapaxes(line, -1, trans1d) if trans1d != -1 and ndmin > 1 else line)
            elif isinstance(item, str):
                raise ValueError("string directive must be placed at the beginning")
            else:
                items.append(_raised(asarray(item) if isinstance(item, (list, np.ndarray)) else _as_array(item), ndmin,
                                     trans1d))
        result = concatenate(items, axis=axis)
        if matrix is not None and result.ndim == 1:
            result = reshape(result, (1, -1) if matrix == "r" else (-1, 1))
        return result


r_ = _AxisConcat(0, 1, -1, "r_")
c_ = _AxisConcat(-1, 2, 0, "c_")
