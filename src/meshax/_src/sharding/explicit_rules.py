"""Typing rules for Explicit mesh axes, by primitive name: the Explicit axes splitting each output dimension, from
those of the inputs (JAX 0.10's rules, with its errors where the result's sharding would be ambiguous).

A rule gets the primitive's name, the inputs' specs (per dimension, a tuple of Explicit axis names), their avals,
the outputs' avals (shapes), the mesh and the primitive's parameters, and returns one spec per output.
Elementwise primitives use `broadcasting`; primitives without a rule here fall back to their sharding rule.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import ShapedArray, ShardingTypeError
from ..core.dtypes import issubdtype
from .placement_rules import Spec, _place_chain, _reshape_groups, broadcast_shapes
from .shardings import NamedSharding, PartitionSpec

RULES: dict[str, Callable[..., list[Spec]]] = {}


def format_spec(spec: Spec) -> tuple:
    """A spec as JAX prints one in messages: ('X', None, ('X', 'Y'))."""
    return tuple(None if not e else (e[0] if len(e) == 1 else e) for e in spec)


def _parts(entry: Sequence[str], mesh: Any) -> int:
    return math.prod(mesh.shape[a] for a in entry)


def _entry_text(entry: Sequence[str]) -> str:
    return ", ".join(entry)


def _rule(*names: str) -> Callable[[Callable[..., list[Spec]]], Callable[..., list[Spec]]]:
    def register(fun: Callable[..., list[Spec]]) -> Callable[..., list[Spec]]:
        for name in names:
            RULES[name] = fun
        return fun

    return register


def broadcasting(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any,
                 **_: Any) -> list[Spec]:
    """Elementwise ops: each output dimension is split as the operands that have it agree (an operand of size 1
    there, or not split, defers to the others); two different splits of one dimension are an error."""
    ndim = outs[0].ndim
    out: list[tuple[str, ...]] = []
    for dim in range(ndim):
        found = []
        for spec, aval in zip(specs, avals):
            d = dim - (ndim - aval.ndim)
            if d >= 0:
                found.append((spec[d], aval.shape[d]))
        chosen: tuple[str, ...] = ()
        for entry, size in found:
            if not entry:
                continue
            if chosen and entry != chosen:
                shown = ", ".join(str(format_spec(s)) for s, a in zip(specs, avals) if a.ndim)
                raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: {shown}.")
            chosen = entry
        out.append(chosen)
    used = [a for e in out for a in e]
    if len(used) != len(set(used)):
        inputs = ", ".join(a.str_short() for a in avals)
        raise ShardingTypeError(f"{name} operation with inputs: {inputs} produces an illegally sharded result: "
                                f"{outs[0].update(explicit=tuple(out)).str_short()}")
    return [tuple(out)] * len(outs)


@_rule("reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_or", "reduce_and", "argmax", "argmin")
def _reduction(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
               axes: tuple[int, ...], keepdims: bool = False, **_: Any) -> list[Spec]:
    spec = specs[0]
    if keepdims:
        return [tuple(() if d in axes else e for d, e in enumerate(spec))]
    return [tuple(e for d, e in enumerate(spec) if d not in axes)]


@_rule("cumsum", "cumprod", "cummax", "cummin")
def _cumulative(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
                axis: int, **_: Any) -> list[Spec]:
    if specs[0][axis]:
        raise ShardingTypeError(f"Input should be unsharded over the axis being reduced. Got input type={avals[0]} "
                                f"and axis={axis}")
    return [specs[0]] * len(outs)


@_rule("sort", "argsort")
def _sort(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
          axis: int, **_: Any) -> list[Spec]:
    for spec in specs:
        if spec[axis]:
            sharding = NamedSharding(mesh, PartitionSpec(*format_spec(spec)))
            raise ShardingTypeError(f"Arguments to sort must be unsharded over the sorting dimension. Got arg "
                                    f"sharding={sharding} and sorting dimension={axis}")
    return [specs[0]] * len(outs)


@_rule("transpose")
def _transpose(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
               permutation: tuple[int, ...], **_: Any) -> list[Spec]:
    return [tuple(specs[0][p] for p in permutation)]


@_rule("broadcast_in_dim")
def _broadcast_in_dim(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray],
                      mesh: Any, *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...],
                      **_: Any) -> list[Spec]:
    out: list[tuple[str, ...]] = [()] * len(shape)
    for i, dim in enumerate(broadcast_dimensions):
        out[dim] = specs[0][i] if avals[0].shape[i] == shape[dim] else ()
    return [tuple(out)]


@_rule("dot_general")
def _dot_general(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
                 dimension_numbers: Any, **_: Any) -> list[Spec]:
    """Batch dimensions split alike on both sides; contracting ones split on one side only (the result is whole
    there) or the result's sharding is ambiguous; free dimensions keep their splits."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = specs
    lhs_batch, rhs_batch = tuple(lhs[d] for d in lb), tuple(rhs[d] for d in rb)
    if any(a and b and a != b for a, b in zip(lhs_batch, rhs_batch)):
        raise ShardingTypeError("dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
                                f"consistent sharding, got {format_spec(lhs_batch)} and {format_spec(rhs_batch)}.")
    lhs_contract, rhs_contract = tuple(lhs[d] for d in lc), tuple(rhs[d] for d in rc)
    if any(a and b for a, b in zip(lhs_contract, rhs_contract)):
        raise ShardingTypeError(
            "Contracting dimensions are sharded and it is ambiguous how the output should be sharded. Please specify "
            "the output sharding via the `out_sharding` parameter. Got "
            f"lhs_contracting_spec={format_spec(lhs_contract)} and rhs_contracting_spec={format_spec(rhs_contract)}")
    out = ([a or b for a, b in zip(lhs_batch, rhs_batch)]
           + [lhs[d] for d in range(len(lhs)) if d not in lc and d not in lb]
           + [rhs[d] for d in range(len(rhs)) if d not in rc and d not in rb])
    used = [a for e in out for a in e]
    if len(used) != len(set(used)):
        shown = outs[0].update(explicit=tuple(out)).str_short()
        raise ShardingTypeError(f"dot_general operation with inputs: {avals[0].str_short()}, "
                                f"{avals[1].str_short()} produces an illegally sharded result: {shown}")
    return [tuple(out)]


