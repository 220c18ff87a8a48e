"""Collectives over mesh axes (psum, all_gather, ppermute, ...), usable inside shard_map.

Each is a primitive whose abstract evaluation knows the enclosing shard_map's mesh and
whose `device_impl` combines the per-device values of a DeviceTrace.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import buffers
from . import numpy as jnp
from .collectives import allreduce_devices, gather_devices, group_index, permute_devices
from .core import Primitive, ShapedArray
from .shard_map import PerDevice, axis_sizes
from .tree_util import tree_map


def _names(axis_name: Any) -> tuple[str, ...]:
    if not isinstance(axis_name, (str, tuple, list)):
        raise TypeError(f"axis_name must be a mesh axis name or a tuple of names; got {axis_name!r}.")
    names = (axis_name,) if isinstance(axis_name, str) else tuple(axis_name)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"axis_name must be a mesh axis name or a tuple of names; got {axis_name!r}.")
    return names


def _collective(name: str, abstract_eval: Any, device_impl: Any) -> Primitive:
    primitive = Primitive(name, None, abstract_eval, None)
    primitive.device_impl = device_impl
    return primitive


# ---- reductions ------------------------------------------------------------------------------------------


def _reduce_eval(x: ShapedArray, *, axes: tuple[str, ...], op: str) -> ShapedArray:
    axis_sizes(axes, f"p{op}")
    return x


def _reduce_device(trace: Any, x: Any, *, axes: tuple[str, ...], op: str) -> PerDevice:
    x = trace.lift(x)
    return PerDevice(x.aval, allreduce_devices(trace.mesh, axes, x.values, op))


preduce_p = _collective("preduce", _reduce_eval, _reduce_device)


def _preduce(x: Any, axis_name: Any, op: str) -> Any:
    axes = _names(axis_name)
    return tree_map(lambda leaf: preduce_p.bind(jnp._promote(leaf)[0], axes=axes, op=op), x)


def psum(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """Sum over the devices along `axis_name`; `psum(1, axis)` is the axis size."""
    return _preduce(x, axis_name, "sum")


def pmax(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    return _preduce(x, axis_name, "max")


def pmin(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    return _preduce(x, axis_name, "min")


def pmean(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    size = axis_sizes(_names(axis_name), "pmean")
    return tree_map(lambda total: jnp.divide(total, size), psum(x, axis_name))


# ---- axis index and size -------------------------------------------------------------------------------------


def _index_eval(*, axes: tuple[str, ...]) -> ShapedArray:
    axis_sizes(axes, "axis_index")
    return ShapedArray((), np.dtype(np.int32))


def _index_device(trace: Any, *, axes: tuple[str, ...]) -> PerDevice:
    return PerDevice(ShapedArray((), np.dtype(np.int32)),
                     {d: np.int32(group_index(trace.mesh, axes, d)) for d in trace.devices})


axis_index_p = _collective("axis_index", _index_eval, _index_device)


def axis_index(axis_name: Any) -> Any:
    """This device's position along `axis_name` (inside shard_map)."""
    return axis_index_p.bind(axes=_names(axis_name))


def axis_size(axis_name: Any) -> int:
    return axis_sizes(_names(axis_name), "axis_size")


# ---- all_gather, psum_scatter, all_to_all -------------------------------------------------------------------------


def _gather_eval(x: ShapedArray, *, axes: tuple[str, ...], axis: int, tiled: bool) -> ShapedArray:
    n = axis_sizes(axes, "all_gather")
    shape = list(x.shape)
    if tiled:
        shape[axis] *= n
    else:
        shape.insert(axis, n)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _gather_device(trace: Any, x: Any, *, axes: tuple[str, ...], axis: int, tiled: bool) -> PerDevice:
    x = trace.lift(x)
    aval = _gather_eval(x.aval, axes=axes, axis=axis, tiled=tiled)
    members = gather_devices(trace.mesh, axes, x.values)
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
    return PerDevice(aval, out)


all_gather_p = _collective("all_gather", _gather_eval, _gather_device)


