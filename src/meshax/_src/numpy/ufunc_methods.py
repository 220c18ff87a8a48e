"""The machinery behind jnp.ufunc's methods: a scalar function mapped over broadcast arrays (frompyfunc's call),
sequential folds and scans of any binary function (reduce, accumulate, at and reduceat of ufuncs that have no
faster form, as JAX's scans), and halving reductions and doubling scans of associative ones."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import aval_of
from ..interpreters.batching import batch_flat
from ..primitives.batch_dims import move_to_front
from .promotion import _axes, _cast
from .ufuncs import _where, greater, less, logical_and
from .shape_ops import broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape
from .creation import asarray, full
from .indexing import take


def mapped(func: Callable[..., Any], args: Sequence[Any], nout: int) -> Any:
    """`func` applied to each element of the broadcast `args` (vmapped over every dimension, as jnp.vectorize
    without a signature): one array, or a tuple of `nout` arrays."""
    arrays = [asarray(a) for a in args]
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    if not shape:
        return func(*arrays)
    size = math.prod(shape)
    flat = [reshape(broadcast_to(a, shape), (size,)) for a in arrays]
    several = []

    def body(*xs: Any) -> list[Any]:
        out = func(*xs)
        several.append(isinstance(out, (tuple, list)))
        return list(out) if several[0] else [out]

    outs, dims = batch_flat(body, flat, [0] * len(flat), size)
    results = [reshape(move_to_front(asarray(o), d, size), shape + tuple(aval_of(o).shape[1 if d is not None else 0:]))
               for o, d in zip(outs, dims)]
    return tuple(results) if several[0] else results[0]


def front(a: Any, axis: Any) -> tuple[Any, int]:
    """`a` with `axis` (an int, a 1-tuple or None: `a` flattened) moved first, and the axis it came from."""
    if axis is None:
        return ravel(a), 0
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise NotImplementedError("tuple of axes")
        axis = axis[0]
    (axis,) = _axes(axis, a.ndim)
    return moveaxis(a, axis, 0), axis


def fold(call: Callable[..., Any], x: Any, mask: Any, initial: Any, name: str) -> Any:
    """call(...call(call(initial, x[0]), x[1])..., x[n-1]) over the first axis, skipping the rows `mask` (if not
    None) leaves out; without `initial` the fold starts at x[0]."""
    n = x.shape[0]
    if initial is None:
        if n == 0:
            raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
        carry, start = x[0], 1
    else:
        carry, start = broadcast_to(_cast(asarray(initial), x.dtype), x.shape[1:]), 0
    for i in range(start, n):  # one step per row, each over every other dimension at once
        step = call(carry, x[i])
        carry = step if mask is None else _where(mask[i], step, carry)
    return carry


def halving(call: Callable[..., Any], x: Any) -> Any:
    """The reduction of `x` (at least one row) over its first axis by an associative, commutative `call`: the two
    halves combined until one row remains."""
    while x.shape[0] > 1:
        half = x.shape[0] // 2
        combined = call(x[:half], x[half:2 * half])
        x = concatenate([combined, x[2 * half:]]) if x.shape[0] % 2 else combined
    return x[0]


def sequential_scan(call: Callable[..., Any], x: Any) -> Any:
    """The running `call` of `x`'s rows along its first axis, one row at a time."""
    if x.shape[0] == 0:
        return x
    rows = [x[0]]
    for i in range(1, x.shape[0]):
        rows.append(call(rows[-1], x[i]))
    return concatenate([expand_dims(r, 0) for r in rows])


def doubling_scan(call: Callable[..., Any], x: Any) -> Any:
    """The running `call` of `x`'s rows along its first axis for an associative `call`: each row combined with
    the one `shift` before it, `shift` doubling (log2(n) steps over the whole array)."""
    shift = 1
    while shift < x.shape[0]:
        x = concatenate([x[:shift], call(x[:-shift], x[shift:])])
        shift *= 2
    return x


def scatter_each(call: Callable[..., Any], a: Any, indices: Any, args: Sequence[Any]) -> Any:
    """`a` with a[index] replaced by call(a[index], *args) for each index in turn (repeated indices apply again)."""
    a = asarray(a)
    indices = indices if isinstance(indices, tuple) else (indices,)
    if any(isinstance(i, slice) or i is Ellipsis or i is None for i in indices):
        raise TypeError("ufunc.at takes integer indices (arrays or scalars), not slices, Ellipsis or None; pass "
                        "index arrays, e.g. jnp.arange(n) for a whole axis.")
    indices = tuple(asarray(i) for i in indices)
    shape = tuple(np.broadcast_shapes(*(i.shape for i in indices)))
    if not shape:
        return a.at[indices].set(call(a[indices], *args))
    count = math.prod(shape)
    flat = [reshape(broadcast_to(i, shape), (count,)) for i in indices]
    values = [reshape(broadcast_to(asarray(v), shape), (count,)) for v in args]
    for k in range(count):  # in order, so that a repeated index sees the earlier updates
        where = tuple(i[k] for i in flat)
        a = a.at[where].set(call(a[where], *(v[k] for v in values)))
    return a


def segments(call: Callable[..., Any], x: Any, indices: Any) -> Any:
    """reduceat over the first axis of `x`: row i folds x[indices[i]:indices[i+1]] (to the end for the last), or
    is x[indices[i]] when that range is empty; each step folds one row of `x` into every segment at once."""
    n, m = x.shape[0], indices.shape[0]
    starts = indices
    stops = concatenate([indices[1:], full((1,), n, indices.dtype)]) if m else indices
    carry = take(x, starts, axis=0)
    column = (m,) + (1,) * (x.ndim - 1)
    for j in range(1, n):
        inside = logical_and(less(starts, j), greater(stops, j))
        carry = _where(reshape(inside, column), call(carry, x[j]), carry)
    return carry



def mapped_over(func: Callable[[Any], Any], in_axis: int, out_axis: int) -> Callable[[Any], Any]:
    """`func` (one array in, one out) vmapped over axis `in_axis` of its argument, the results stacked along
    `out_axis` (negative counts from the end)."""
    def call(x: Any) -> Any:
        size = x.shape[in_axis]
        (out,), (dim,) = batch_flat(lambda v: [func(v)], [x], [in_axis], size)
        out = move_to_front(asarray(out), dim, size)
        return moveaxis(out, 0, out_axis)

    return call