@_rule("reshape")
def _reshape(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
             new_sizes: tuple[int, ...], **_: Any) -> list[Spec]:
    """Per group of merged or split dimensions: merged ones keep their splits if the split dimensions lead the
    group; a split one spreads its axes over the new dimensions in order, each split wholly before the next."""
    old, spec = avals[0].shape, specs[0]
    out: list[tuple[str, ...]] = [()] * len(new_sizes)
    if not any(spec) or 0 in old:
        return [tuple(out)]
    for old_dims, new_dims in _reshape_groups(old, new_sizes):
        old_dims = [d for d in old_dims if old[d] != 1] or old_dims[:1]
        new_dims = [d for d in new_dims if new_sizes[d] != 1] or new_dims[:1]
        group = [spec[d] for d in old_dims]
        if not any(group):
            continue
        placed: Any = None
        if len(new_dims) == 1:
            split = [bool(e) for e in group]
            if split == sorted(split, reverse=True):
                placed = [tuple(a for e in group for a in e)]
        elif len(old_dims) == 1:
            placed = _place_chain(group[0], [new_sizes[d] for d in new_dims], dict(mesh.shape))
        if placed is None:
            raise ShardingTypeError(
                "This reshape is not supported. Please specify the sharding of the output via the `out_sharding` "
                f"argument of jax.lax.reshape. Got operand type: {avals[0]}, new sizes: {tuple(new_sizes)}")
        for d, entry in zip(new_dims, placed):
            out[d] = entry
    return [tuple(out)]


def _check_divisible(what: str, spec: Spec, aval: ShapedArray, out: ShapedArray, dims: Sequence[tuple[int, int]],
                     mesh: Any) -> None:
    """Dimensions cut or grown (input dim, output dim) keep their split only if it divides them evenly."""
    for d, o in dims:
        if spec[d] and out.shape[o] % _parts(spec[d], mesh):
            raise ShardingTypeError(
                f"{what} on sharded dims where out dim ({out.shape[o]}) is not divisible by mesh axes "
                f"({_parts(spec[d], mesh)}) with spec ({_entry_text(spec[d])}) is not implemented. Got input "
                f"type={aval.str_short()} and output shape={tuple(out.shape)}")