def all_gather(x: Any, axis_name: Any, *, axis: int = 0, tiled: bool = False, axis_index_groups: Any = None) -> Any:
    """Every device gets the values of all devices along `axis_name`, stacked (or concatenated, tiled) at `axis`."""
    axes = _names(axis_name)

    def one(leaf: Any) -> Any:
        leaf = jnp._promote(leaf)[0]
        ndim = leaf.ndim + (0 if tiled else 1)
        return all_gather_p.bind(leaf, axes=axes, axis=jnp._axes(axis, ndim)[0], tiled=tiled)

    return tree_map(one, x)


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, tiled: bool = False,
                 axis_index_groups: Any = None) -> Any:
    """Sum over `axis_name`, then keep this device's block of `scatter_dimension`."""
    axes = _names(axis_name)
    n = axis_sizes(axes, "psum_scatter")

    def one(leaf: Any) -> Any:
        total = psum(leaf, axes)
        dim = jnp._axes(scatter_dimension, total.ndim)[0]
        size = total.shape[dim]
        if (tiled and size % n) or (not tiled and size != n):
            raise ValueError(
                f"psum_scatter: dimension {dim} has size {size}, which must be "
                f"{'divisible by' if tiled else 'equal to'} the {n} devices along {axes}."
            )
        block = size // n
        start = jnp.multiply(axis_index(axes), block)
        index = jnp.add(jnp.arange(block), start)
        picked = jnp.take(total, index, axis=dim)
        return picked if tiled else jnp.squeeze(picked, dim)

    return tree_map(one, x)


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, tiled: bool = False,
               axis_index_groups: Any = None) -> Any:
    """Split `split_axis` into one block per device along `axis_name`, send block k to device k,
    and concatenate the received blocks along `concat_axis`."""
    axes = _names(axis_name)
    n = axis_sizes(axes, "all_to_all")

    def one(leaf: Any) -> Any:
        leaf = jnp._promote(leaf)[0]
        split = jnp._axes(split_axis, leaf.ndim)[0]
        if leaf.shape[split] % n:
            raise ValueError(f"all_to_all: split_axis {split} has size {leaf.shape[split]}, not divisible by {n}.")
        block = leaf.shape[split] // n
        gathered = all_gather(leaf, axes, axis=0)                  # (n, ...): every member's whole value
        start = jnp.multiply(axis_index(axes), block)
        mine = jnp.take(gathered, jnp.add(jnp.arange(block), start), axis=split + 1)   # my block of each
        parts = [jnp.getitem(mine, k) for k in range(n)]
        if tiled:
            return jnp.concatenate(parts, axis=concat_axis)
        return jnp.stack([jnp.squeeze(p, split) for p in parts], axis=concat_axis)

    return tree_map(one, x)


# ---- ppermute ----------------------------------------------------------------------------------------------------


def _permute_eval(x: ShapedArray, *, axes: tuple[str, ...], perm: tuple[tuple[int, int], ...]) -> ShapedArray:
    n = axis_sizes(axes, "ppermute")
    sources = [s for s, _ in perm]
    targets = [t for _, t in perm]
    if any(not (0 <= i < n) for i in sources + targets) or len(set(sources)) != len(sources) or \
            len(set(targets)) != len(targets):
        raise ValueError(
            f"ppermute: perm {list(perm)} is not a permutation of device indices 0..{n - 1} along {axes} "
            "(each source and each destination may appear once)."
        )
    return x


def _permute_device(trace: Any, x: Any, *, axes: tuple[str, ...], perm: tuple[tuple[int, int], ...]) -> PerDevice:
    x = trace.lift(x)
    return PerDevice(x.aval, permute_devices(trace.mesh, axes, x.values, perm))


ppermute_p = _collective("ppermute", _permute_eval, _permute_device)


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """Send each device's value to another along `axis_name`: (source, destination) index pairs."""
    axes = _names(axis_name)
    pairs = tuple((int(s), int(t)) for s, t in perm)
    return tree_map(lambda leaf: ppermute_p.bind(jnp._promote(leaf)[0], axes=axes, perm=pairs), x)

