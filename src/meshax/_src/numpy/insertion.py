"""meshax.numpy's functional updates and selections: insert, place, put, put_along_axis (all returning a new array:
inplace=False is required, as in JAX), choose, piecewise, apply_along_axis, block, mask_indices."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import ConcretizationTypeError, Tracer, aval_of
from ..core.dtypes import issubdtype
from .promotion import ArrayLike, _axes, _cast
from .ufuncs import _where, add, astype, clip, less, remainder
from .ufunc_methods import mapped, mapped_over
from .shape_ops import argsort, broadcast_arrays, broadcast_to, concatenate, moveaxis, ravel, reshape, stack
from .creation import arange, asarray, full, ones, zeros
from .creation import indices as _grid
from .indexing import take
from .reductions import cumsum
from .searching import nonzero, searchsorted
from .index_tricks import unravel_index

__all__ = ["apply_along_axis", "block", "choose", "insert", "mask_indices", "piecewise", "place", "put",
           "put_along_axis"]


def _refuse_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"jax.numpy.{name} cannot modify arrays in-place, because JAX arrays are immutable. Pass "
                         "inplace=False to instead return an updated array.")


def _arraylike(name: str, *values: Any) -> None:
    """Lists and other sequences are refused, as JAX's functions refuse them."""
    for position, value in enumerate(values):
        if isinstance(value, (list, tuple)):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(value)} at position {position}.")


def _cycled(values: Any, count: int) -> Any:
    """The flat `values` repeated (or cut) to `count` elements."""
    return take(values, remainder(arange(count), values.shape[0]))


def insert(arr: ArrayLike, obj: ArrayLike | slice, values: ArrayLike, axis: int | None = None) -> Any:
    """`arr` with `values` inserted before the index (or indices, or slice) `obj` along `axis` (flattened if None)."""
    _arraylike("insert", arr, 0 if isinstance(obj, slice) else obj, values)
    a = asarray(arr)
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    n = a.shape[axis]
    where = arange(*obj.indices(n)) if isinstance(obj, slice) else asarray(obj)
    if where.ndim > 1:
        raise ValueError(f"jnp.insert(): obj must be a slice, a one-dimensional array, or a scalar; got {obj}")
    if not issubdtype(aval_of(where).dtype, np.integer):
        if where.size:
            raise ValueError(f"jnp.insert(): index array must be integer typed; got {obj}")
        where = astype(where, int)
    values = astype(asarray(values), aval_of(a).dtype)
    values = reshape(values, (1,) * (a.ndim - values.ndim) + values.shape)
    if where.size == 1:
        if where.ndim == 0:
            values = moveaxis(values, 0, axis)
        where = full((values.shape[axis],), reshape(where, ()), aval_of(where).dtype)
    count = np.broadcast_shapes(where.shape, (values.shape[axis],))[0]
    where = broadcast_to(where, (count,))
    where = clip(_where(less(where, 0), add(where, n), where), 0, n)
    order = argsort(where, stable=True)
    ordered = take(where, order)
    shifted = add(ordered, arange(count, dtype=ordered.dtype))
    new_positions = zeros((count,), aval_of(where).dtype).at[order].set(shifted)
    old_positions = add(arange(n), searchsorted(ordered, arange(n, dtype=ordered.dtype), side="right"))
    shape = list(a.shape)
    shape[axis] = count
    body = moveaxis(a, axis, 0)
    inserted = moveaxis(broadcast_to(values, tuple(shape)), axis, 0)
    out = zeros((n + count,) + body.shape[1:], aval_of(a).dtype)
    out = out.at[new_positions].set(inserted).at[old_positions].set(body)
    return moveaxis(out, 0, axis)


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Any:
    """`arr` with the positions where `mask` is true set to `vals`, in order (repeated as needed)."""
    data, mask, vals = asarray(arr), asarray(mask), ravel(asarray(vals))
    _refuse_inplace("place", inplace)
    if data.size != mask.size:
        raise ValueError("place: arr and mask must be the same size")
    if not vals.size:
        raise ValueError("Cannot place values from an empty array")
    if not data.size:
        return data
    chosen = astype(ravel(mask), np.bool_)
    rank = remainder(add(cumsum(astype(chosen, np.int32)), -1), vals.shape[0])
    filled = astype(take(vals, clip(rank, 0, vals.shape[0] - 1)), aval_of(data).dtype)
    return reshape(_where(chosen, filled, ravel(data)), data.shape)


def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *, inplace: bool = True) -> Any:
    """`a` with the flat positions `ind` set to `v` (repeated as needed); out-of-range positions are clipped, or
    wrapped with mode='wrap'."""
    _refuse_inplace("put", inplace)
    arr, ind, v = asarray(a), ravel(asarray(ind)), ravel(asarray(v))
    if not arr.size or not ind.size or not v.size:
        return arr
    v = _cycled(v, ind.shape[0])
    if mode == "clip":
        ind = clip(ind, 0, arr.size - 1)
    elif mode == "wrap":
        ind = remainder(ind, arr.size)
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    elif mode is not None:
        raise ValueError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    return arr.at[unravel_index(ind, arr.shape)].set(v, mode="drop")


