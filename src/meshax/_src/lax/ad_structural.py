"""Derivative rules of the structural primitives: reductions, scans, contractions, shape ops and indexing.

Most are linear in their array operand, so their jvp applies them to the tangent and
their transpose moves the cotangent back (a reshape undone, a slice scattered into zeros,
a gather scatter-added, a contraction contracted with the other operand).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..primitives import random_bits as R
from ..primitives import slice_sums  # noqa: F401 - installs its rewrite of the scatter-adds made here
from ..primitives import windows as W
from ..core.core import aval_of
from ..interpreters.ad import (Zero, defjvp, deflinear, defzero, instantiate, is_undefined, jvp_rules, tangent_aval,
                               transpose_rules, zeros)
from ..sharding.shardings import NamedSharding, PartitionSpec
from .ad_rules import add, broadcast_to, div, mul, unbroadcast
from ..core.dtypes import issubdtype

for _primitive in (P.argmax, P.argmin, P.argsort, P.iota, P.REDUCE["or"], P.REDUCE["and"], R.threefry2x32_p):
    defzero(_primitive)


# ---- reductions and scans --------------------------------------------------------------------------------------


def _kept_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


def _expand_reduced(ct: Any, shape: Sequence[int], axes: Sequence[int]) -> Any:
    """A reduced value broadcast back over the reduced axes of `shape`."""
    kept = _kept_shape(shape, axes)
    if tuple(aval_of(ct).shape) != kept:
        ct = P.reshape.bind(ct, new_sizes=kept)
    return broadcast_to(ct, shape)


deflinear(P.REDUCE["sum"], lambda ct, x, *, axes, keepdims=False: [_expand_reduced(ct, x.aval.shape, axes)])


def _chooser_jvp(kind: str):
    """max/min: the tangent at the chosen elements, averaged over ties (as JAX's)."""

    def rule(primals: list[Any], tangents: list[Any], *, axes: tuple[int, ...], keepdims: bool = False) -> tuple:
        x = primals[0]
        ans = P.REDUCE[kind].bind(x, axes=axes, keepdims=keepdims)
        where = P.convert_element_type.bind(P.BINARY["eq"].bind(x, _expand_reduced(ans, x.shape, axes)),
                                            new_dtype=x.dtype)
        counts = P.REDUCE["sum"].bind(where, axes=axes, keepdims=keepdims)
        total = P.REDUCE["sum"].bind(mul(tangents[0], where), axes=axes, keepdims=keepdims)
        return ans, div(total, counts)

    return rule


jvp_rules[P.REDUCE["max"]] = _chooser_jvp("max")
jvp_rules[P.REDUCE["min"]] = _chooser_jvp("min")
defjvp(P.REDUCE["prod"], lambda g, ans, x, *, axes, keepdims=False: P.REDUCE["sum"].bind(
    mul(g, div(_expand_reduced(ans, x.shape, axes), x)), axes=axes, keepdims=keepdims))

def _cumulative_chooser_jvp(kind: str):
    """cummax/cummin: each output's tangent is the tangent at the position its running extreme came from (the
    last position so far where the input reached it)."""

    def rule(primals: list[Any], tangents: list[Any], *, axis: int, reverse: bool = False) -> tuple[Any, Any]:
        x = primals[0]
        ans = P.CUMULATIVE[kind].bind(x, axis=axis, reverse=reverse)
        shape = tuple(aval_of(x).shape)
        positions = P.iota.bind(shape=shape, dtype=np.dtype(np.int32), dimension=axis)
        if reverse:  # the "last so far" position comes from the end
            positions = P.BINARY["sub"].bind(np.asarray(shape[axis] - 1, np.int32), positions)
        marked = P.select.bind(P.BINARY["eq"].bind(x, ans), positions, np.full(shape, -1, np.int32))
        source = P.CUMULATIVE["cummax"].bind(marked, axis=axis, reverse=reverse)
        if reverse:
            source = P.BINARY["sub"].bind(np.asarray(shape[axis] - 1, np.int32), source)
        return ans, P.take_along.bind(instantiate(tangents[0]), source, axis=axis)

    return rule


jvp_rules[P.CUMULATIVE["cummax"]] = _cumulative_chooser_jvp("cummax")
jvp_rules[P.CUMULATIVE["cummin"]] = _cumulative_chooser_jvp("cummin")
deflinear(P.CUMULATIVE["cumsum"], lambda ct, x, *, axis, reverse=False: [
    P.CUMULATIVE["cumsum"].bind(ct, axis=axis, reverse=not reverse)])
defjvp(P.CUMULATIVE["cumprod"], lambda g, ans, x, *, axis, reverse=False: mul(
    ans, P.CUMULATIVE["cumsum"].bind(div(g, x), axis=axis, reverse=reverse)))


# ---- dot_general -----------------------------------------------------------------------------------------------


def _dot(a: Any, b: Any, contract: tuple, batch: tuple, params: dict, out_sharding: Any = None) -> Any:
    extra = {} if out_sharding is None else {"out_sharding": out_sharding}
    return P.dot_general.bind(a, b, dimension_numbers=(contract, batch),
                              preferred_element_type=params.get("preferred_element_type"), **extra)


def _dot_transpose(ct: Any, lhs: Any, rhs: Any, *, dimension_numbers: Any, **params: Any) -> list[Any]:
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    if is_undefined(lhs):
        return [_dot_transpose_side(ct, rhs, lhs.aval, aval_of(rhs).ndim, lc, rc, lb, rb, nb, True, params), None]
    return [None, _dot_transpose_side(ct, lhs, rhs.aval, aval_of(lhs).ndim, rc, lc, rb, lb, nb, False, params)]


def _dot_transpose_side(ct: Any, other: Any, aval: Any, other_ndim: int, contract: Sequence[int],
                        other_contract: Sequence[int], batch: Sequence[int], other_batch: Sequence[int], nb: int,
                        is_lhs: bool, params: dict) -> Any:
    """The cotangent of one operand: ct contracted with the other operand over the other's free dimensions,
    then transposed into the operand's own dimension order. On Explicit mesh axes it is typed as the operand
    (as JAX's transpose does), which also decides contractions over dimensions split alike."""
    ndim = aval.ndim
    free = [d for d in range(ndim) if d not in contract and d not in batch]
    other_free = [d for d in range(other_ndim) if d not in other_contract and d not in other_batch]
    ct_free_self = list(range(nb, nb + len(free))) if is_lhs else \
        list(range(nb + len(other_free), nb + len(other_free) + len(free)))
    ct_free_other = list(range(nb + len(free), nb + len(free) + len(other_free))) if is_lhs else \
        list(range(nb, nb + len(other_free)))
    # result dims: batch, this operand's free dims, then the other's contracted dims in increasing order
    del ct_free_self
    order = sorted(other_contract)
    position = {}
    for k, d in enumerate(batch):
        position[d] = k
    for j, d in enumerate(free):
        position[d] = nb + j
    for d, o in zip(contract, other_contract):
        position[d] = nb + len(free) + order.index(o)
    out_sharding = None
    if aval.mesh is not None:  # on a mesh with Explicit axes
        at = {k: d for d, k in position.items()}
        entries = [aval.explicit[at[k]] if aval.explicit else () for k in range(ndim)]
        # an operand reduced over axes that split the contraction gets its cotangent unreduced over them (each
        # device's partial sum; the reshard that made it reduced sums them), as JAX's transpose types it
        ct_spec = aval_of(ct).explicit
        split = {a for d in ct_free_other for a in (ct_spec[d] if ct_spec else ())}
        out_sharding = PartitionSpec.from_entries(entries, unreduced=aval.reduced & split)
    result = _dot(ct, other, (tuple(ct_free_other), tuple(other_free)), (tuple(range(nb)), tuple(other_batch)),
                  params, out_sharding)
    permutation = tuple(position[d] for d in range(ndim))
    if permutation != tuple(range(ndim)):
        result = P.transpose.bind(result, permutation=permutation)
    return result


def _dot_jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
    lhs, rhs = primals
    ans = P.dot_general.bind(lhs, rhs, **params)
    out: Any = Zero(tangent_aval(aval_of(ans)))
    if not isinstance(tangents[0], Zero):
        out = P.dot_general.bind(tangents[0], rhs, **params)
    if not isinstance(tangents[1], Zero):
        other = P.dot_general.bind(lhs, tangents[1], **params)
        out = other if isinstance(out, Zero) else add(out, other)
    return ans, out


jvp_rules[P.dot_general] = _dot_jvp
transpose_rules[P.dot_general] = _dot_transpose


# ---- shape ops -------------------------------------------------------------------------------------------------

deflinear(P.reshape, lambda ct, x, *, new_sizes: [P.reshape.bind(ct, new_sizes=tuple(x.aval.shape))])
deflinear(P.transpose, lambda ct, x, *, permutation: [
    P.transpose.bind(ct, permutation=tuple(int(i) for i in np.argsort(permutation)))])


def _broadcast_transpose(ct: Any, x: Any, *, shape: tuple, broadcast_dimensions: tuple) -> list[Any]:
    in_shape = x.aval.shape
    axes = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions) + tuple(
        out for i, out in enumerate(broadcast_dimensions) if in_shape[i] == 1 and shape[out] != 1)
    summed = P.REDUCE["sum"].bind(ct, axes=tuple(sorted(axes)), keepdims=False) if axes else ct
    if tuple(aval_of(summed).shape) != tuple(in_shape):
        summed = P.reshape.bind(summed, new_sizes=tuple(in_shape))
    return [summed]


