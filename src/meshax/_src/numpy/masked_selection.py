"""compress and extract: the entries of an array where a condition holds (a data-dependent length, so under jit
`size=` fixes it)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.core import ConcretizationTypeError, Tracer
from .indexing import getitem, take
from .promotion import ArrayLike, _axes, _cast, _is_array, _lift, _ndim, _promote, _shape
from .shape_ops import argsort, pad, ravel, reshape
from .ufuncs import _where, logical_not, not_equal

__all__ = ["compress", "extract"]


def _size_needed(name: str, condition: Tracer) -> ConcretizationTypeError:
    """JAX's error for a traced condition without `size=` (the result's length would depend on its values)."""
    return ConcretizationTypeError(
        f"Abstract tracer value encountered where concrete value is expected: traced array with shape "
        f"{condition.aval}\nThe size argument of jnp.compress must be specified in order to use jnp.{name} within "
        "JAX transformations like jax.jit, jax.vmap, and jax.grad: pass size= (the result is cut or padded with "
        "fill_value to that length).")


def _true_positions(mask: Any, size: int) -> tuple[Any, Any]:
    """The first `size` positions where the 1-D `mask` is true (padded with 0), and which of them are real."""
    n = _shape(mask)[0]
    order = argsort(logical_not(mask))[:size]  # stable: the true positions first, in order
    valid = getitem(mask, order)
    if size > n:
        order = pad(order, (0, size - n))
        valid = pad(valid, (0, size - n))
    return order, valid


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *, size: int | None = None,
             fill_value: ArrayLike = 0, out: None = None) -> Any:
    """The entries of `a` along `axis` where the 1-D `condition` is true. The result's length depends on the
    data, so under jit pass `size=` (the first `size` entries, padded with `fill_value`)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    if _ndim(condition) != 1:
        raise ValueError("condition must be a 1D array")
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    cond = not_equal(_lift(condition), False) if _is_array(condition) else np.asarray(condition) != 0
    n = _shape(cond)[0]
    if n > a.shape[axis]:
        if isinstance(cond, Tracer):
            raise ValueError(f"compress: condition of length {n} is longer than the array's axis "
                             f"({a.shape[axis]}); cut it to that length.")
        if np.asarray(cond)[a.shape[axis]:].any():
            raise ValueError("condition contains entries that are out of bounds")
        cond, n = cond[:a.shape[axis]], a.shape[axis]
    a = getitem(a, (slice(None),) * axis + (slice(0, n),))
    if size is None:
        if isinstance(cond, Tracer):
            raise _size_needed("compress", cond)
        return take(a, np.nonzero(np.asarray(cond))[0], axis=axis)
    if not 0 < size <= n:
        raise ValueError("size must be positive and not greater than the size of the array axis; "
                         f"got size={size} for a.shape[axis]={n}")
    order, valid = _true_positions(cond, size)
    taken = take(a, order, axis=axis)
    valid = reshape(valid, (1,) * axis + (size,) + (1,) * (a.ndim - axis - 1))
    return _where(valid, taken, _cast(_lift(fill_value), a.dtype))


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None, fill_value: ArrayLike = 0) -> Any:
    """The elements of `arr` where `condition` is true, both flattened (see compress for `size`)."""
    if size is None and isinstance(condition, Tracer):
        raise _size_needed("extract", condition)
    return compress(ravel(condition), ravel(arr), size=size, fill_value=fill_value)
