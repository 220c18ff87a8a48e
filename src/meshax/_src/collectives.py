"""Reductions across groups of devices, hierarchically: local devices first, then one MPI call per process set.

A group is the set of mesh devices that differ only in the reduced mesh axes. Within
a process, a group's members are combined in mesh order by a pairwise tree; groups
whose members live on several processes are then reduced with MPI, all groups with
the same set of processes in one Allreduce of their concatenated parts.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from . import devices as device_table
from .devices import Device
from .mesh import Mesh
from .runtime.watch import communicating
from .transfer import p2p_comm, wait_all

NUMPY_COMBINE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "or": np.logical_or,
    "and": np.logical_and,
}
_MPI_OP = {"sum": "sum", "prod": "prod", "max": "max", "min": "min", "or": "max", "and": "min"}


def device_groups(mesh: Mesh, axes: Sequence[str]) -> dict[tuple[int, ...], list[Device]]:
    """Mesh devices grouped by their coordinates on the axes NOT in `axes`, members in mesh order."""
    keep = [i for i, name in enumerate(mesh.axis_names) if name not in axes]
    groups: dict[tuple[int, ...], list[Device]] = {}
    for device in mesh.flat_devices:
        position = mesh.coordinates(device)
        groups.setdefault(tuple(position[i] for i in keep), []).append(device)
    return groups


def tree_combine(values: list[np.ndarray], combine: Callable[..., np.ndarray]) -> np.ndarray:
    """Combine `values` pairwise in a balanced tree, neighbours first (((v0+v1)+(v2+v3))+...), into one
    new buffer, with one scratch buffer per tree level."""
    first = np.asarray(values[0])
    out = np.empty(np.broadcast_shapes(*[np.shape(v) for v in values]), first.dtype)
    _combine_into(values, out, combine)
    return out


def _combine_into(values: list[np.ndarray], out: np.ndarray, combine: Callable[..., np.ndarray]) -> None:
    if len(values) == 1:
        out[...] = values[0]
        return
    if len(values) == 2:
        combine(values[0], values[1], out=out)
        return
    half = 1 << ((len(values) - 1).bit_length() - 1)  # the largest power of two below len(values)
    _combine_into(values[:half], out, combine)
    rest = values[half:]
    if len(rest) == 1:
        combine(out, rest[0], out=out)
        return
    scratch = np.empty_like(out)
    _combine_into(rest, scratch, combine)
    combine(out, scratch, out=out)


def allreduce_devices(mesh: Mesh, axes: Sequence[str], values: dict[Device, np.ndarray], op: str) -> dict[Device, np.ndarray]:
    """Every local device gets the `op`-reduction of `values` over its group along `axes`."""
    if not axes:
        return values
    combine = NUMPY_COMBINE[op]
    here = device_table.process_index()
    groups = device_groups(mesh, axes)
    partial: dict[tuple[int, ...], np.ndarray] = {}
    by_process_set: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for key, members in groups.items():
        local = [values[d] for d in members if d.process_index == here]
        if not local:
            continue
        partial[key] = tree_combine(local, combine) if len(local) > 1 else local[0]
        processes = tuple(sorted({d.process_index for d in members}))
        if len(processes) > 1:
            by_process_set.setdefault(processes, []).append(key)
    for processes, keys in sorted(by_process_set.items()):
        _reduce_across(processes, keys, partial, op)
    result: dict[Device, np.ndarray] = {}
    for key, members in groups.items():
        for device in members:
            if device.process_index == here:
                result[device] = partial[key]
    return result


def _reduce_across(processes: tuple[int, ...], keys: list[tuple[int, ...]], partial: dict, op: str) -> None:
    """One Allreduce among `processes` for all their groups' parts (concatenated)."""
    from .runtime.distributed import runtime

    group = runtime().process_group(processes)
    parts = [np.asarray(partial[k]) for k in keys]
    as_bytes = parts[0].dtype == np.bool_
    if len(parts) > 1 or as_bytes:
        flat = np.concatenate([p.astype(np.uint8) if as_bytes else p for p in parts], axis=None)
    else:  # one group: reduce in place in a buffer we own (the local tree's result, or a copy)
        flat = parts[0] if parts[0].base is None and parts[0].flags.writeable and parts[0].flags.c_contiguous \
            else np.array(parts[0], copy=True, order="C")
        flat = flat.reshape(-1)
    sent = flat.copy() if op in ("max", "min") and np.issubdtype(flat.dtype, np.floating) else None
    reduced = group.allreduce_inplace(flat, op=_MPI_OP[op])
    if sent is not None:
        _restore_nans(group, sent, reduced)  # MPI's MAX/MIN skip NaN; NumPy's (and XLA's) propagate it
    offset = 0
    for key, part in zip(keys, parts):
        chunk = reduced[offset:offset + part.size].reshape(part.shape)
        partial[key] = chunk.astype(np.bool_) if as_bytes else chunk
        offset += part.size