deflinear(P.broadcast_in_dim, _broadcast_transpose)
deflinear(P.flip, lambda ct, x, *, axes: [P.flip.bind(ct, axes=axes)])
deflinear(P.roll, lambda ct, x, *, shift, axes: [
    P.roll.bind(ct, shift=tuple(-s for s in shift) if isinstance(shift, tuple) else -shift, axes=axes)])
def _constraint_transpose(ct: Any, x: Any, *, sharding: Any) -> list[Any]:
    """The cotangent laid out as the constraint says; for a constraint making a value reduced (or unreduced), laid
    out plain: its partial sums summed, as JAX transposes reshard; for one summing partial sums, laid out reduced."""
    spec = getattr(sharding, "spec", None)
    if spec is not None and (spec.reduced or spec.unreduced or aval_of(ct).unreduced or x.aval.unreduced):
        # the cotangent of partial sums is reduced over their axes (every device's partial sum had the same weight)
        spec = spec.update(reduced=x.aval.unreduced, unreduced=frozenset())
        sharding = type(sharding)(sharding.mesh, spec)
    return [P.sharding_constraint.bind(ct, sharding=sharding)]


deflinear(P.sharding_constraint, _constraint_transpose)


def _pad_jvp(primals: list[Any], tangents: list[Any], *, pad_width: Any, mode: str, axes: Any,
             constant_values: Any = 0) -> tuple[Any, Any]:
    if mode != "constant":
        raise NotImplementedError(f"Differentiation rule for 'pad' with mode={mode!r} not implemented")
    ans = P.pad.bind(primals[0], pad_width=pad_width, mode=mode, axes=axes, constant_values=constant_values)
    return ans, P.pad.bind(instantiate(tangents[0]), pad_width=pad_width, mode=mode, axes=axes, constant_values=0)


