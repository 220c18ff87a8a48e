"""meshax.numpy's extremes: minmax (the minimum and maximum in one call) and top_k (the k largest or smallest
elements along an axis, with their indices)."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..core.core import aval_of
from ..core.dtypes import issubdtype
from .promotion import ArrayLike, _axes
from .ufuncs import isnan, logical_not, negative
from .shape_ops import argsort, moveaxis
from .creation import asarray
from .indexing import take_along_axis
from .reductions import max, min

__all__ = ["minmax", "top_k"]


def minmax(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
           where: ArrayLike | None = None) -> tuple[Any, Any]:
    """(min, max) of `a` over `axis`; `initial` is one value for both or a (min, max) pair."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.minmax is not supported.")
    a = asarray(a)
    low, high = initial if isinstance(initial, tuple) else (initial, initial)
    if where is not None and (low is None or high is None):
        raise ValueError("reduction operation minmax does not have an identity, so to use a where mask one has to "
                         "specify 'initial'")
    if (low is None or high is None) and builtins.any(a.shape[d] == 0 for d in _axes(axis, a.ndim)):
        raise ValueError("zero-size array to reduction operation minmax which has no identity")
    return (min(a, axis=axis, keepdims=keepdims, initial=low, where=where),
            max(a, axis=axis, keepdims=keepdims, initial=high, where=where))


def _descending(x: Any) -> Any:
    """The stable order of `x` along its last axis from largest to smallest, NaN counting as the largest."""
    kind = aval_of(x).dtype
    if kind == np.bool_ or issubdtype(kind, np.integer):
        return argsort(x, axis=-1, stable=True, descending=True)
    order = argsort(negative(x), axis=-1, stable=True)
    nan_first = argsort(logical_not(isnan(take_along_axis(x, order, -1))), axis=-1, stable=True)
    return take_along_axis(order, nan_first, -1)


def top_k(a: ArrayLike, k: int, /, *, axis: int = -1, mode: str = "largest", sorted: bool = True) -> Any:
    """The `k` largest (or, with mode='smallest', smallest) elements along `axis` in order, and their int32
    indices; ties go to the lower index and NaN counts as the largest value."""
    x = asarray(a)
    if issubdtype(aval_of(x).dtype, np.complexfloating):
        raise ValueError("top_k is not compatible with complex inputs.")
    if mode not in ("largest", "smallest"):
        raise ValueError(f"mode must be 'largest' or 'smallest', got {mode!r}")
    (axis,) = _axes(axis, x.ndim) if x.ndim else _no_axis(axis)
    k = int(k)
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    if k > x.shape[axis]:
        raise ValueError(f"k argument to top_k must be no larger than size along axis; got k={k} with "
                         f"shape={list(x.shape)} and axis={axis}")
    last = moveaxis(x, axis, -1)
    order = _descending(last) if mode == "largest" else argsort(last, axis=-1, stable=True)
    order = order[..., :k]
    values = moveaxis(take_along_axis(last, order, -1), -1, axis)
    indices = moveaxis(order.astype(np.int32), -1, axis)
    return [values, indices] if mode == "largest" else (values, indices)


def _no_axis(axis: int) -> tuple[int]:
    raise ValueError(f"axis {axis} is out of bounds for array of dimension 0")