def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None, inplace: bool = True, *,
                   mode: str | None = None) -> Any:
    """`arr` with the entries that take_along_axis(arr, indices, axis) reads set to `values`."""
    _refuse_inplace("put_along_axis", inplace)
    a, where, values = asarray(arr), asarray(indices), asarray(values)
    shape = a.shape
    if axis is None:
        a, axis = ravel(a), 0
    if a.ndim != where.ndim:
        raise ValueError(f"put_along_axis arguments 'arr' and 'indices' must have same ndim. Got arr.ndim={a.ndim} "
                         f"and indices.ndim={where.ndim}.")
    try:
        values = broadcast_to(values, where.shape)
    except ValueError:
        raise ValueError(f"put_along_axis argument 'values' must be broadcastable to 'indices'. Got "
                         f"values.shape={values.shape} and indices.shape={where.shape}.") from None
    (axis,) = _axes(axis, a.ndim)
    grid = list(_grid(where.shape, sparse=True))
    grid[axis] = where
    return reshape(a.at[tuple(grid)].set(values, mode=mode), shape)


def choose(a: ArrayLike, choices: Any, out: None = None, mode: str = "raise") -> Any:
    """choices[a[i...]][i...] for each position (all broadcast together); mode says what out-of-range `a` does."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    given, a = a, asarray(a)
    choices = [asarray(c) for c in choices]
    if not issubdtype(aval_of(a).dtype, np.integer):
        raise ValueError("`a` array must be integer typed")
    n = len(choices)
    if mode == "raise":
        if isinstance(given, Tracer):
            raise ConcretizationTypeError("jnp.choose with mode='raise' needs known indices (they are traced here, "
                                          "e.g. under jit); use mode='wrap' or mode='clip' instead.")
        known = np.asarray(given)
        if np.any((known < 0) | (known >= n)):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = remainder(a, n)
    elif mode == "clip":
        a = clip(a, 0, n - 1)
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    a, *choices = broadcast_arrays(a, *choices)
    chosen = stack(choices)[(a,) + tuple(_grid(a.shape, sparse=True))]
    return _cast(chosen, aval_of(chosen).dtype, False)


def piecewise(x: ArrayLike, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """At each element of `x`, funclist[i] (a function of the element, or a constant) for the last condition i
    that holds there; a function past the conditions is the default (else 0)."""
    x = asarray(x)
    conditions = astype(asarray(condlist), np.bool_)
    nc, nf = len(conditions), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are expected; got {nf}")
    dtype = aval_of(x).dtype
    branches = [astype(mapped(lambda v, f=f: f(v, *args, **kw), [x], 1), dtype) if callable(f)
                else broadcast_to(_cast(asarray(f), dtype), x.shape) for f in funclist]
    result = branches[0]
    for condition, branch in zip(conditions, branches[1:]):  # the last true condition wins
        result = _where(condition, branch, result)
    return result


def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: ArrayLike, *args: Any, **kwargs: Any) -> Any:
    """func1d(a_1d, *args, **kwargs) over every 1-D slice of `arr` along `axis`; its result's dimensions take the
    place of `axis`."""
    a = asarray(arr)
    (axis,) = _axes(axis, a.ndim)
    func = lambda v: func1d(v, *args, **kwargs)  # noqa: E731
    for i in range(1, a.ndim - axis):
        func = mapped_over(func, i, -1)
    for _ in range(axis):
        func = mapped_over(func, 0, 0)
    return func(a)


def _depth(arrays: Any, where: str = "arrays") -> int:
    """How deeply the lists of `arrays` nest (the same for every branch)."""
    if isinstance(arrays, tuple):
        raise ValueError(f"jax.numpy.block does not allow tuples, got {arrays}")
    if not isinstance(arrays, list):
        return 0
    if not arrays:
        raise ValueError("jax.numpy.block does not allow empty list arguments")
    depths = {_depth(item) for item in arrays}
    if len(depths) != 1:
        raise ValueError("Mismatched list depths in jax.numpy.block")
    return depths.pop() + 1


def _assemble(arrays: Any, depth: int, rank: int) -> Any:
    """Nested lists joined innermost along the last axis, the next along the one before, and so on."""
    if not isinstance(arrays, list):
        leaf = asarray(arrays)
        return reshape(leaf, (1,) * (rank - leaf.ndim) + leaf.shape)
    parts = [_assemble(item, depth - 1, rank) for item in arrays]
    if len({p.shape[:rank - depth] + p.shape[rank - depth + 1:] for p in parts}) > 1:
        raise TypeError(f"Cannot concatenate arrays with shapes that differ in dimensions other than the one being "
                        f"concatenated: concatenating along dimension {rank - depth} for shapes "
                        f"{', '.join(str(p.shape) for p in parts)}.")
    return concatenate(parts, axis=-depth)


def _max_rank(arrays: Any) -> int:
    if isinstance(arrays, list):
        return max(_max_rank(item) for item in arrays)
    return np.ndim(arrays) if not hasattr(arrays, "ndim") else arrays.ndim


def block(arrays: Any) -> Any:
    """One array assembled from nested lists of blocks (as numpy.block)."""
    depth = _depth(arrays)
    if depth == 0:
        return asarray(arrays)
    return _assemble(arrays, depth, max(depth, _max_rank(arrays)))


def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Any, Any]:
    """The (row, column) indices of the nonzero entries of mask_func(ones((n, n)), k), e.g. jnp.triu's."""
    i, j = nonzero(mask_func(ones((n, n)), k), size=size)
    return i, j