def _pad_transpose(ct: Any, x: Any, *, pad_width: Any, mode: str, axes: Any, constant_values: Any = 0) -> list:
    index = tuple(slice(before, before + n) for (before, _), n in zip(pad_width, x.aval.shape))
    return [P.static_slice.bind(ct, index=index)]


jvp_rules[P.pad] = _pad_jvp
transpose_rules[P.pad] = _pad_transpose


def _concatenate_transpose(ct: Any, *xs: Any, axis: int) -> list[Any]:
    out, start = [], 0
    for x in xs:
        size = aval_of(x).shape[axis]
        if is_undefined(x):
            index = tuple(slice(start, start + size) if d == axis else slice(None) for d in range(x.aval.ndim))
            out.append(P.static_slice.bind(ct, index=index))
        else:
            out.append(None)
        start += size
    return out


def _concatenate_jvp(primals: list[Any], tangents: list[Any], *, axis: int) -> tuple[Any, Any]:
    ans = P.concatenate.bind(*primals, axis=axis)
    return ans, P.concatenate.bind(*map(instantiate, tangents), axis=axis)


jvp_rules[P.concatenate] = _concatenate_jvp
transpose_rules[P.concatenate] = _concatenate_transpose


def _sort_jvp(primals: list[Any], tangents: list[Any], *, axis: int, descending: bool = False) -> tuple[Any, Any]:
    x = primals[0]
    ans = P.sort.bind(x, axis=axis, descending=descending)
    order = P.argsort.bind(x, axis=axis, index_dtype=np.dtype(np.int32))
    if descending:
        order = P.flip.bind(order, axes=(axis,))
    return ans, P.take_along.bind(tangents[0], order, axis=axis)


