"""Sharding rules: for each primitive, where its inputs must be and where its outputs land.

A spec here is a tuple with one entry per array dimension, each a tuple of mesh axis
names (empty: not split). A rule gets the specs the inputs have now and returns a
Layout: the specs the inputs must have for a purely local computation, the outputs'
specs, the mesh axes over which the local results must then be reduced, and where
the outputs finally go when that is not where they were computed (e.g. a sort keeps
its sorted dimension split: it is sorted whole on each device, then each device keeps
its block).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..core.core import ShapedArray

Spec = tuple[tuple[str, ...], ...]


@dataclass
class Layout:
    in_specs: list[Spec]
    out_specs: list[Spec]
    reduce_axes: tuple[str, ...] = ()
    reduce_op: str = "sum"
    # where the outputs go after the computation (each entry cut to the axes that split its dimension evenly);
    # None: they stay as out_specs
    result_specs: list[Spec] | None = None


def fit(entry: tuple[str, ...], size: int, mesh_shape: dict[str, int]) -> tuple[str, ...]:
    """The longest leading part of `entry` whose axes split `size` evenly (as JAX requires of a result)."""
    parts = 1
    for i, name in enumerate(entry):
        parts *= mesh_shape[name]
        if size % parts:
            return entry[:i]
    return entry


def replicated(ndim: int) -> Spec:
    return ((),) * ndim


def used_axes(spec: Spec) -> set[str]:
    return {name for entry in spec for name in entry}


def unshard_dims(spec: Spec, dims: Sequence[int]) -> Spec:
    drop = set(d % max(len(spec), 1) for d in dims) if spec else set()
    return tuple(() if i in drop else entry for i, entry in enumerate(spec))


# ---- elementwise --------------------------------------------------------------------------------

def elementwise(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, mesh_shape: dict[str, int],
                **_: Any) -> Layout:
    """Broadcasting n-ary op, splitting the output as JAX's does: the operands of the output's shape decide
    first (an operand broadcast along some dimension only fills dimensions they leave whole); see `merge_specs`."""
    ndim = max((a.ndim for a in avals), default=0)
    out_shape = broadcast_shapes(*[a.shape for a in avals])
    aligned = []
    for spec, aval in zip(specs, avals):
        offset = ndim - aval.ndim
        aligned.append(tuple(
            spec[dim - offset] if dim >= offset and aval.shape[dim - offset] == out_shape[dim] != 1 else ()
            for dim in range(ndim)))
    out = [()] * ndim
    used: set[str] = set()
    for broadcast in (False, True):
        group = [spec for spec, aval in zip(aligned, avals) if (aval.shape != out_shape) == broadcast]
        fill_whole_dims(out, used, merge_specs(group, mesh_shape))
    out_spec = tuple(out)
    in_specs = []
    for aval in avals:
        offset = ndim - aval.ndim
        in_specs.append(tuple(
            out_spec[offset + d] if aval.shape[d] == out_shape[offset + d] and out_shape[offset + d] != 1 else ()
            for d in range(aval.ndim)
        ))
    return Layout(in_specs, [out_spec])


def merge_specs(specs: Sequence[Spec], mesh_shape: dict[str, int]) -> list[tuple[int, tuple[str, ...]]]:
    """Same-shaped operands' splits, as (dimension, entry) in the order they claim mesh axes: per dimension
    the entry all operands split along it agree on (see `agreed_entry`), more devices first, then the
    first operand's."""
    claims = []
    for dim, entries in enumerate(zip(*specs)):
        entry = agreed_entry(entries)
        if entry:
            first = next(i for i, e in enumerate(entries) if e)
            claims.append((-parts(entry, mesh_shape), first, dim, entry))
    return [(dim, entry) for *_, dim, entry in sorted(claims)]


def fill_whole_dims(out: list[tuple[str, ...]], used: set[str], claims: Sequence[tuple[int, tuple[str, ...]]]
                    ) -> None:
    """Give each still whole dimension of `out` its claimed entry, cut before the first axis already used."""
    for dim, entry in claims:
        if out[dim]:
            continue
        kept = unused_prefix(entry, used)
        out[dim] = kept
        used |= set(kept)


