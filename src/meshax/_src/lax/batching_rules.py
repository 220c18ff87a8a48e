"""Batching (vmap) rules of the array primitives and collectives.

Most rules move the batch dimension to the front and shift the primitive's dimension
parameters by one; elementwise primitives line their operands up NumPy-style; collectives
over a vmapped axis name reduce, gather or permute along the batch dimension itself.
Primitives without a rule here are evaluated per batch element (interpreters/batching.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..primitives import array_primitives as P
from ..primitives import random_bits as R
from ..primitives import windows as W
from ..interpreters.ad import add_any_p
from ..core.core import aval_of, axis_size, pvary_p, reduced_vary_cast_p
from . import unreduced_casts as U
from ..sharding.explicit_types import explicit_names
from ..interpreters.batching import batching_rules, named_axis_rules, spmd_rules
from ..primitives.batch_dims import move_to_front, per_element
from ..sharding.mesh import current_mesh
from ..sharding.shardings import NamedSharding, PartitionSpec
from .control_flow import while_p
from .parallel import all_gather_p, axis_index_p, ppermute_p, preduce_p, reduce_scatter_p


def _logical_ndim(value: Any, dim: int | None) -> int:
    return aval_of(value).ndim - (dim is not None)


def _elementwise(primitive: Any, multiple: bool = False):
    """Batched operands get the batch dimension first, with 1s inserted so that NumPy broadcasting lines up
    their logical dimensions; unbatched ones broadcast against it from the right."""

    def rule(values: list[Any], dims: list[Any], **params: Any) -> tuple[Any, Any]:
        rank = max(_logical_ndim(v, d) for v, d in zip(values, dims))
        lined = []
        for v, d in zip(values, dims):
            if d is None:
                lined.append(v)
                continue
            v = move_to_front(v, d, 0)
            shape = tuple(aval_of(v).shape)
            missing = rank - (len(shape) - 1)
            if missing:
                v = P.reshape.bind(v, new_sizes=shape[:1] + (1,) * missing + shape[1:])
            lined.append(v)
        out = primitive.bind(*lined, **params)
        return out, ([0] * len(out) if multiple else 0)

    return rule


def _add_any(values: list[Any], dims: list[Any]) -> tuple[Any, Any]:
    """Sum of two cotangents of one value, one of them perhaps unbatched: add_any's operands have equal shapes,
    so the unbatched one is broadcast along the batch first."""
    size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
    return add_any_p.bind(*[move_to_front(v, d, size) for v, d in zip(values, dims)]), 0


_ELEMENTWISE = list(P.UNARY.values()) + list(P.BINARY.values()) + [
    P.select, P.convert_element_type, R.fma_p, R.erf_inv_p, pvary_p, reduced_vary_cast_p, U.vary_unreduced_cast_p,
    U.preduced_p]
for _p in _ELEMENTWISE:
    batching_rules[_p] = _elementwise(_p)
batching_rules[add_any_p] = _add_any
batching_rules[R.threefry2x32_p] = _elementwise(R.threefry2x32_p, multiple=True)


def _sharding_constraint(spmd_axis_name: tuple, values: list[Any], dims: list[Any], *, sharding: Any) -> Any:
    """A constraint on each element constrains the batch: its dimension is split over vmap's spmd_axis_name
    (unless those axes are Explicit, where JAX does not add them either), the others as asked."""
    value = move_to_front(values[0], dims[0], 0)
    named = isinstance(sharding, NamedSharding)
    if named or isinstance(sharding, PartitionSpec):
        spec = sharding.spec if named else sharding
        ndim = aval_of(value).ndim - 1
        entries = list(spec) + [None] * (ndim - len(spec))
        auto = tuple(a for a in spmd_axis_name if a not in explicit_names(sharding.mesh if named else current_mesh()))
        batched = PartitionSpec(None if not auto else auto[0] if len(auto) == 1 else auto, *entries)
        sharding = NamedSharding(sharding.mesh, batched) if named else batched
    return P.sharding_constraint.bind(value, sharding=sharding), 0


spmd_rules[P.sharding_constraint] = _sharding_constraint


def _front(values: list[Any], dims: list[Any]) -> Any:
    return move_to_front(values[0], dims[0], 0)


def _shifted(primitive: Any, param: str):
    """Primitives on one operand with dimension parameter(s) `param` (an int or a tuple of ints)."""

    def rule(values: list[Any], dims: list[Any], **params: Any) -> tuple[Any, Any]:
        value = params[param]
        params[param] = value + 1 if isinstance(value, int) else tuple(a + 1 for a in value)
        return primitive.bind(_front(values, dims), **params), 0

    return rule


for _p in P.REDUCE.values():
    batching_rules[_p] = _shifted(_p, "axes")
for _p in (P.argmax, P.argmin, P.flip, P.roll):
    batching_rules[_p] = _shifted(_p, "axes")
for _p in list(P.CUMULATIVE.values()) + [P.sort, P.argsort]:
    batching_rules[_p] = _shifted(_p, "axis")


def _reshape(values: list[Any], dims: list[Any], *, new_sizes: tuple) -> tuple[Any, Any]:
    x = _front(values, dims)
    return P.reshape.bind(x, new_sizes=(aval_of(x).shape[0],) + tuple(new_sizes)), 0


def _transpose(values: list[Any], dims: list[Any], *, permutation: tuple) -> tuple[Any, Any]:
    return P.transpose.bind(_front(values, dims), permutation=(0,) + tuple(p + 1 for p in permutation)), 0


def _broadcast_in_dim(values: list[Any], dims: list[Any], *, shape: tuple, broadcast_dimensions: tuple) -> tuple:
    x = _front(values, dims)
    return P.broadcast_in_dim.bind(x, shape=(aval_of(x).shape[0],) + tuple(shape),
                                   broadcast_dimensions=(0,) + tuple(d + 1 for d in broadcast_dimensions)), 0


def _static_slice(values: list[Any], dims: list[Any], *, index: tuple) -> tuple[Any, Any]:
    return P.static_slice.bind(_front(values, dims), index=(slice(None),) + tuple(index)), 0


def _pad(values: list[Any], dims: list[Any], *, pad_width: tuple, mode: str, axes: tuple,
         constant_values: Any = 0) -> tuple[Any, Any]:
    return P.pad.bind(_front(values, dims), pad_width=((0, 0),) + tuple(pad_width), mode=mode,
                      axes=tuple(a + 1 for a in axes), constant_values=constant_values), 0


def _concatenate(values: list[Any], dims: list[Any], *, axis: int) -> tuple[Any, Any]:
    size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
    return P.concatenate.bind(*[move_to_front(v, d, size) for v, d in zip(values, dims)], axis=axis + 1), 0


def _dot_general(values: list[Any], dims: list[Any], *, dimension_numbers: Any, **params: Any) -> tuple[Any, Any]:
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = values
    ld, rd = dims
    shift = lambda dims_: tuple(d + 1 for d in dims_)  # noqa: E731
    if ld is not None and rd is not None:
        lhs, rhs = move_to_front(lhs, ld, 0), move_to_front(rhs, rd, 0)
        numbers = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
        return P.dot_general.bind(lhs, rhs, dimension_numbers=numbers, **params), 0
    if ld is not None:
        lhs = move_to_front(lhs, ld, 0)
        numbers = ((shift(lc), rc), (shift(lb), rb))
        return P.dot_general.bind(lhs, rhs, dimension_numbers=numbers, **params), len(lb)
    rhs = move_to_front(rhs, rd, 0)
    numbers = ((lc, shift(rc)), (lb, shift(rb)))
    lhs_free = aval_of(lhs).ndim - len(lc) - len(lb)
    return P.dot_general.bind(lhs, rhs, dimension_numbers=numbers, **params), len(lb) + lhs_free


def _gather(values: list[Any], dims: list[Any], *, index: tuple) -> tuple[Any, Any]:
    """An unbatched index: a leading full slice; the batch dimension lands where NumPy puts that slice."""
    if any(d is not None for d in dims[1:]):
        return per_element(P.gather)(values, dims, index=index)
    x = _front(values, dims)
    new_index = (slice(None),) + tuple(index)
    advanced = [k for k, e in enumerate(new_index) if not isinstance(e, slice)]
    adjacent = not advanced or advanced == list(range(advanced[0], advanced[-1] + 1))
    out_dim = 0 if adjacent else len(np.broadcast_shapes(*[aval_of(i).shape for i in values[1:]]))
    return P.gather.bind(x, *values[1:], index=new_index), out_dim


def _windows(primitive: Any):
    """conv_windows and its sum act on every leading index alike: the batch dimension becomes one more."""

    def rule(values: list[Any], dims: list[Any], *, first: int, **params: Any) -> tuple[Any, Any]:
        return primitive.bind(_front(values, dims), first=first + 1, **params), 0

    return rule


batching_rules[W.windows] = _windows(W.windows)
batching_rules[W.windows_sum] = _windows(W.windows_sum)

for _p, _rule in ((P.reshape, _reshape), (P.transpose, _transpose), (P.broadcast_in_dim, _broadcast_in_dim),
                  (P.static_slice, _static_slice), (P.pad, _pad), (P.concatenate, _concatenate),
                  (P.dot_general, _dot_general), (P.gather, _gather)):
    batching_rules[_p] = _rule


# ---- collectives over a vmapped axis --------------------------------------------------------------------------


def _shifted_collective(primitive: Any):
    """A collective over mesh axes acts on every batch element alike (batch dimension first)."""

    def rule(values: list[Any], dims: list[Any], **params: Any) -> tuple[Any, Any]:
        x = _front(values, dims)
        if primitive is all_gather_p:
            params["axis"] += 1
        if primitive is reduce_scatter_p:
            params["dimension"] += 1
        return primitive.bind(x, **params), 0

    return rule


for _p in (preduce_p, all_gather_p, reduce_scatter_p, ppermute_p):
    batching_rules[_p] = _shifted_collective(_p)
batching_rules[axis_index_p] = lambda values, dims, **params: (axis_index_p.bind(**params), None)

# A batched loop condition: each batch element loops on its own.
batching_rules[while_p] = per_element(while_p)


# ---- collectives over the vmapped axis itself ---------------------------------------------------------------------


def _other(axes: tuple, name: Any) -> tuple:
    return tuple(a for a in axes if a != name)


def _only(name: Any, axes: tuple, what: str) -> None:
    if axes != (name,):
        raise NotImplementedError(f"{what} over a vmapped axis together with other axes {axes} is not implemented "
                                  "in meshax yet; apply it to one axis at a time.")


def _named_reduce(size: int, name: Any, values: list, dims: list, *, axes: tuple, op: str) -> tuple[Any, Any]:
    x, d = values[0], dims[0]
    if d is None:
        out = P.BINARY["mul"].bind(x, np.asarray(size, aval_of(x).dtype)) if op == "sum" else x
    else:
        out = P.REDUCE[op].bind(move_to_front(x, d, size), axes=(0,), keepdims=False)
    rest = _other(axes, name)
    return (preduce_p.bind(out, axes=rest, op=op) if rest else out), None


def _named_index(size: int, name: Any, values: list, dims: list, *, axes: tuple) -> tuple[Any, Any]:
    """The position along `axes` (first axis major) of each batch element."""
    index: Any = np.int32(0)
    for a in axes:
        mine = P.iota.bind(shape=(size,), dtype=np.dtype(np.int32), dimension=0) if a == name else \
            axis_index_p.bind(axes=(a,))
        index = P.BINARY["add"].bind(P.BINARY["mul"].bind(index, np.int32(axis_size((a,), "axis_index"))), mine)
    return index, 0


def _named_gather(size: int, name: Any, values: list, dims: list, *, axes: tuple, axis: int, tiled: bool) -> tuple:
    _only(name, axes, "all_gather")
    stacked = move_to_front(values[0], dims[0], size)  # (size, ...): every element's value, for every element
    shape = tuple(aval_of(stacked).shape)
    order = list(range(1, len(shape)))
    order.insert(axis, 0)
    out = P.transpose.bind(stacked, permutation=tuple(order)) if axis else stacked
    if tiled:
        moved = tuple(aval_of(out).shape)
        out = P.reshape.bind(out, new_sizes=moved[:axis] + (moved[axis] * moved[axis + 1],) + moved[axis + 2:])
    return out, None


def _named_permute(size: int, name: Any, values: list, dims: list, *, axes: tuple, perm: tuple) -> tuple[Any, Any]:
    _only(name, axes, "ppermute")
    x = move_to_front(values[0], dims[0], size)
    source = np.zeros(size, np.int32)
    received = np.zeros(size, np.bool_)
    for s, t in perm:
        source[t], received[t] = s, True
    ndim = aval_of(x).ndim
    taken = P.gather.bind(x, source, index=("array",) + (slice(None),) * (ndim - 1))
    mask = received.reshape((size,) + (1,) * (ndim - 1))
    return P.select.bind(mask, taken, np.zeros((), aval_of(x).dtype)), 0


def _named_scatter(size: int, name: Any, values: list, dims: list, *, axes: tuple, dimension: int, tiled: bool
                   ) -> tuple[Any, Any]:
    _only(name, axes, "psum_scatter")
    total, _ = _named_reduce(size, name, values, dims, axes=axes, op="sum")
    shape = tuple(aval_of(total).shape)
    if tiled:
        total = P.reshape.bind(total, new_sizes=shape[:dimension] + (size, shape[dimension] // size)
                               + shape[dimension + 1:])
    order = (dimension,) + tuple(d for d in range(aval_of(total).ndim) if d != dimension)
    return P.transpose.bind(total, permutation=order), 0


named_axis_rules[preduce_p] = _named_reduce
named_axis_rules[axis_index_p] = _named_index
named_axis_rules[all_gather_p] = _named_gather
named_axis_rules[ppermute_p] = _named_permute
named_axis_rules[reduce_scatter_p] = _named_scatter
