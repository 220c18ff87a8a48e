"""Unreduced arrays (JAX 0.10's `PartitionSpec(unreduced=...)`): each device of an unreduced group holds a partial
sum, the array's value being their sum over the group.

Resharding from such an array sums the partial sums first (an all-reduce over its unreduced axes); resharding to
one gives each element to one device of its group, the one that held it before when the source split it over
those axes, else the group's first, the others holding zeros (as JAX places them).
"""
from __future__ import annotations

import numpy as np

from .array import Array, partial_sum_rules
from .collectives import allreduce_devices
from ..runtime.devices import Device
from ..sharding.shardings import Box, NamedSharding, Sharding
from .transfer import reshard


def unreduced_axes(sharding: Sharding) -> frozenset:
    return sharding.spec.unreduced if isinstance(sharding, NamedSharding) else frozenset()


def without_partial_sums(sharding: NamedSharding) -> NamedSharding:
    return NamedSharding(sharding.mesh, sharding.spec.update(unreduced=frozenset()))


def as_plain(array: Array) -> Array:
    """`array`'s buffers as they are, typed without unreduced axes (each device's partial sum as a value)."""
    if not unreduced_axes(array.sharding):
        return array
    view = Array(array.shape, array.dtype, without_partial_sums(array.sharding), array.local_buffers(),
                 array.weak_type)
    view.committed = array.committed
    return view


def as_unreduced(array: Array, axes: frozenset, reduced: frozenset = frozenset()) -> Array:
    """`array`'s buffers as they are, each device's holding its partial sum over `axes`."""
    sharding = array.sharding
    if not isinstance(sharding, NamedSharding) or (sharding.spec.unreduced, sharding.spec.reduced) == (axes, reduced):
        return array
    spec = sharding.spec.update(unreduced=axes, reduced=reduced)
    tagged = Array(array.shape, array.dtype, NamedSharding(sharding.mesh, spec), array.local_buffers(),
                   array.weak_type)
    tagged.committed = array.committed
    return tagged


def summed(array: Array) -> Array:
    """`array` with its partial sums added up over its unreduced axes (every device of a group gets the sum)."""
    axes = unreduced_axes(array.sharding)
    if not axes:
        return array
    mesh = array.sharding.mesh
    order = tuple(a for a in mesh.axis_names if a in axes)
    buffers = allreduce_devices(mesh, order, dict(array.local_buffers()), "sum")
    out = Array(array.shape, array.dtype, without_partial_sums(array.sharding), buffers, array.weak_type)
    out.committed = array.committed
    return out


def reshard_partial_sums(array: Array, target: Sharding) -> Array:
    """`array` laid out as `target`, either of them unreduced."""
    source = array.sharding
    array = summed(array)
    axes = unreduced_axes(target)
    if not axes:
        return reshard(array, target)
    full = reshard(array, without_partial_sums(target))
    boxes = target.device_boxes(array.shape)
    buffers = {device: _owned(buffer, device, array.shape, boxes[device], source, target, axes)
               for device, buffer in full.local_buffers().items()}
    out = Array(array.shape, array.dtype, target, buffers, array.weak_type)
    return out


def _owned(buffer: np.ndarray, device: Device, shape: tuple[int, ...], box: Box, source: Sharding,
           target: NamedSharding, axes: frozenset) -> np.ndarray:
    """`buffer` (the block `box` of the value) with zeros where another device of `device`'s group owns the
    element."""
    mesh = target.mesh
    position = dict(zip(mesh.axis_names, mesh.coordinates(device)))
    same_mesh = isinstance(source, NamedSharding) and source.mesh == mesh
    entries = source.spec.normalized() if same_mesh else ()
    split = {a for entry in entries for a in entry}
    if any(position[a] != 0 for a in axes - split):  # the group's first device owns what no one split
        return np.zeros_like(buffer)
    masks = []
    for dim, (start, stop) in enumerate(box):
        entry = entries[dim] if dim < len(entries) else ()
        if not set(entry) & axes:
            masks.append(np.ones(stop - start, bool))
            continue
        masks.append(_owned_along(shape, dim, start, stop, entry, axes, position, source))
    if not masks:  # a scalar: owned by the group's first device (checked above)
        return np.array(buffer, copy=True)
    mask = np.ones(np.shape(buffer), bool)
    for dim, along in enumerate(masks):
        mask &= along.reshape([-1 if d == dim else 1 for d in range(len(masks))])
    return np.where(mask, buffer, np.zeros((), buffer.dtype))


def _owned_along(shape: tuple[int, ...], dim: int, start: int, stop: int, entry: tuple, axes: frozenset,
                 position: dict, source: NamedSharding) -> np.ndarray:
    """Which indices start..stop of dimension `dim` the source gave to devices at `position` on `axes`."""
    mesh = source.mesh
    owned = np.zeros(stop - start, bool)
    for device, box in source.device_boxes(shape).items():
        there = dict(zip(mesh.axis_names, mesh.coordinates(device)))
        if all(there[a] == position[a] for a in entry if a in axes):
            lo, hi = max(box[dim][0], start), min(box[dim][1], stop)
            if lo < hi:
                owned[lo - start:hi - start] = True
    return owned


partial_sum_rules.update(summed=summed, reshard=reshard_partial_sums, without=without_partial_sums)