@_rule("slice")
def _slice(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
           index: tuple[Any, ...], **_: Any) -> list[Spec]:
    """Basic indexing: a sliced dimension keeps its split where the slice divides evenly; an integer index takes
    a slice of size 1 (an error on a split dimension, as JAX's); None adds a whole dimension."""
    spec, shape = specs[0], avals[0].shape
    out: list[tuple[str, ...]] = []
    cut: list[tuple[int, int]] = []
    dim = 0
    for entry in index:
        if entry is None:
            out.append(())
            continue
        if isinstance(entry, slice):
            if entry.indices(shape[dim]) != (0, shape[dim], 1):
                cut.append((dim, len(out)))
            out.append(spec[dim])
        elif spec[dim]:
            one = ShapedArray(shape[:dim] + (1,) + shape[dim + 1:], avals[0].dtype)
            _check_divisible("slicing", spec, avals[0], one, [(dim, dim)], mesh)
        dim += 1
    out.extend(spec[dim:])
    _check_divisible("slicing", spec, avals[0], outs[0], cut, mesh)
    return [tuple(out)]


@_rule("pad")
def _pad(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
         axes: tuple[int, ...], **_: Any) -> list[Spec]:
    _check_divisible("padding", specs[0], avals[0], outs[0], [(d, d) for d in axes], mesh)
    return [specs[0]]


@_rule("concatenate")
def _concatenate(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any,
                 **_: Any) -> list[Spec]:
    if any(s != specs[0] for s in specs[1:]):
        shown = ", ".join(str(NamedSharding(mesh, PartitionSpec(*format_spec(s)))) for s in specs)
        raise ShardingTypeError(f"All operands should have the same sharding. Got shardings {shown}")
    return [specs[0]]


@_rule("gather")
def _gather(name: str, specs: list[Spec], avals: Sequence[ShapedArray], outs: list[ShapedArray], mesh: Any, *,
            index: tuple[Any, ...], **_: Any) -> list[Spec]:
    """Dimensions taken whole keep their split; a split dimension that index arrays or integers pick from is
    ambiguous (JAX's message asks for .at[...].get(out_sharding=)); index arrays' dimensions are whole."""
    spec = specs[0]
    for d, entry in enumerate(index):
        if not isinstance(entry, slice) and spec[d]:
            raise ShardingTypeError(
                "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather indexing as out "
                "sharding could not be resolved unambiguously (or would require collectives on inputs). Got "
                f"operand={avals[0]!r}, indices={avals[1] if len(avals) > 1 else None!r}")
    arrays = avals[1:]
    sources = gather_sources(index, len(broadcast_shapes(*[a.shape for a in arrays])) if arrays else 0)
    out = [spec[s] if s is not None else () for s in sources]
    cut = [(s, o) for o, s in enumerate(sources)
           if s is not None and index[s].indices(avals[0].shape[s]) != (0, avals[0].shape[s], 1)]
    _check_divisible("slicing", spec, avals[0], outs[0], cut, mesh)
    return [tuple(out)]


def gather_sources(index: tuple[Any, ...], array_ndim: int) -> list[int | None]:
    """For each dimension of x[index], the dimension of x it comes from (None: from the index arrays), by
    NumPy's rule: the arrays' dimensions (integers count as arrays when there are some) replace the first
    indexed dimension if the indexed dimensions are adjacent, else they come first."""
    if "array" not in index:
        return [d for d, i in enumerate(index) if isinstance(i, slice)]
    advanced = [d for d, i in enumerate(index) if not isinstance(i, slice)]
    sliced = [d for d, i in enumerate(index) if isinstance(i, slice)]
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
    at = sum(1 for d in sliced if d < advanced[0]) if adjacent else 0
    return sliced[:at] + [None] * array_ndim + sliced[at:]


# ---- unreduced (partial sums) and reduced axes -------------------------------------------------------------------

_KEEPS_PARTIAL_SUMS = frozenset({"reduce_sum", "transpose", "reshape", "broadcast_in_dim", "squeeze", "expand_dims",
                                 "convert_element_type", "copy", "rev", "slice", "neg", "real", "imag",
                                 "conj"})  # linear in their one operand
_SUMS_OF_PARTIAL_SUMS = frozenset({"add", "add_any", "sub"})  # linear in both operands together
_NOT_ELEMENTWISE_PREFIXES = ("reduce_", "cum", "arg", "sort", "dot", "conv", "gather", "scatter", "dynamic_")


def _shaped(aval: ShapedArray) -> str:
    return f"ShapedArray({aval})"


