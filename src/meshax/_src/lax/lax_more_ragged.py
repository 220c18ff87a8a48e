"""ragged_dot and ragged_dot_general: contractions in which one dimension of `lhs` is cut into consecutive groups of
`group_sizes` rows, each group contracted with its own slice of `rhs` (as jax.lax's). Built from a group mask and
one batched dot_general (the groups as a leading batch dimension), so they trace, differentiate and batch as
dot_general does."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.core import aval_of
from ..core.dtypes import issubdtype
from .lax_more_enums import RaggedDotDimensionNumbers
from .lax_ops import _jnp, _lift, dot_general

__all__ = ["ragged_dot", "ragged_dot_general"]


def _group_mask(group_sizes: Any, size: int) -> Any:
    """(groups, size) booleans: row i belongs to group g (rows past the last group belong to none)."""
    jnp = _jnp()
    ends = jnp.cumsum(group_sizes)
    starts = ends - group_sizes
    rows = jnp.arange(size, dtype=ends.dtype)
    rows, starts, ends = jnp.expand_dims(rows, 0), jnp.expand_dims(starts, 1), \
        jnp.expand_dims(ends, 1)
    return jnp.logical_and(jnp.greater_equal(rows, starts), jnp.less(rows, ends))


def _masked(x: Any, mask: Any, dim: int) -> Any:
    """`x` repeated once per group along a new first dimension, zero outside the group along `dim`."""
    jnp = _jnp()
    ndim, (groups, size) = aval_of(x).ndim, aval_of(mask).shape
    shape = [groups] + [1] * ndim
    shape[dim + 1] = size
    return jnp.where(jnp.reshape(mask, shape), jnp.expand_dims(x, 0), jnp.zeros((), aval_of(x).dtype))


def _check(lhs: Any, rhs: Any, group_sizes: Any, numbers: RaggedDotDimensionNumbers) -> None:
    if not issubdtype(aval_of(group_sizes).dtype, np.integer):
        raise TypeError("ragged_dot_general requires that group_sizes.dtype is subtype of np.integer.")
    (lc, rc), (lb, rb) = numbers.dot_dimension_numbers
    if len(numbers.lhs_ragged_dimensions) != 1:
        raise TypeError(f"ragged_dot_general requires exactly one lhs ragged dimension; got "
                        f"{numbers.lhs_ragged_dimensions}.")
    if any(d in rc or d in rb for d in numbers.rhs_group_dimensions):
        raise TypeError("ragged_dot_general requires rhs group dimension numbers to be distinct from contracting "
                        "and batch dimensions.")
    if aval_of(group_sizes).ndim != 1:
        raise NotImplementedError(f"ragged_dot_general in meshax takes 1-D group_sizes; got shape "
                                  f"{tuple(aval_of(group_sizes).shape)}. Map over the leading dimensions with vmap.")
    groups = aval_of(group_sizes).shape[0]
    for d in numbers.rhs_group_dimensions:
        if aval_of(rhs).shape[d] != groups:
            raise TypeError(f"expected rhs group dimension size to be {groups}, got {aval_of(rhs).shape[d]}.")


def _shifted(dims: Sequence[int], moved: int) -> tuple[int, ...]:
    """Dimension numbers of an array after its dimension `moved` went to the front."""
    return tuple(d + 1 if d < moved else d for d in dims)


def ragged_dot_general(lhs: Any, rhs: Any, group_sizes: Any, ragged_dot_dimension_numbers: RaggedDotDimensionNumbers,
                       precision: Any = None, preferred_element_type: Any = None, group_offset: Any = None,
                       out_sharding: Any = None) -> Any:
    """The ragged contraction (as jax.lax.ragged_dot_general). The lhs ragged dimension decides the mode: a free
    dimension (each group of rows times its rhs group, the rhs has one group dimension), a contracting dimension
    (one result per group, stacked first) or a batch dimension (an ordinary dot_general)."""
    if group_offset is not None:
        raise NotImplementedError("ragged_dot_general's group_offset is not supported; slice the groups instead.")
    jnp = _jnp()
    lhs, rhs, group_sizes = _lift(lhs), _lift(rhs), _lift(group_sizes)
    numbers = ragged_dot_dimension_numbers
    _check(lhs, rhs, group_sizes, numbers)
    dtype = jnp.result_type(lhs, rhs)
    lhs, rhs = jnp.asarray(lhs, dtype), jnp.asarray(rhs, dtype)
    (lc, rc), (lb, rb) = numbers.dot_dimension_numbers
    ragged = numbers.lhs_ragged_dimensions[0]
    mask = _group_mask(group_sizes, aval_of(lhs).shape[ragged])
    options = dict(precision=precision, preferred_element_type=preferred_element_type, out_sharding=out_sharding)
    if ragged in lb:
        return dot_general(lhs, rhs, ((lc, rc), (lb, rb)), **options)
    lhs_groups = _masked(lhs, mask, ragged)
    lc1, lb1 = tuple(d + 1 for d in lc), tuple(d + 1 for d in lb)
    if ragged in lc:
        rhs_groups = _masked(rhs, mask, rc[lc.index(ragged)])
        numbers1 = ((lc1, tuple(d + 1 for d in rc)), ((0, *lb1), (0, *(d + 1 for d in rb))))
        return dot_general(lhs_groups, rhs_groups, numbers1, **options)
    group_dim = numbers.rhs_group_dimensions[0]
    rhs_front = jnp.moveaxis(rhs, group_dim, 0)
    numbers1 = ((lc1, _shifted(rc, group_dim)), ((0, *lb1), (0, *_shifted(rb, group_dim))))
    per_group = dot_general(lhs_groups, rhs_front, numbers1, **options)
    return jnp.sum(per_group, axis=0, dtype=aval_of(per_group).dtype)


def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None, preferred_element_type: Any = None,
               group_offset: Any = None, out_sharding: Any = None) -> Any:
    """lhs [m, k] cut into consecutive row groups of `group_sizes`, group g times rhs[g] ([g, k, n]): [m, n], rows
    past the last group zero (as jax.lax.ragged_dot)."""
    numbers = RaggedDotDimensionNumbers(dot_dimension_numbers=(([1], [1]), ([], [])), lhs_ragged_dimensions=[0],
                                        rhs_group_dimensions=[0])
    return ragged_dot_general(lhs, rhs, group_sizes, numbers, precision=precision,
                              preferred_element_type=preferred_element_type, group_offset=group_offset,
                              out_sharding=out_sharding)