def _restore_nans(group, flat: np.ndarray, reduced: np.ndarray) -> None:
    anywhere = group.allreduce(np.isnan(flat).astype(np.uint8), op="max")
    if anywhere.any():
        reduced[anywhere.astype(bool)] = np.nan


def group_index(mesh: Mesh, axes: Sequence[str], device: Device) -> int:
    """The position of `device` within its group along `axes` (mixed radix, first axis major)."""
    position = dict(zip(mesh.axis_names, mesh.coordinates(device)))
    index = 0
    for name in axes:
        index = index * mesh.shape[name] + position[name]
    return index


def _ordered_groups(mesh: Mesh, axes: Sequence[str]) -> list[list[Device]]:
    """Groups (sorted by key), members ordered by their index along `axes`."""
    return [sorted(members, key=lambda d: group_index(mesh, axes, d))
            for _, members in sorted(device_groups(mesh, axes).items())]


def gather_devices(mesh: Mesh, axes: Sequence[str], values: dict[Device, np.ndarray]) -> dict[Device, list[np.ndarray]]:
    """Every local device gets the values of all members of its group along `axes`, in group order."""
    here = device_table.process_index()
    groups = [g for g in _ordered_groups(mesh, axes) if any(d.process_index == here for d in g)]
    known = {d: values[d] for g in groups for d in g if d.process_index == here}
    by_process_set: dict[tuple[int, ...], list[list[Device]]] = {}
    for members in groups:
        processes = tuple(sorted({d.process_index for d in members}))
        if len(processes) > 1:
            by_process_set.setdefault(processes, []).append(members)
    for processes, batch in sorted(by_process_set.items()):
        known.update(_exchange_members(processes, batch, known))
    result: dict[Device, list[np.ndarray]] = {}
    for members in groups:
        gathered = [known[m] for m in members]  # one list per group, shared by its local devices
        result.update({d: gathered for d in members if d.process_index == here})
    return result


def _exchange_members(processes: tuple[int, ...], batch: list[list[Device]], known: dict) -> dict:
    """One Allgatherv among `processes` of their members' values for the groups in `batch`."""
    from .runtime.distributed import runtime

    here = device_table.process_index()
    sample = next(known[d] for members in batch for d in members if d.process_index == here)
    sample = np.asarray(sample)
    owned = {p: [d for members in batch for d in members if d.process_index == p] for p in processes}
    mine = np.concatenate([np.asarray(known[d], sample.dtype).reshape(-1) for d in owned[here]]) \
        if owned[here] else np.empty(0, sample.dtype)
    counts = [len(owned[p]) * sample.size for p in processes]
    gathered = runtime().process_group(processes).allgatherv(mine, counts)
    found, offset = {}, 0
    for p, count in zip(processes, counts):
        pieces = gathered[offset:offset + count].reshape((len(owned[p]),) + sample.shape) if count else []
        for device, piece in zip(owned[p], pieces):
            found[device] = piece
        offset += count
    return found


def permute_devices(mesh: Mesh, axes: Sequence[str], values: dict[Device, np.ndarray],
                    perm: Sequence[tuple[int, int]]) -> dict[Device, np.ndarray]:
    """Within each group along `axes`, member i's value goes to member j for each (i, j) in `perm`;
    members that receive nothing get zeros."""
    here = device_table.process_index()
    sample = np.asarray(next(iter(values.values())))
    result: dict[Device, np.ndarray] = {}
    requests, comm = [], None
    in_mesh_order = sorted(axes, key=mesh.axis_names.index)  # JAX numbers ppermute's devices in mesh order
    for members in _ordered_groups(mesh, in_mesh_order):
        for source_index, target_index in perm:
            source, target = members[source_index], members[target_index]
            if source.process_index == here and target.process_index == here:
                result[target] = values[source]
            elif source.process_index == here or target.process_index == here:
                comm = comm or p2p_comm()
                if source.process_index == here:
                    data = np.require(values[source], requirements="C")
                    requests.append(comm.Isend(data, dest=target.process_index, tag=_PERMUTE_TAG))
                else:
                    buffer = np.empty_like(sample)
                    result[target] = buffer
                    requests.append(comm.Irecv(buffer, source=source.process_index, tag=_PERMUTE_TAG))
    for device in values:
        if device not in result:
            result[device] = np.zeros_like(sample)  # receives from nobody
    if requests:
        with communicating(f"ppermute over mesh axes {tuple(axes)}"):
            wait_all(requests)
    return result


_PERMUTE_TAG = 11
