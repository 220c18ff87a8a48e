"""Reductions across groups of devices, hierarchically: local devices first, then one MPI call per process set.

A group is the set of mesh devices that differ only in the reduced mesh axes. Within
a process, a group's members are combined in mesh order by a pairwise tree; groups
whose members live on several processes are then reduced with MPI, all groups with
the same set of processes in one Allreduce of their concatenated parts.
"""
from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..config import config
from ..profiler import recorder
from ..runtime import buffers, compute_pool as device_pool
from ..runtime import devices as device_table
from ..runtime.devices import Device
from ..sharding.mesh import Mesh
from ..runtime.peers import Exchange
from .joined_values import STACKED, JoinedValues
from .transfer import p2p_link

NUMPY_COMBINE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "or": np.logical_or,
    "and": np.logical_and,
}
_MPI_OP = {"sum": "sum", "prod": "prod", "max": "max", "min": "min", "or": "max", "and": "min"}


class Group(NamedTuple):
    """The devices that differ only in some mesh axes, as one process sees them."""

    key: tuple[int, ...]  # coordinates on the other axes
    members: tuple[Device, ...]
    local: tuple[Device, ...]  # members on this process, in the same order
    processes: tuple[int, ...]  # sorted process indices of all members


@functools.lru_cache(maxsize=1024)
def local_groups(mesh: Mesh, axes: tuple[str, ...], here: int, by_axes: bool = False) -> tuple[Group, ...]:
    """Groups along `axes` with a member on process `here`, by key; members in mesh order, or with
    `by_axes` in the order of their index along `axes` (`group_index`)."""
    keep = [i for i, name in enumerate(mesh.axis_names) if name not in axes]
    grouped: dict[tuple[int, ...], list[Device]] = {}
    for device in mesh.flat_devices:
        position = mesh.coordinates(device)
        grouped.setdefault(tuple(position[i] for i in keep), []).append(device)
    groups = []
    for key, members in sorted(grouped.items()):
        if by_axes:
            members.sort(key=lambda d: group_index(mesh, axes, d))
        local = tuple(d for d in members if d.process_index == here)
        if local:
            groups.append(Group(key, tuple(members), local, tuple(sorted({d.process_index for d in members}))))
    return tuple(groups)


class LocallyCombined:
    """A value that already combines every local device's part of a reduction (one product over the process's
    joined blocks, interpreters/process_blocks.py): it stands for all of them, each local device maps to it."""

    __slots__ = ("value",)

    def __init__(self, value: np.ndarray) -> None:
        self.value = value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.value if dtype is None else self.value.astype(dtype)


class _Stacked(list):
    """A group's local values that are, in order, `whole[0], whole[1], ...` (a JoinedValues stacked)."""

    __slots__ = ("whole",)


def _parts(values: dict, devices: Sequence[Device]) -> list[Any]:
    """A group's local values (of `devices`), the one LocallyCombined value standing for all of them where there
    is one, or the values with the stack they are cut from."""
    local = [values[d] for d in devices]
    first = local[0]
    if isinstance(first, LocallyCombined):
        return [first.value]
    if isinstance(values, JoinedValues) and values.how == STACKED and values.over(devices):
        stacked = _Stacked(local)
        stacked.whole = values.whole
        return stacked
    return local