jvp_rules[P.sort] = _sort_jvp


# ---- indexing --------------------------------------------------------------------------------------------------


def _basic(entry: Any) -> Any:
    """A canonical (start, stop, step) slice usable as a NumPy basic index (a negative stop means 'past 0')."""
    if isinstance(entry, slice) and entry.step is not None and entry.step < 0 and entry.stop is not None \
            and entry.stop < 0:
        return slice(entry.start, None, entry.step)
    return entry


def _canonical(index: Sequence[Any], shape: Sequence[int]) -> tuple[Any, ...]:
    """A slice/gather index in the scatter primitive's form: canonical slices, non-negative integers."""
    out, dim = [], 0
    for entry in index:
        if entry is None:
            out.append(None)
            continue
        size = shape[dim]
        if isinstance(entry, slice):
            out.append(slice(*entry.indices(size)))
        elif isinstance(entry, str):
            out.append(entry)
        else:
            out.append(int(entry) % size if size else int(entry))
        dim += 1
    return tuple(out) + tuple(slice(0, n, 1) for n in shape[dim:])  # dimensions the index leaves whole


def _wrapped(indices: Sequence[Any], index: Sequence[Any], shape: Sequence[int]) -> list[Any]:
    """Index arrays with negative entries counted from the end (as gathers read them)."""
    arrays = iter(indices)
    out = []
    for dim, entry in enumerate(e for e in index if e is not None):
        if entry == "array":
            i = next(arrays)
            if issubdtype(aval_of(i).dtype, np.integer):
                size = np.asarray(shape[dim], aval_of(i).dtype)
                i = P.select.bind(P.BINARY["lt"].bind(i, np.zeros((), aval_of(i).dtype)), add(i, size), i)
            out.append(i)
    return out


def _zeros_for(aval: Any, ct: Any) -> Any:
    """Zeros of type `aval` to scatter the cotangent `ct` into: partial sums too where `ct` is unreduced. A plain
    zero is broadcast by the program (a jit program can then see that it is zero: interpreters/simplify.py)."""
    base = zeros(aval)
    if isinstance(base, np.ndarray):
        base = P.broadcast_in_dim.bind(np.zeros((), aval.dtype), shape=tuple(aval.shape), broadcast_dimensions=())
    partial = aval_of(ct)
    if partial.unreduced and partial.mesh is not None:
        spec = PartitionSpec.from_entries(aval.explicit, unreduced=partial.unreduced)
        base = P.sharding_constraint.bind(base, sharding=NamedSharding(partial.mesh, spec))
    return base


deflinear(P.static_slice, lambda ct, x, *, index: [P.scatter.bind(
    _zeros_for(x.aval, ct), ct, index=_canonical(index, x.aval.shape), mode="add")])


deflinear(W.windows, lambda ct, x, **params: [W.windows_sum.bind(
    ct, sizes=tuple(x.aval.shape[params["first"]:params["first"] + len(params["window"])]), **params)])
deflinear(W.windows_sum, lambda ct, y, *, sizes, **params: [W.windows.bind(ct, **params)])


def _gather_jvp(primals: list[Any], tangents: list[Any], *, index: tuple) -> tuple[Any, Any]:
    ans = P.gather.bind(*primals, index=index)
    if isinstance(tangents[0], Zero):
        return ans, Zero(tangent_aval(aval_of(ans)))
    return ans, P.gather.bind(tangents[0], *primals[1:], index=index)


def _gather_transpose(ct: Any, x: Any, *indices: Any, index: tuple) -> list[Any]:
    shape = x.aval.shape
    arrays = _wrapped(indices, index, shape)
    scattered = P.scatter.bind(_zeros_for(x.aval, ct), ct, *arrays, index=_canonical(index, shape), mode="add")
    return [scattered] + [None] * len(indices)


