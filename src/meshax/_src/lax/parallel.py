"""Collectives over mesh axes (psum, all_gather, ppermute, ...), usable inside shard_map.

Each is a primitive whose abstract evaluation reads the named-axis environment, whose
vma rule says which manual axes its result varies over, whose device rule combines the
per-device values of a DeviceTrace, and whose jvp and transpose rules make it
differentiable (psum <-> pvary, all_gather <-> psum_scatter, ppermute <-> its inverse).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..runtime import buffers
from ..runtime import devices as device_table
from .. import numpy as jnp
from ..arrays.collectives import (allreduce_devices, allreduce_devices_many, gather_devices, group_index, local_groups,
                                  permute_devices)
from ..core.core import (Primitive, ShapedArray, Tracer, abstract_eval, abstract_eval_rules, aval_of, axis_size,
                         manual_axes, pvary_p, vma_checked, vma_rules)
from ..interpreters.ad import deflinear, defzero, jvp_rules, transpose_rules
from ..interpreters import schedule
from ..arrays.joined_values import joined_values
from ..interpreters.numpy_eval import alone_rules
from ..interpreters.process_blocks import join_blocks
from ..interpreters.shard_map import DeviceTrace, device_rules
from ..tree.tree_util import tree_flatten, tree_map, tree_unflatten
from .unreduced_casts import PCAST_TARGETS, pcast_leaf, psum_of_unreduced


def _names(axis_name: Any) -> tuple[str, ...]:
    if not isinstance(axis_name, (str, tuple, list)):
        raise TypeError(f"axis_name must be a mesh axis name or a tuple of names; got {axis_name!r}.")
    names = (axis_name,) if isinstance(axis_name, str) else tuple(axis_name)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"axis_name must be a mesh axis name or a tuple of names; got {axis_name!r}.")
    return names


def _groups(name: str, axis_index_groups: Any, axes: tuple[str, ...]) -> tuple[tuple[int, ...], ...] | None:
    """`axis_index_groups` checked and as tuples: groups of equal size that together hold each index along `axes`
    once (None: one group of all devices)."""
    if axis_index_groups is None:
        return None
    n = axis_size(axes, name)
    unmapped = [a for a in axes if a not in manual_axes()]
    if unmapped:
        raise NotImplementedError(f"{name}: axis_index_groups is not supported in vmap collectives (axis "
                                  f"{unmapped[0]!r} is a vmap axis); apply {name} without groups there.")
    groups = tuple(tuple(int(i) for i in group) for group in axis_index_groups)
    if sorted(i for group in groups for i in group) != list(range(n)):
        raise ValueError(f"{name}: axis_index_groups must cover all indices exactly once: {groups} does not hold each "
                         f"of 0..{n - 1} (the devices along {axes}) once.")
    if len({len(group) for group in groups}) != 1:
        raise ValueError(f"{name}: axis_index_groups {groups} must all have the same size.")
    return groups


def _in_group(leaf: Any, axes: tuple[str, ...], groups: tuple[tuple[int, ...], ...]) -> tuple[Any, Any]:
    """The values of `leaf` on the members of this device's group, stacked in the group's order, and this device's
    position in its group."""
    n = axis_size(axes, "axis_index_groups")
    members = np.zeros((n, len(groups[0])), np.int32)
    position = np.zeros(n, np.int32)
    for group in groups:
        for place, index in enumerate(group):
            members[index], position[index] = group, place
    me = axis_index(axes)
    gathered = all_gather_p.bind(_varying(leaf, axes), axes=axes, axis=0, tiled=False)
    return jnp.take(gathered, jnp.take(members, me, axis=0), axis=0), jnp.take(position, me)


def _collective(name: str, abstract: Callable[..., ShapedArray], vma: Callable[..., frozenset],
                device: Callable[..., Any]) -> Primitive:
    primitive = Primitive(name)
    abstract_eval_rules[primitive] = abstract
    vma_rules[primitive] = lambda *avals, **params: vma(*avals, **params) & frozenset(manual_axes()) \
        if vma_checked() else frozenset()
    device_rules[primitive] = device
    return primitive


def _varying(x: Any, axes: tuple[str, ...]) -> Any:
    """`x` marked as varying over `axes` (under check_vma a collective's operand must vary over its axes)."""
    if not vma_checked():
        return x
    mesh_axes = manual_axes()
    vma = getattr(getattr(x, "aval", None), "vma", frozenset())
    missing = tuple(a for a in axes if a in mesh_axes and a not in vma)
    return pvary_p.bind(x, axes=missing) if missing else x


def _device_result(trace: DeviceTrace, primitive: Primitive, x: Any, values: dict, **params: Any) -> Any:
    aval = abstract_eval(primitive, [x.aval], params)[0]
    return trace.new(aval, values)


# ---- pvary: an invariant value marked varying (identity on values; its rules are in the core) ---------------------


def pvary(x: Any, axis_name: Any) -> Any:
    """Mark `x` as varying over `axis_name` (inside shard_map with check_vma)."""
    axes = _names(axis_name)
    return tree_map(lambda leaf: pvary_p.bind(jnp._promote(leaf)[0], axes=axes), x)


def pcast(x: Any, axis_name: Any, *, to: str) -> Any:
    """Change how `x` relates across the devices of `axis_name` (inside shard_map): invariant -> varying (pvary)
    or reduced, varying -> unreduced, reduced -> varying. Values stay as they are; only their types change."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    if not axis_name:
        return x
    if to not in PCAST_TARGETS:
        raise ValueError(f"Got unexpected `to` value. Allowed `to` values are: {set(PCAST_TARGETS)}")
    axes = _names(axis_name)

    return tree_map(lambda leaf: pcast_leaf(jnp._promote(leaf)[0], axes, to), x)


# ---- reductions ------------------------------------------------------------------------------------------------


def _reduce_eval(x: ShapedArray, *, axes: tuple[str, ...], op: str) -> ShapedArray:
    axis_size(axes, f"p{op}")
    return x


def _reduce_device(trace: DeviceTrace, x: Any, *, axes: tuple[str, ...], op: str) -> Any:
    x = trace.lift(x)
    return _device_result(trace, preduce_p, x, allreduce_devices(trace.mesh, axes, x.payload, op), axes=axes, op=op)


preduce_p = _collective("preduce", _reduce_eval, lambda x, *, axes, op: x.vma - frozenset(axes), _reduce_device)


def _preduce(x: Any, axis_name: Any, op: str, axis_index_groups: Any, what: str) -> Any:
    axes = _names(axis_name)
    groups = _groups(what, axis_index_groups, axes)
    if op == "sum" and groups is not None and vma_checked():
        raise NotImplementedError(f"{what} with axis_index_groups is not supported under shard_map's "
                                  "check_vma=True (as in JAX); pass check_vma=False to shard_map, or use "
                                  "pmax/pmin/all_gather.")

    def reduce(leaf: Any) -> Any:
        leaf = jnp._promote(leaf)[0]
        if groups is not None:
            stacked, _ = _in_group(leaf, axes, groups)
            return getattr(jnp, op)(stacked, axis=0, **({"dtype": stacked.dtype} if op == "sum" else {}))
        if op == "sum":
            total = psum_of_unreduced(leaf, axes)
            if total is not None:
                return total
        return preduce_p.bind(_varying(leaf, axes), axes=axes, op=op)

    return tree_map(reduce, x)


def _constant_sum(x: Any, axis_name: Any, axis_index_groups: Any, what: str) -> tuple[bool, Any]:
    """psum of values none of which is traced (Python scalars, NumPy values): each times the number of devices
    summed over, computed here in its own type, so `psum(1, axis)` is a Python int (as JAX's). Booleans count as
    int32 values and are summed as traced ones. (False, x) where some leaf is traced or boolean."""
    leaves, structure = tree_flatten(x)
    if any(isinstance(leaf, Tracer) or _is_bool(leaf) for leaf in leaves):
        return False, x
    axes = _names(axis_name)
    groups = _groups(what, axis_index_groups, axes)
    size = len(groups[0]) if groups is not None else axis_size(axes, what)
    return True, tree_unflatten(structure, [_times(leaf, size) for leaf in leaves])


def _times(leaf: Any, size: int) -> Any:
    """`leaf` times `size` in the type of `leaf`."""
    if isinstance(leaf, (int, float, complex)):
        return leaf * type(leaf)(size)
    if isinstance(leaf, (np.ndarray, np.generic)):
        return leaf * np.asarray(size, leaf.dtype)
    return jnp.multiply(leaf, np.asarray(size, jnp._promote(leaf)[0].dtype))


def _is_bool(leaf: Any) -> bool:
    return isinstance(leaf, (bool, np.bool_)) or getattr(leaf, "dtype", None) == np.bool_


def _bools_as_int32(x: Any) -> Any:
    """Boolean leaves as int32 (psum counts them)."""
    return tree_map(lambda leaf: jnp.asarray(leaf, np.int32) if _is_bool(leaf) else leaf, x)


def psum(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """Sum over the devices along `axis_name`; `psum(1, axis)` is the axis size (a Python int)."""
    return _psum(x, axis_name, axis_index_groups, "psum")


def _psum(x: Any, axis_name: Any, axis_index_groups: Any, what: str) -> Any:
    """psum, its errors naming `what` (the collective called); over no axes, `x` itself (as JAX's)."""
    if isinstance(axis_name, (tuple, list)) and not axis_name:
        return x
    constant, total = _constant_sum(x, axis_name, axis_index_groups, what)
    if constant:
        return total
    return _preduce(_bools_as_int32(x), axis_name, "sum", axis_index_groups, what)


def pmax(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The maximum over the devices along `axis_name` (over each group of `axis_index_groups`)."""
    return _preduce(x, axis_name, "max", axis_index_groups, "pmax")


def pmin(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The minimum over the devices along `axis_name` (over each group of `axis_index_groups`)."""
    return _preduce(x, axis_name, "min", axis_index_groups, "pmin")


def pmean(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The mean over the devices along `axis_name`: psum(x) / psum(1) (Python values stay Python values)."""
    total = _psum(x, axis_name, axis_index_groups, "pmean")
    size = _psum(1, axis_name, axis_index_groups, "pmean")
    return tree_map(lambda t: jnp.divide(t, size) if isinstance(t, Tracer) else t / size, total)


def _preduce_jvp(primals: list[Any], tangents: list[Any], *, axes: tuple[str, ...], op: str) -> tuple[Any, Any]:
    if op != "sum":
        raise NotImplementedError(f"Differentiation rule for 'p{op}' not implemented")
    return preduce_p.bind(*primals, axes=axes, op=op), preduce_p.bind(_varying(tangents[0], axes), axes=axes, op=op)


def _psum_transpose(ct: Any, x: Any, *, axes: tuple[str, ...], op: str) -> list[Any]:
    """Under check_vma the sum of varying values is invariant, and its transpose marks the cotangent varying;
    without it (JAX's check_vma=False) psum is its own transpose."""
    if vma_checked():
        return [pvary_p.bind(ct, axes=axes)]
    return [preduce_p.bind(ct, axes=axes, op="sum")]


jvp_rules[preduce_p] = _preduce_jvp
transpose_rules[preduce_p] = _psum_transpose
deflinear(pvary_p, lambda ct, x, *, axes: [preduce_p.bind(ct, axes=axes, op="sum")])


# ---- axis index and size -------------------------------------------------------------------------------------


def _index_eval(*, axes: tuple[str, ...]) -> ShapedArray:
    axis_size(axes, "axis_index")
    return ShapedArray((), np.dtype(np.int32))


def _index_device(trace: DeviceTrace, *, axes: tuple[str, ...]) -> Any:
    aval = abstract_eval(axis_index_p, [], {"axes": axes})[0]
    return trace.new(aval, {d: np.int32(group_index(trace.mesh, axes, d)) for d in trace.devices})


axis_index_p = _collective("axis_index", _index_eval, lambda *, axes: frozenset(axes), _index_device)
defzero(axis_index_p)


def axis_index(axis_name: Any) -> Any:
    """This device's position along `axis_name` (inside shard_map)."""
    return axis_index_p.bind(axes=_names(axis_name))


def axis_size_of(axis_name: Any) -> int:
    """The number of devices along `axis_name` (jax.lax.axis_size)."""
    return axis_size(_names(axis_name), "axis_size")


# ---- all_gather and psum_scatter ---------------------------------------------------------------------------------


def _gather_eval(x: ShapedArray, *, axes: tuple[str, ...], axis: int, tiled: bool) -> ShapedArray:
    n = axis_size(axes, "all_gather")
    shape = list(x.shape)
    if tiled:
        shape[axis] *= n
    else:
        shape.insert(axis, n)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _gather_device(trace: DeviceTrace, primitive: Primitive, x: Any, *, axes: tuple[str, ...], axis: int,
                   tiled: bool) -> Any:
    x = trace.lift(x)
    aval = abstract_eval(primitive, [x.aval], {"axes": axes, "axis": axis, "tiled": tiled})[0]
    members = gather_devices(trace.mesh, axes, x.payload)
    join = np.concatenate if tiled else np.stack
    joined: dict[int, np.ndarray] = {}  # devices of one group share one result
    out = {}
    for device, gathered in members.items():
        if id(gathered) not in joined:
            if axis == 0 and gathered.flat is not None and gathered.flat.dtype == aval.dtype:
                joined[id(gathered)] = gathered.flat.reshape(aval.shape)  # already in group order
            else:
                joined[id(gathered)] = join(gathered.values, axis=axis, out=buffers.empty(aval.shape, aval.dtype))
        out[device] = joined[id(gathered)]
    return trace.new(aval, out)


all_gather_p = _collective("all_gather", _gather_eval, lambda x, *, axes, axis, tiled: x.vma | frozenset(axes),
                           lambda trace, x, **params: _gather_device(trace, all_gather_p, x, **params))
# all_gather(to="invarying"): the same values, typed invariant over the gathered axes (the same on every device)
all_gather_invariant_p = _collective(
    "all_gather_invariant", _gather_eval, lambda x, *, axes, axis, tiled: x.vma - frozenset(axes),
    lambda trace, x, **params: _gather_device(trace, all_gather_invariant_p, x, **params))
GATHER_TARGETS = ("varying", "invarying", "reduced")


def all_gather(x: Any, axis_name: Any, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False,
               to: str = "varying") -> Any:
    """Every device gets the values of all devices along `axis_name`, stacked (or concatenated, tiled) at `axis`;
    typed varying over `axis_name` (`to="varying"`), invariant (`"invarying"`) or reduced (`"reduced"`)."""
    if to not in GATHER_TARGETS:
        raise ValueError(f"all_gather got to={to!r}; the allowed `to` values are {set(GATHER_TARGETS)}.")
    axes = _names(axis_name)
    groups = _groups("all_gather", axis_index_groups, axes)
    # JAX 0.12: without varying-axes typing (check_vma=False, vmap) every `to` is the plain (varying) all_gather,
    # whose transpose sums the cotangents (psum_scatter)
    to = to if vma_checked() else "varying"
    if groups is not None and to != "varying":
        raise NotImplementedError(f"all_gather with axis_index_groups and to={to!r} is not supported (as in JAX); "
                                  "gather to='varying' with groups.")

    def one(leaf: Any) -> Any:
        leaf = _varying(jnp._promote(leaf)[0], axes)
        at = jnp._axes(axis, leaf.ndim + (0 if tiled else 1))[0]
        if to != "varying":
            gathered = all_gather_invariant_p.bind(leaf, axes=axes, axis=at, tiled=tiled)
            return pcast_leaf(gathered, axes, "reduced") if to == "reduced" else gathered
        if groups is None:
            return all_gather_p.bind(leaf, axes=axes, axis=at, tiled=tiled)
        stacked, _ = _in_group(leaf, axes, groups)
        if tiled:
            return jnp.concatenate([jnp.getitem(stacked, i) for i in range(len(groups[0]))], axis=at)
        return jnp.moveaxis(stacked, 0, at)

    return tree_map(one, x)


def _scatter_eval(x: ShapedArray, *, axes: tuple[str, ...], dimension: int, tiled: bool) -> ShapedArray:
    n = axis_size(axes, "psum_scatter")
    size = x.shape[dimension]
    if (tiled and size % n) or (not tiled and size != n):
        raise ValueError(
            f"psum_scatter: dimension {dimension} has size {size}, which must be "
            f"{'divisible by' if tiled else 'equal to'} the {n} devices along {axes}."
        )
    shape = list(x.shape)
    if tiled:
        shape[dimension] //= n
    else:
        del shape[dimension]
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _scatter_device(trace: DeviceTrace, x: Any, *, axes: tuple[str, ...], dimension: int, tiled: bool) -> Any:
    x = trace.lift(x)
    aval = abstract_eval(reduce_scatter_p, [x.aval], {"axes": axes, "dimension": dimension, "tiled": tiled})[0]
    return trace.new(aval, _scattered(trace, axes, x.aval, allreduce_devices(trace.mesh, axes, x.payload, "sum"),
                                      dimension, tiled))


def _scattered(trace: DeviceTrace, axes: tuple[str, ...], aval: ShapedArray, totals: dict, dimension: int,
               tiled: bool) -> dict:
    """Each device's block of `dimension` of its group's total (a view of it); where the trace's devices are one
    group in order, the total cut into their blocks at once (JoinedValues: read whole by the next joined call)."""
    block = aval.shape[dimension] // axis_size(axes, "psum_scatter")
    devices = trace.devices
    first = totals.get(devices[0])
    if (tiled and len(totals) == len(devices) and block * len(devices) == aval.shape[dimension]
            and all(totals[d] is first for d in devices)
            and all(group_index(trace.mesh, axes, d) == i for i, d in enumerate(devices))):
        return joined_values(np.asarray(first), dimension, devices)
    out = {}
    for device, total in totals.items():
        start = group_index(trace.mesh, axes, device) * block
        piece = np.asarray(total)[(slice(None),) * dimension + (slice(start, start + block),)]
        out[device] = piece if tiled else np.squeeze(piece, dimension)
    return out


reduce_scatter_p = _collective("reduce_scatter", _scatter_eval,
                               lambda x, *, axes, dimension, tiled: x.vma | frozenset(axes), _scatter_device)


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, tiled: bool = False,
                 axis_index_groups: Any = None) -> Any:
    """Sum over `axis_name`, then keep this device's block of `scatter_dimension`."""
    axes = _names(axis_name)
    groups = _groups("psum_scatter", axis_index_groups, axes)

    def one(leaf: Any) -> Any:
        leaf = _varying(jnp._promote(leaf)[0], axes)
        dim = jnp._axes(scatter_dimension, leaf.ndim)[0]
        if groups is None:
            return reduce_scatter_p.bind(leaf, axes=axes, dimension=dim, tiled=tiled)
        return _grouped_scatter(leaf, axes, groups, dim, tiled)

    return tree_map(one, x)


def _grouped_scatter(leaf: Any, axes: tuple[str, ...], groups: tuple, dim: int, tiled: bool) -> Any:
    """psum_scatter within each group of `axis_index_groups`: the group's sum, this device's block of `dim`."""
    k, size = len(groups[0]), leaf.shape[dim]
    if (tiled and size % k) or (not tiled and size != k):
        raise ValueError(f"psum_scatter: dimension {dim} has size {size}, which must be "
                         f"{'divisible by' if tiled else 'equal to'} the {k} devices of each axis_index_group.")
    stacked, position = _in_group(leaf, axes, groups)
    total = jnp.sum(stacked, axis=0, dtype=stacked.dtype)
    if not tiled:
        return jnp.take(total, position, axis=dim)
    block = size // k
    return jnp.take(total, jnp.add(jnp.arange(block), jnp.multiply(position, block)), axis=dim)


# ---- grouped sums: psums and psum_scatters next to each other in an executed program, as one reduction -----------


def _grouped_eval(*xs: ShapedArray, axes: tuple[str, ...], parts: tuple) -> list[ShapedArray]:
    """`parts[i]`: None for a psum of `xs[i]`, (dimension, tiled) for a psum_scatter."""
    return [abstract_eval(preduce_p, [x], {"axes": axes, "op": "sum"})[0] if part is None else
            abstract_eval(reduce_scatter_p, [x], {"axes": axes, "dimension": part[0], "tiled": part[1]})[0]
            for x, part in zip(xs, parts)]


def _grouped_device(trace: DeviceTrace, *xs: Any, axes: tuple[str, ...], parts: tuple) -> list[Any]:
    xs = tuple(trace.lift(x) for x in xs)
    avals = _grouped_eval(*(x.aval for x in xs), axes=axes, parts=parts)
    totals = allreduce_devices_many(trace.mesh, axes, [x.payload for x in xs], "sum")
    return [trace.new(aval, total if part is None else _scattered(trace, axes, x.aval, total, *part))
            for x, part, aval, total in zip(xs, parts, avals, totals)]


def _gathered_here(trace: DeviceTrace, xs: Sequence[Any], avals: Sequence[ShapedArray], parts: tuple,
                   groups: Sequence[Any]) -> list[Any]:
    """The grouped gather where every group lies in this process: each operand's members joined straight into
    the result (no packing for an exchange; a view where they lie one after another in one buffer), one result
    per group shared by its devices; a group of one device (a mesh axis of size 1) gives its value itself,
    viewed in the result's shape."""
    outs: list[dict] = [{} for _ in xs]
    for group in groups:
        for out, x, aval, (axis, tiled) in zip(outs, xs, avals, parts):
            pieces = [np.asarray(x.payload[m], aval.dtype) for m in group.members]
            if len(pieces) == 1:
                value = pieces[0].reshape(aval.shape)
            elif tiled:  # a view where the pieces lie one after another in one buffer (a sharded weight's rows)
                value = join_blocks(pieces, axis)
            else:
                value = np.stack(pieces, axis=axis, out=buffers.empty(aval.shape, aval.dtype))
            out.update({d: value for d in group.local})
    return [trace.new(aval, out) for aval, out in zip(avals, outs)]


def _grouped_gather_eval(*xs: ShapedArray, axes: tuple[str, ...], parts: tuple) -> list[ShapedArray]:
    """`parts[i]`: the (axis, tiled) of the all_gather of `xs[i]`."""
    return [abstract_eval(all_gather_p, [x], {"axes": axes, "axis": axis, "tiled": tiled})[0]
            for x, (axis, tiled) in zip(xs, parts)]


def _grouped_gather_device(trace: DeviceTrace, *xs: Any, axes: tuple[str, ...], parts: tuple) -> list[Any]:
    """Each device's operands, flattened side by side, gathered in one exchange; then each operand's pieces
    joined as its all_gather joins them."""
    xs = tuple(trace.lift(x) for x in xs)
    avals = _grouped_gather_eval(*(x.aval for x in xs), axes=axes, parts=parts)
    here = device_table.process_index()
    groups = local_groups(trace.mesh, axes, here, by_axes=True)
    if all(group.processes == (here,) for group in groups):
        return _gathered_here(trace, xs, avals, parts, groups)
    sizes = [int(np.prod(x.aval.shape)) for x in xs]
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    dtype = avals[0].dtype
    side_by_side = {d: np.concatenate([np.asarray(x.payload[d], dtype).reshape(-1) for x in xs]) for d in trace.devices}
    members = gather_devices(trace.mesh, axes, side_by_side)
    outs: list[dict] = [{} for _ in xs]
    joined: dict[int, list[np.ndarray]] = {}  # devices of one group share its results
    for device, gathered in members.items():
        if id(gathered) not in joined:
            results = []
            for x, aval, (axis, tiled), lo, hi in zip(xs, avals, parts, bounds, bounds[1:]):
                pieces = [np.asarray(m)[lo:hi].reshape(x.aval.shape) for m in gathered.values]
                join = np.concatenate if tiled else np.stack
                results.append(join(pieces, axis=axis, out=buffers.empty(aval.shape, aval.dtype)))
            joined[id(gathered)] = results
        for out, value in zip(outs, joined[id(gathered)]):
            out[device] = value
    return [trace.new(aval, out) for aval, out in zip(avals, outs)]


grouped_gather_p = Primitive("grouped_gather", multiple_results=True)  # made only by interpreters/schedule.py
abstract_eval_rules[grouped_gather_p] = _grouped_gather_eval
vma_rules[grouped_gather_p] = lambda *avals, **params: None  # each result's own, from _grouped_gather_eval
device_rules[grouped_gather_p] = _grouped_gather_device
schedule.grouped_gather.append(grouped_gather_p)


grouped_sum_p = Primitive("grouped_sum", multiple_results=True)  # made only by interpreters/schedule.py
abstract_eval_rules[grouped_sum_p] = _grouped_eval
vma_rules[grouped_sum_p] = lambda *avals, **params: None  # each result's own, from _grouped_eval
device_rules[grouped_sum_p] = _grouped_device
schedule.grouped_sum.append(grouped_sum_p)


deflinear(all_gather_p, lambda ct, x, *, axes, axis, tiled: [
    reduce_scatter_p.bind(_varying(ct, axes), axes=axes, dimension=axis, tiled=tiled)])
deflinear(reduce_scatter_p, lambda ct, x, *, axes, dimension, tiled: [
    all_gather_p.bind(ct, axes=axes, axis=dimension, tiled=tiled)])
deflinear(all_gather_invariant_p, lambda ct, x, *, axes, axis, tiled: [_own_block(ct, axes, axis, tiled)])


def _own_block(ct: Any, axes: tuple[str, ...], axis: int, tiled: bool) -> Any:
    """This device's block along `axis` of the cotangent of an invariant all_gather (its transpose)."""
    if not tiled:
        return jnp.take(ct, axis_index(axes), axis=axis)
    block = aval_of(ct).shape[axis] // axis_size(axes, "all_gather")
    return jnp.take(ct, jnp.add(jnp.arange(block), jnp.multiply(axis_index(axes), block)), axis=axis)


# ---- all_to_all ------------------------------------------------------------------------------------------------


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, tiled: bool = False,
               axis_index_groups: Any = None) -> Any:
    """Split `split_axis` into one block per device along `axis_name`, send block k to device k,
    and concatenate the received blocks along `concat_axis`."""
    axes = _names(axis_name)
    groups = _groups("all_to_all", axis_index_groups, axes)
    n = axis_size(axes, "all_to_all") if groups is None else len(groups[0])

    def one(leaf: Any) -> Any:
        leaf = jnp._promote(leaf)[0]
        split = jnp._axes(split_axis, leaf.ndim)[0]
        if leaf.shape[split] % n:
            raise ValueError(f"all_to_all: split_axis {split} has size {leaf.shape[split]}, not divisible by {n}.")
        block = leaf.shape[split] // n
        if groups is None:   # (n, ...): every member's whole value
            gathered, position = all_gather(leaf, axes, axis=0), axis_index(axes)
        else:
            gathered, position = _in_group(leaf, axes, groups)
        start = jnp.multiply(position, block)
        mine = jnp.take(gathered, jnp.add(jnp.arange(block), start), axis=split + 1)   # my block of each
        parts = [jnp.getitem(mine, k) for k in range(n)]
        if tiled:
            return jnp.concatenate(parts, axis=concat_axis)
        return jnp.stack([jnp.squeeze(p, split) for p in parts], axis=concat_axis)

    return tree_map(one, x)


# ---- ppermute ----------------------------------------------------------------------------------------------------


def _permute_eval(x: ShapedArray, *, axes: tuple[str, ...], perm: tuple[tuple[int, int], ...]) -> ShapedArray:
    n = axis_size(axes, "ppermute")
    sources = [s for s, _ in perm]
    targets = [t for _, t in perm]
    if any(not (0 <= i < n) for i in sources + targets) or len(set(sources)) != len(sources) or \
            len(set(targets)) != len(targets):
        raise ValueError(
            f"ppermute: perm {list(perm)} is not a permutation of device indices 0..{n - 1} along {axes} "
            "(each source and each destination may appear once)."
        )
    return x


def _permute_device(trace: DeviceTrace, x: Any, *, axes: tuple[str, ...], perm: tuple[tuple[int, int], ...]) -> Any:
    x = trace.lift(x)
    return _device_result(trace, ppermute_p, x, permute_devices(trace.mesh, axes, x.payload, perm), axes=axes,
                          perm=perm)


ppermute_p = _collective("ppermute", _permute_eval, lambda x, *, axes, perm: x.vma | frozenset(axes), _permute_device)
deflinear(ppermute_p, lambda ct, x, *, axes, perm: [ppermute_p.bind(ct, axes=axes, perm=tuple((t, s) for s, t in perm))])


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """Send each device's value to another along `axis_name`: (source, destination) index pairs."""
    axes = _names(axis_name)
    pairs = tuple((int(s), int(t)) for s, t in perm)
    return tree_map(lambda leaf: ppermute_p.bind(_varying(jnp._promote(leaf)[0], axes), axes=axes, perm=pairs), x)



# ---- over the axes of one device (a shard_map body on a one-device mesh run as NumPy: numpy_eval.run_alone) -------

alone_rules[preduce_p] = lambda run, x, *, axes, op: [x]
alone_rules[axis_index_p] = lambda run, *, axes: [np.int32(0)]
alone_rules[all_gather_p] = lambda run, x, *, axes, axis, tiled: [x if tiled else np.expand_dims(x, axis)]
alone_rules[all_gather_invariant_p] = alone_rules[all_gather_p]
alone_rules[reduce_scatter_p] = lambda run, x, *, axes, dimension, tiled: [x if tiled else np.squeeze(x, dimension)]
alone_rules[grouped_sum_p] = lambda run, *xs, axes, parts: [x if part is None or part[1] else np.squeeze(x, part[0])
                                                            for x, part in zip(xs, parts)]
alone_rules[grouped_gather_p] = lambda run, *xs, axes, parts: [x if tiled else np.expand_dims(x, axis)
                                                               for x, (axis, tiled) in zip(xs, parts)]
alone_rules[ppermute_p] = lambda run, x, *, axes, perm: [x if (0, 0) in perm else np.zeros_like(x)]
alone_rules[pvary_p] = lambda run, x, *, axes: [x]


def pswapaxes(x: Any, axis_name: Any, axis: int, *, axis_index_groups: Any = None) -> Any:
    """Swap the mapped axis `axis_name` with the positional axis `axis` of `x` (whose size must be the mapped
    axis' size): device i gets block i of every device's `axis`, stacked along `axis` in device order."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)