def combine_all(values: list[np.ndarray], combine: Callable[..., np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """Combine `values` (in mesh order) into `out`, or one new buffer.

    Up to `TREE_UP_TO` elements: pairwise in a balanced tree, neighbours first
    (((v0+v1)+(v2+v3))+...), which is how XLA adds the seeds' partial sums. Larger values:
    a running combine in mesh order, which reads each input once and keeps one output
    buffer hot, instead of a tree's scratch buffers; from `PARALLEL_FROM` bytes it runs in
    cache-sized chunks, split among the cores."""
    shapes = {np.shape(v) for v in values}
    same_shape = len(shapes) == 1
    if out is None:
        out = buffers.empty(next(iter(shapes)) if same_shape else np.broadcast_shapes(*shapes), np.asarray(values[0]).dtype)
    if out.size <= TREE_UP_TO and isinstance(values, _Stacked) and same_shape and len(values) > 2:
        _combine_stack(values.whole, out, combine)
    elif out.size <= TREE_UP_TO:
        levels = max(0, (len(values) - 1).bit_length() - 1)
        _combine_into(values, out, combine, [np.empty_like(out) for _ in range(levels)])
    elif out.nbytes >= PARALLEL_FROM and same_shape and all(np.asarray(v).flags.c_contiguous for v in values):
        flat = [np.asarray(v).reshape(-1) for v in values]
        workers = device_pool.workers()
        step = max(1, min(CHUNK // out.itemsize, -(-out.size // workers)))  # every worker gets a share
        device_pool.run_each([functools.partial(_running_combine, flat, out.reshape(-1), combine, lo, hi)
                              for lo, hi in _ranges(out.size, step, workers)], blas=False)
    elif out.nbytes >= PARALLEL_FROM and same_shape and out.ndim and out.shape[0] > 1:
        # strided values (a matmul's transposed result): blocks of rows of the C-ordered result on the pool
        arrays = [np.asarray(v) for v in values]
        workers = device_pool.workers()
        rows = max(1, min(CHUNK // max(1, out[0].nbytes), -(-out.shape[0] // workers)))
        device_pool.run_each([functools.partial(_combine_rows, arrays, out, combine, lo, hi, rows)
                              for lo, hi in _ranges(out.shape[0], rows, workers)], blas=False)
    else:
        _running_combine(values, out, combine)
    return out


TREE_UP_TO = 1 << 15  # elements
PARALLEL_FROM = 1 << 20  # bytes
CHUNK = 1 << 20  # bytes: one chunk of the output stays in cache while every input is added to it


def _running_combine(values: list[np.ndarray], out: np.ndarray, combine: Callable[..., np.ndarray],
                     lo: int | None = None, hi: int | None = None) -> None:
    """out[lo:hi] = values[0] op values[1] op ... (flat arrays; whole arrays when no bounds)."""
    if lo is None:
        combine(values[0], values[1], out=out)
        for value in values[2:]:
            combine(out, value, out=out)
        return
    step = CHUNK // out.itemsize
    for start in range(lo, hi, step):
        stop = min(start + step, hi)
        _running_combine([v[start:stop] for v in values], out[start:stop], combine)


def _combine_rows(values: list[np.ndarray], out: np.ndarray, combine: Callable[..., np.ndarray], lo: int, hi: int,
                  step: int) -> None:
    """out[lo:hi] = values[0][lo:hi] op values[1][lo:hi] op ..., `step` rows at a time (any strides)."""
    for start in range(lo, hi, step):
        stop = min(start + step, hi)
        _running_combine([v[start:stop] for v in values], out[start:stop], combine)


def _ranges(size: int, step: int, parts: int) -> list[tuple[int, int]]:
    """`size` split into at most `parts` contiguous ranges whose inner bounds are multiples of `step`."""
    steps = -(-size // step)
    bounds = [min(size, step * (steps * i // parts)) for i in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _combine_into(values: list[np.ndarray], out: np.ndarray, combine: Callable[..., np.ndarray],
                  scratch: list[np.ndarray], level: int = 0) -> None:
    """The tree of `combine_all` into `out`, using scratch[level] for the right half at each level."""
    if len(values) == 1:
        out[...] = values[0]
        return
    if len(values) == 2:
        combine(values[0], values[1], out=out)
        return
    half = 1 << ((len(values) - 1).bit_length() - 1)  # the largest power of two below len(values)
    _combine_into(values[:half], out, combine, scratch, level + 1)
    rest = values[half:]
    if len(rest) == 1:
        combine(out, rest[0], out=out)
        return
    _combine_into(rest, scratch[level], combine, scratch, level + 1)
    combine(out, scratch[level], out=out)


def _combine_stack(stack: np.ndarray, out: np.ndarray, combine: Callable[..., np.ndarray]) -> None:
    """`_combine_into`'s tree over `stack[0], stack[1], ...`, one level at a time: neighbours combined in one call
    per level, an odd one out carried up (the same pairs, in the same order, as the tree halving at powers of two)."""
    level = stack
    while len(level) > 2:
        pairs = len(level) // 2
        above = np.empty((pairs + len(level) % 2,) + stack.shape[1:], out.dtype)
        combine(level[0:2 * pairs:2], level[1:2 * pairs:2], out=above[:pairs])
        if len(level) % 2:
            above[pairs] = level[-1]
        level = above
    combine(level[0], level[1], out=out)


def allreduce_devices(mesh: Mesh, axes: Sequence[str], values: dict[Device, np.ndarray], op: str) -> dict[Device, np.ndarray]:
    """Every local device gets the `op`-reduction of `values` over its group along `axes`."""
    if not axes:
        return values
    begin = recorder.now() if recorder.on else 0
    combine = NUMPY_COMBINE[op]
    groups = local_groups(mesh, tuple(axes), device_table.process_index())
    partial: dict[tuple[int, ...], np.ndarray] = {}
    by_process_set: dict[tuple[int, ...], list[Group]] = {}
    for group in groups:
        local = _parts(values, group.local)
        if len(group.processes) > 1:  # combined straight into the buffer MPI reduces
            by_process_set.setdefault(group.processes, []).append(group)
        else:
            partial[group.key] = combine_all(local, combine) if len(local) > 1 else local[0]
    for processes, batch in sorted(by_process_set.items()):
        partial.update(_reduce_across(processes, [_parts(values, g.local) for g in batch],
                                      [g.key for g in batch], op))
    if begin:
        _record(f"all-reduce {op} over {','.join(axes)}", begin, [values], groups)
    return {device: partial[group.key] for group in groups for device in group.local}


def _record(name: str, begin: int, values: Sequence[dict], groups: Sequence[Group]) -> None:
    """A collective among the local devices of `groups` (and across processes: its MPI calls nest in it), as an
    event of the process's collectives track with the bytes of its distinct inputs."""
    nbytes = sum({id(v): np.asarray(v).nbytes for per_device in values for v in per_device.values()}.values())
    devices = sorted(d.id for g in groups for d in g.local)
    recorder.add(name, "collective", (recorder.COLLECTIVES,), begin, recorder.now(),
                 {"bytes": nbytes, "devices": devices})


def allreduce_devices_many(mesh: Mesh, axes: Sequence[str], values: Sequence[dict[Device, np.ndarray]],
                           op: str) -> list[dict[Device, np.ndarray]]:
    """allreduce_devices of several arrays of one dtype at once: one MPI call per process set for all of them
    (their parts side by side in one buffer), so that a group of reductions waits for its peers once."""
    begin = recorder.now() if recorder.on else 0
    combine = NUMPY_COMBINE[op]
    groups = local_groups(mesh, tuple(axes), device_table.process_index())
    partial: dict[Any, np.ndarray] = {}
    across: dict[tuple[int, ...], tuple[list, list]] = {}
    for index, per_device in enumerate(values):
        for group in groups:
            local = _parts(per_device, group.local)
            if len(group.processes) > 1:
                locals_, keys = across.setdefault(group.processes, ([], []))
                locals_.append(local)
                keys.append((index, group.key))
            else:
                partial[(index, group.key)] = combine_all(local, combine) if len(local) > 1 else local[0]
    for processes, (locals_, keys) in sorted(across.items()):
        partial.update(_reduce_across(processes, locals_, keys, op))
    if begin:
        _record(f"all-reduce {op} over {','.join(axes)}", begin, values, groups)
    return [{device: partial[(index, group.key)] for group in groups for device in group.local}
            for index in range(len(values))]


def _reduce_across(processes: tuple[int, ...], locals_: list[list[np.ndarray]], keys: list[tuple[int, ...]],
                   op: str) -> dict[tuple[int, ...], np.ndarray]:
    """One Allreduce among `processes` for all their groups (concatenated): each group's local values are
    combined straight into its part of the buffer that is reduced."""
    from ..runtime.distributed import runtime

    group = runtime().process_group(processes)
    combine = NUMPY_COMBINE[op]
    arrays = [[np.asarray(v) for v in local] for local in locals_]
    narrow = arrays[0][0].dtype if arrays[0][0].dtype.kind == "V" else None  # bfloat16, float8: MPI has no such type
    if narrow is not None:
        wide = _reduce_across(processes, [[v.astype(np.float32) for v in local] for local in arrays], keys, op)
        return {key: value.astype(narrow) for key, value in wide.items()}
    shapes = [_common_shape(local) for local in arrays]
    as_bytes = arrays[0][0].dtype == np.bool_  # MPI reduces bytes; logical or/and are max/min of 0s and 1s
    if len(arrays) == 1 and len(arrays[0]) == 1 and not as_bytes:  # nothing to combine: MPI reads the value
        return {keys[0]: group.allreduce(arrays[0][0].reshape(-1), _MPI_OP[op]).reshape(shapes[0])}
    bounds = [0]
    for shape in shapes:
        bounds.append(bounds[-1] + math.prod(shape))

    def fill(flat: np.ndarray) -> None:
        for local, shape, lo, hi in zip(arrays, shapes, bounds, bounds[1:]):
            part = flat[lo:hi].reshape(shape)
            if len(local) > 1:
                combine_all(local, combine, out=part)
            else:
                part[...] = local[0]

    dtype = np.dtype(np.uint8) if as_bytes else arrays[0][0].dtype
    reduced = group.allreduce_filled((bounds[-1],), dtype, _MPI_OP[op], fill)
    parts = {}
    for key, shape, lo, hi in zip(keys, shapes, bounds, bounds[1:]):
        chunk = reduced[lo:hi].reshape(shape)
        parts[key] = chunk.astype(np.bool_) if as_bytes else chunk
    return parts


def _common_shape(values: list[np.ndarray]) -> tuple[int, ...]:
    """The shape `values` broadcast to (the shape of their combination)."""
    first = values[0].shape
    return first if all(v.shape == first for v in values) else np.broadcast_shapes(*(v.shape for v in values))


def group_index(mesh: Mesh, axes: Sequence[str], device: Device) -> int:
    """The position of `device` within its group along `axes` (mixed radix, first axis major)."""
    position = dict(zip(mesh.axis_names, mesh.coordinates(device)))
    index = 0
    for name in axes:
        index = index * mesh.shape[name] + position[name]
    return index


class Gathered(NamedTuple):
    """A group's members' values, in group order, and, when the exchange left them adjacent in one
    buffer in that order, that buffer (flat), so that joining them along axis 0 needs no copy."""

    values: list[np.ndarray]
    flat: np.ndarray | None


def gather_devices(mesh: Mesh, axes: Sequence[str], values: dict[Device, np.ndarray]) -> dict[Device, Gathered]:
    """Every local device gets the values of all members of its group along `axes`, in group order."""
    begin = recorder.now() if recorder.on else 0
    groups = local_groups(mesh, tuple(axes), device_table.process_index(), by_axes=True)
    known = {d: values[d] for g in groups for d in g.local}
    flat_of: dict[tuple[Device, ...], np.ndarray] = {}
    by_process_set: dict[tuple[int, ...], list[tuple[Device, ...]]] = {}
    for group in groups:
        if len(group.processes) > 1:
            by_process_set.setdefault(group.processes, []).append(group.members)
    for processes, batch in sorted(by_process_set.items()):
        found, flat = _exchange_members(processes, batch, known)
        known.update(found)
        if flat is not None:
            flat_of[batch[0]] = flat
    result: dict[Device, Gathered] = {}
    for group in groups:
        gathered = Gathered([known[m] for m in group.members], flat_of.get(group.members))
        result.update({d: gathered for d in group.local})  # one per group, shared by its local devices
    if begin:
        _record(f"all-gather over {','.join(axes)}", begin, [values], groups)
    return result


def _exchange_members(processes: tuple[int, ...], batch: list[tuple[Device, ...]],
                      known: dict) -> tuple[dict, np.ndarray | None]:
    """One Allgather(v) among `processes` of their members' values for the groups in `batch`, each process
    copying its own members' values straight into the shared result buffer. Returns the values by device
    and, when the batch is one group whose members are ordered by process, the result buffer."""
    from ..runtime.distributed import runtime

    here = device_table.process_index()
    sample = np.asarray(next(known[d] for members in batch for d in members if d.process_index == here))
    owned = {p: [d for members in batch for d in members if d.process_index == p] for p in processes}
    counts = [len(owned[p]) * sample.size for p in processes]
    flat = buffers.empty((sum(counts),), sample.dtype)
    pieces: dict[Device, np.ndarray] = {}
    offset = 0
    for p, count in zip(processes, counts):
        for device in owned[p]:
            pieces[device] = flat[offset:offset + sample.size].reshape(sample.shape)
            offset += sample.size
    for device in owned[here]:
        pieces[device][...] = known[device]
    runtime().process_group(processes).allgatherv_inplace(flat, counts)
    in_flat_order = [d for p in processes for d in owned[p]]
    return pieces, flat if len(batch) == 1 and list(batch[0]) == in_flat_order else None


def _raise_on_ppermute_sort_diff() -> bool:
    """JAX's `jax_raise_on_ppermute_sort_diff` option (True unless set off)."""
    return bool(config.read("jax_raise_on_ppermute_sort_diff"))


def permute_devices(mesh: Mesh, axes: Sequence[str], values: dict[Device, np.ndarray],
                    perm: Sequence[tuple[int, int]]) -> dict[Device, np.ndarray]:
    """Within each group along `axes`, member i's value goes to member j for each (i, j) in `perm`;
    members that receive nothing get zeros."""
    begin = recorder.now() if recorder.on else 0
    here = device_table.process_index()
    sample = np.asarray(next(iter(values.values())))
    result: dict[Device, np.ndarray] = {}
    # JAX 0.12 numbers ppermute's devices in the order of `axes`, and refuses (by default) axes out of mesh order
    moved = [a for a in axes if mesh.shape[a] > 1]
    if moved != sorted(moved, key=mesh.axis_names.index) and _raise_on_ppermute_sort_diff():
        raise RuntimeError(
            "Make sure that the axis_name passed to jax.lax.ppermute is in the same order as the axis_names "
            "declared on the mesh. If you want to allow different order, you can disable the check via `with "
            "jax.raise_on_ppermute_sort_diff(False):` context manager.")
    groups = local_groups(mesh, tuple(axes), here, by_axes=True)
    processes = sorted({d.process_index for d in mesh.devices.flat})  # all of them run the ppermute
    with _permute_exchange(tuple(axes), processes, sample, perm) as exchange:
        for group in groups:
            members = group.members
            for source_index, target_index in perm:
                source, target = members[source_index], members[target_index]
                if source.process_index == here and target.process_index == here:
                    result[target] = values[source]
                elif source.process_index == here:
                    exchange.send(np.require(values[source], requirements="C"), target.process_index)
                elif target.process_index == here:
                    result[target] = buffers.empty_like(sample)
                    exchange.receive(result[target], source.process_index)
    for device in values:
        if device not in result:
            result[device] = np.zeros_like(sample)  # receives from nobody
    if begin:
        _record(f"permute over {','.join(axes)}", begin, [values], groups)
    return result


def _permute_exchange(axes: tuple[str, ...], processes: list[int], sample: np.ndarray, perm: Sequence) -> Any:
    """The checked point-to-point exchange of a ppermute among `processes` (nothing to do for one process)."""
    if len(processes) < 2:
        return contextlib.nullcontext(None)
    entry = f"ppermute {axes} {sample.shape} {sample.dtype.str} {tuple(map(tuple, perm))}"
    comm, rank_of = p2p_link()
    return Exchange(comm, _PERMUTE_TAG, f"ppermute over mesh axes {axes}", processes, entry, rank_of)


_PERMUTE_TAG = 11