jvp_rules[P.gather] = _gather_jvp
transpose_rules[P.gather] = _gather_transpose


def _take_along_jvp(primals: list[Any], tangents: list[Any], *, axis: int) -> tuple[Any, Any]:
    ans = P.take_along.bind(*primals, axis=axis)
    if isinstance(tangents[0], Zero):
        return ans, Zero(tangent_aval(aval_of(ans)))
    return ans, P.take_along.bind(tangents[0], primals[1], axis=axis)


def _take_along_transpose(ct: Any, x: Any, idx: Any, *, axis: int) -> list[Any]:
    """Scatter-add ct at (iota, ..., idx, ..., iota): every element back where it was taken from."""
    idx_shape = aval_of(idx).shape
    arrays = []
    for d, n in enumerate(idx_shape):
        if d == axis:
            arrays.extend(_wrapped([idx], ["array"], [x.aval.shape[axis]]))
        else:
            arrays.append(np.arange(n, dtype=np.int32).reshape([-1 if k == d else 1 for k in range(len(idx_shape))]))
    return [P.scatter.bind(zeros(x.aval), ct, *arrays, index=("array",) * len(idx_shape), mode="add"), None]


jvp_rules[P.take_along] = _take_along_jvp
transpose_rules[P.take_along] = _take_along_transpose


def _scatter_jvp(primals: list[Any], tangents: list[Any], *, index: tuple, mode: str) -> tuple[Any, Any]:
    if mode not in ("add", "set", "multiply"):
        raise NotImplementedError(f"Differentiation rule for 'scatter' with mode={mode!r} not implemented")
    ans = P.scatter.bind(*primals, index=index, mode=mode)
    if isinstance(tangents[0], Zero) and isinstance(tangents[1], Zero):
        return ans, Zero(tangent_aval(aval_of(ans)))
    if mode == "multiply":  # d(x[i] * y) = dx[i] * y + x[i] * dy (indices assumed distinct)
        x, y, *indices = primals
        out = P.scatter.bind(instantiate(tangents[0]), y, *indices, index=index, mode="multiply")
        if not isinstance(tangents[1], Zero):
            taken = _taken(x, indices, index)
            out = add(out, P.scatter.bind(zeros(aval_of(x)), mul(taken, tangents[1]), *indices, index=index,
                                          mode="add"))
        return ans, out
    return ans, P.scatter.bind(instantiate(tangents[0]), instantiate(tangents[1]), *primals[2:], index=index,
                               mode=mode)


def _taken(x: Any, indices: Sequence[Any], index: tuple) -> Any:
    """x at a scatter's index (the region the updates land in)."""
    if "array" in index:
        return P.gather.bind(x, *indices, index=tuple(e for e in index if e is not None))
    return P.static_slice.bind(x, index=tuple(_basic(e) for e in index))


def _scatter_transpose(ct: Any, x: Any, y: Any, *indices: Any, index: tuple, mode: str) -> list[Any]:
    if mode == "add":
        ct_x = ct
    elif mode == "multiply":
        ct_x = P.scatter.bind(ct, y, *indices, index=index, mode="multiply")
    else:
        ct_x = P.scatter.bind(ct, np.zeros((), aval_of(ct).dtype), *indices, index=index, mode="set")
    ct_y = unbroadcast(_taken(ct, indices, index), y.aval) if is_undefined(y) else None
    return [ct_x if is_undefined(x) else None, ct_y] + [None] * len(indices)


jvp_rules[P.scatter] = _scatter_jvp
transpose_rules[P.scatter] = _scatter_transpose

# ---- random's helpers ------------------------------------------------------------------------------------------

defjvp(R.fma_p, lambda g, ans, a, b, c: broadcast_to(mul(g, b), aval_of(ans).shape),
       lambda g, ans, a, b, c: broadcast_to(mul(a, g), aval_of(ans).shape),
       lambda g, ans, a, b, c: broadcast_to(g, aval_of(ans).shape))
defjvp(R.erf_inv_p, lambda g, ans, x: mul(g, mul(np.asarray(math.sqrt(math.pi) / 2, aval_of(x).dtype),
                                                  P.UNARY["exp"].bind(mul(ans, ans)))))