def agreed_entry(entries: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest of `entries` when the others are leading parts of it; else none (they disagree)."""
    longest = max(entries, key=len, default=())
    return longest if all(longest[:len(e)] == e for e in entries) else ()


def unused_prefix(entry: tuple[str, ...], used: set[str]) -> tuple[str, ...]:
    """The leading part of `entry` before its first axis in `used`."""
    for i, name in enumerate(entry):
        if name in used:
            return entry[:i]
    return entry


def parts(entry: tuple[str, ...], mesh_shape: dict[str, int]) -> int:
    """How many blocks `entry` splits a dimension into."""
    count = 1
    for name in entry:
        count *= mesh_shape[name]
    return count


def agreed_spec(specs: Sequence[Spec]) -> Spec:
    """Per dimension, the split the inputs split along it agree on: the longest, when the others are leading
    parts of it; else none. An axis already used by an earlier dimension is not used again."""
    out: list[tuple[str, ...]] = []
    taken: set[str] = set()
    for entries in zip(*specs):
        entry = agreed_entry(entries)
        entry = () if set(entry) & taken else entry
        taken |= set(entry)
        out.append(entry)
    return tuple(out)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for dim in range(ndim):
        sizes = {s[dim - (ndim - len(s))] for s in shapes if dim >= ndim - len(s)}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ValueError(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast together (dimension {dim}).")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


# ---- reductions -----------------------------------------------------------------------------------

def reduction(op: str):
    """Reduce over `axes`: reduce each shard locally, then across the mesh axes that split reduced dims."""

    def rule(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, axes: tuple[int, ...],
             keepdims: bool = False, **_: Any) -> Layout:
        spec = specs[0]
        reduce_axes = tuple(name for d in axes for name in spec[d])
        if keepdims:
            out = tuple(() if d in axes else entry for d, entry in enumerate(spec))
        else:
            out = tuple(entry for d, entry in enumerate(spec) if d not in axes)
        return Layout([spec] + [replicated(a.ndim) for a in avals[1:]], [out], reduce_axes, op)

    return rule


def along_axes(axes_param: str = "axes", vectors_whole: bool = False):
    """Ops that need whole dimensions `axes` on every device (cumsum, sort, flip, pad...); the result keeps
    the input's split of those dimensions where it divides the result evenly, as JAX's does (with
    `vectors_whole`, a rank-1 result stays whole, as JAX's sorts of vectors do)."""

    def rule(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, mesh_shape: dict[str, int],
             out_ndims: Sequence[int], **params: Any) -> Layout:
        axes = params[axes_param]
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        spec = unshard_dims(specs[0], [a % max(avals[0].ndim, 1) for a in axes]) if avals[0].ndim else ()
        others = [replicated(a.ndim) for a in avals[1:]]
        whole = vectors_whole and avals[0].ndim == 1
        return Layout([spec] + others, [spec], result_specs=None if whole else [specs[0]] * len(out_ndims))

    return rule


def dropping_axes(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, axes: tuple[int, ...], **_: Any) -> Layout:
    """Arg-reductions (argmax...): the reduced dimensions must be whole; they disappear from the output."""
    spec = unshard_dims(specs[0], axes)
    return Layout([spec], [tuple(e for d, e in enumerate(spec) if d not in axes)])


def replicate_all(specs: Sequence[Spec], avals: Sequence[ShapedArray], out_ndims: Sequence[int] = (), **_: Any) -> Layout:
    """The safe fallback: every input whole on every device, outputs replicated."""
    return Layout([replicated(a.ndim) for a in avals], [replicated(n) for n in out_ndims])


# ---- shape ops ----------------------------------------------------------------------------------------

def transpose(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, permutation: tuple[int, ...], **_: Any) -> Layout:
    return Layout([specs[0]], [tuple(specs[0][p] for p in permutation)])


def broadcast_in_dim(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, shape: tuple[int, ...],
                     broadcast_dimensions: tuple[int, ...], **_: Any) -> Layout:
    aval = avals[0]
    spec = tuple(entry if aval.shape[i] == shape[broadcast_dimensions[i]] else ()
                 for i, entry in enumerate(specs[0]))
    out = [()] * len(shape)
    for i, dim in enumerate(broadcast_dimensions):
        out[dim] = spec[i]
    return Layout([spec], [tuple(out)])


def reshape(specs: Sequence[Spec], avals: Sequence[ShapedArray], *, new_sizes: tuple[int, ...],
            mesh_shape: dict[str, int], **_: Any) -> Layout:
    """Per group of merged/split dimensions: keep the splits that make each device's block one contiguous
    run of the group's row-major elements, and lay that run out over the new dimensions."""
    old = avals[0].shape
    keep = list(replicated(len(old)))
    out = [()] * len(new_sizes)
    if 0 in old:
        return Layout([tuple(keep)], [tuple(out)])
    for old_dims, new_dims in _reshape_groups(old, new_sizes):
        chain = _contiguous_chain([old[d] for d in old_dims], [specs[0][d] for d in old_dims], mesh_shape)
        for length in range(len(chain), -1, -1):
            placed = _place_chain([a for _, a in chain[:length]], [new_sizes[d] for d in new_dims], mesh_shape)
            if placed is not None:
                break
        for i, name in chain[:length]:
            keep[old_dims[i]] += (name,)
        for j, entry in enumerate(placed):
            out[new_dims[j]] = entry
    return Layout([tuple(keep)], [tuple(out)])


def _contiguous_chain(sizes: Sequence[int], spec: Sequence[tuple[str, ...]], mesh_shape: dict[str, int]
                      ) -> list[tuple[int, str]]:
    """The (dimension, axis) splits, in order, under which every block is one contiguous run of elements:
    leading dimensions split into single rows, then one split evenly, the rest whole."""
    chain: list[tuple[int, str]] = []
    for i, (size, entry) in enumerate(zip(sizes, spec)):
        parts = 1
        for name in entry:
            if size % (parts * mesh_shape[name]):
                return chain
            parts *= mesh_shape[name]
            chain.append((i, name))
        if parts != size:
            return chain
    return chain


def _place_chain(axes: Sequence[str], sizes: Sequence[int], mesh_shape: dict[str, int]
                 ) -> list[tuple[str, ...]] | None:
    """Split dimensions of `sizes` over `axes` in order, each wholly before the next one is split; None if
    the axes do not fit so."""
    placed: list[tuple[str, ...]] = [() for _ in sizes]
    remaining = list(axes)
    for j, size in enumerate(sizes):
        parts = 1
        while remaining and size % (parts * mesh_shape[remaining[0]]) == 0:
            parts *= mesh_shape[remaining[0]]
            placed[j] += (remaining.pop(0),)
        if parts != size:
            break
    return None if remaining else placed


def _reshape_groups(old: Sequence[int], new: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of old and new dimensions whose sizes have equal products."""
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        old_dims, new_dims = [], []
        a = b = 1
        while True:
            if a == b and old_dims and new_dims:
                break
            if (a <= b and i < len(old)) or j >= len(new):
                if i >= len(old):
                    break
                a *= old[i]
                old_dims.append(i)
                i += 1
            else:
                b *= new[j]
                new_dims.append(j)
                j += 1
        while i < len(old) and old[i] == 1 and a == b:
            old_dims.append(i)
            i += 1
        groups.append((old_dims, new_dims))
    return groups


# ---- contractions -------------------------------------------------------------------------------------------

def dot_general(specs: Sequence[Spec], avals: Sequence[ShapedArray], *,
                dimension_numbers: tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]],
                **_: Any) -> Layout:
    """The output splits as JAX's: each batch dimension as both operands agree, each free dimension as its
    operand has it; mesh axes are claimed by the dimensions of the larger operand (the one giving a batch
    dimension its split) first, then batch before free ones, then lhs's first; the rest are cut before an
    axis already used. Contracted dimensions split alike on both sides (over axes the output does not use)
    are summed over afterwards."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    lhs, rhs = list(specs[0]), list(specs[1])
    lhs_free = [d for d in range(len(lhs)) if d not in lhs_contract and d not in lhs_batch]
    rhs_free = [d for d in range(len(rhs)) if d not in rhs_contract and d not in rhs_batch]
    batch = [agreed_entry((lhs[l], rhs[r])) for l, r in zip(lhs_batch, rhs_batch)]
    candidates = batch + [lhs[d] for d in lhs_free] + [rhs[d] for d in rhs_free]
    sources = [0 if entry == lhs[l] else 1 for entry, l in zip(batch, lhs_batch)] + [0] * len(lhs_free) + \
        [1] * len(rhs_free)
    order = sorted(range(len(candidates)), key=lambda i: (-avals[sources[i]].size, i >= len(batch), sources[i]))
    out: list[tuple[str, ...]] = [()] * len(candidates)
    used: set[str] = set()
    fill_whole_dims(out, used, [(i, candidates[i]) for i in order])
    for i, (l, r) in enumerate(zip(lhs_batch, rhs_batch)):
        lhs[l] = rhs[r] = out[i]
    for i, d in enumerate(lhs_free, start=len(batch)):
        lhs[d] = out[i]
    for i, d in enumerate(rhs_free, start=len(batch) + len(lhs_free)):
        rhs[d] = out[i]
    reduce_axes: list[str] = []
    for lc, rc in zip(lhs_contract, rhs_contract):
        entry = unused_prefix(lhs[lc] or rhs[rc], used)
        lhs[lc] = rhs[rc] = entry
        used |= set(entry)
        reduce_axes.extend(entry)
    return Layout([tuple(lhs), tuple(rhs)], [tuple(out)], tuple(reduce_axes), "sum")