def _unreduced_axes(name: str, avals: Sequence[ShapedArray]) -> frozenset:
    """The axes the result of `name` is unreduced over, as JAX types it (operations linear in their unreduced
    operands only; anything else would need a reduction first, which JAX makes explicit)."""
    unreduced = [a.unreduced for a in avals]
    if name in _SUMS_OF_PARTIAL_SUMS or name in ("select_n", "select") and len(avals) > 1 and not avals[0].unreduced:
        values = list(avals[1:]) if name.startswith("select") else list(avals)
        if all(a.unreduced == values[0].unreduced for a in values):
            return values[0].unreduced
        which, other = ("lhs", "rhs") if values[0].unreduced else ("rhs", "lhs")
        if all(a.unreduced for a in values):
            raise ShardingTypeError(f"{name} operands are unreduced over different axes: {values[0]} and {values[1]}; "
                                    "reshard them to the same unreduced axes first.")
        raise ShardingTypeError(f"{which} is unreduced while {other} is not. `{name}` operation does not allow this "
                                f"because there will be implicit communication. Please reduce {which} via `reshard` "
                                f"before calling `{name}`.")
    if name in _KEEPS_PARTIAL_SUMS and len(avals) == 1:
        return unreduced[0]
    values = [a for a in avals if issubdtype(a.dtype, np.inexact)]  # (not the integer indices)
    if name in ("scatter", "dynamic_update_slice", "concatenate") and values \
            and all(a.unreduced == values[0].unreduced for a in values):
        return values[0].unreduced  # linear in all its values together
    if name == "mul" and len(avals) == 2 and all(unreduced):
        raise ShardingTypeError(f"lhs and rhs to `mul` cannot be unreduced since mul is bilinear. Got "
                                f"lhs={unreduced[0]}, rhs={unreduced[1]}")
    if name in ("mul", "dot_general") and len(avals) == 2 and sum(bool(u) for u in unreduced) == 1:
        index = 0 if unreduced[0] else 1
        if avals[1 - index].reduced >= unreduced[index]:
            return unreduced[index]
        raise ShardingTypeError(f"{'RHS' if index == 0 else 'LHS'} should be reduced along the same axes "
                                f"{'LHS' if index == 0 else 'RHS'} is unreduced on. Got lhs={avals[0]} and "
                                f"rhs={avals[1]}")
    if name == "div" and len(avals) == 2 and unreduced[0] and not unreduced[1]:
        if avals[1].reduced >= unreduced[0]:
            return unreduced[0]
        raise ValueError(f"Denominator should be reduced along the same axes numerator is unreduced on. Got "
                         f"x={_shaped(avals[0])}, y={_shaped(avals[1])}")
    if _elementwise(name, avals):
        if len(avals) == 1:
            raise ShardingTypeError(f"{name} is a non-linear operation and cannot accept input that is unreduced. "
                                    f"Got {avals[0]}")
        raise ShardingTypeError(f"{name} is a non-linear operation and cannot accept inputs that are unreduced. Got "
                                f"({', '.join(_shaped(a) for a in avals)})")
    raise NotImplementedError(f"unreduced rule for {name} is not implemented. Please file an issue at "
                              "https://github.com/jax-ml/jax/issues")


def _elementwise(name: str, avals: Sequence[ShapedArray]) -> bool:
    """Whether `name` looks like an elementwise operation: operands of one shape (or scalars)."""
    shapes = {tuple(a.shape) for a in avals if a.shape}
    return len(shapes) <= 1 and not name.startswith(_NOT_ELEMENTWISE_PREFIXES)


def partial_sum_types(name: str, avals: Sequence[ShapedArray], outs: list[ShapedArray],
                      target: PartitionSpec | None) -> list[ShapedArray]:
    """`outs` with the axes they are unreduced and reduced over: those of `target` (an operation's sharding or
    out_sharding) when given, else from the operands: reduced axes stay where every array operand has them and
    no dimension of the result is split over them."""
    mesh = next((a.mesh for a in avals if a.mesh is not None), None)
    if target is not None:
        return [o.update(unreduced=target.unreduced, reduced=target.reduced, mesh=o.mesh or mesh) for o in outs]
    unreduced = _unreduced_axes(name, avals) if any(a.unreduced for a in avals) else frozenset()
    arrays = [a for a in avals if a.ndim] or list(avals)
    reduced = frozenset.intersection(*[a.reduced for a in arrays]) - unreduced
    typed = []
    for out in outs:
        kept = reduced - {axis for entry in out.explicit for axis in entry}
        typed.append(out.update(unreduced=unreduced, reduced=kept, mesh=out.mesh or mesh))
    return typed
