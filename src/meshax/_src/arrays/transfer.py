"""Putting data on devices and moving arrays between any two shardings.

A reshard is planned from sharding metadata alone, identically on every process:
each destination box is cut into its intersections with the source boxes, and
each piece comes from a local replica when there is one, otherwise from one owner
process by MPI point-to-point. Only the bytes a destination lacks move; pieces
between two processes are matched in plan order on a dedicated communicator.
"""
from __future__ import annotations

import functools
import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime import devices as device_table
from .array import Array, partial_sum_rules, read_only
from ..runtime.peers import Exchange
from ..sharding.mesh import Mesh
from ..sharding.shardings import Box, NamedSharding, PartitionSpec, Sharding, unique_boxes

Region = tuple[slice, ...]


@dataclass(frozen=True)
class Piece:
    """Part `box` of the array, copied from source box `source` (on `sender`) into destination box `target`."""

    sender: int
    receiver: int
    source: Box
    target: Box
    box: Box


def intersect(a: Box, b: Box) -> Box | None:
    box = tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(a, b))
    return box if all(start < stop for start, stop in box) else None


def relative(box: Box, origin: Box) -> Region:
    """`box` as slices into a buffer holding `origin` (ending in ..., so 0-d buffers stay arrays)."""
    return tuple(slice(start - o, stop - o) for (start, stop), (o, _) in zip(box, origin)) + (Ellipsis,)


def box_shape(box: Box) -> tuple[int, ...]:
    return tuple(stop - start for start, stop in box)


@functools.lru_cache(maxsize=1024)
def plan(shape: tuple[int, ...], source: Sharding, target: Sharding) -> tuple[Piece, ...]:
    """Every piece that must be copied so each process holds its destination boxes."""
    owners = {
        box: sorted({d.process_index for d in devices})
        for box, devices in unique_boxes(source.device_boxes(shape).items()).items()
    }
    wanted = unique_boxes(target.device_boxes(shape).items())
    pieces = []
    for target_box, devices in wanted.items():
        for receiver in sorted({d.process_index for d in devices}):
            for source_box, holders in owners.items():
                overlap = intersect(source_box, target_box) if shape else ()
                if overlap is None:
                    continue
                sender = receiver if receiver in holders else holders[receiver % len(holders)]
                pieces.append(Piece(sender, receiver, source_box, target_box, overlap))
    return tuple(pieces)


def reshard(array: Array, target: Sharding) -> Array:
    """`array` laid out as `target` says; call on every process holding a source or target device."""
    if target != array.sharding and (_unreduced(array.sharding) or _unreduced(target)):
        return partial_sum_rules["reshard"](array, target)
    if target == array.sharding:  # no data moves; the result has the sharding as asked (P('a', None), not P('a'))
        return array if array.committed and _same_form(target, array.sharding) else _committed(array, target)
    if not array.committed:
        return from_host(np.asarray(array), target, array.weak_type)
    _check_target(array.shape, target)
    here = device_table.process_index()
    pieces = plan(array.shape, array.sharding, target)
    sources = array.local_boxes()
    filled, shared = _local_targets(target, array.shape, here, array.dtype, pieces, sources)
    entry = _entry(array.shape, array.dtype, array.sharding, target)
    _exchange(pieces, here, sources, filled, shared, array.dtype, participants(array.shape, array.sharding, target),
              entry)
    return _array_from_boxes(array.shape, array.dtype, target, filled, array.weak_type)


def _same_form(a: Sharding, b: Sharding) -> bool:
    """Whether two equal shardings are also written alike (P('a', None) is not P('a'))."""
    if a is b:
        return True
    if type(a) is NamedSharding and type(b) is NamedSharding:
        return (a.mesh == b.mesh and tuple(a.spec) == tuple(b.spec) and a.spec.unreduced == b.spec.unreduced
                and a.spec.reduced == b.spec.reduced and a.memory_kind == b.memory_kind)
    return repr(a) == repr(b)


def _unreduced(sharding: Sharding) -> frozenset:
    return sharding.spec.unreduced if isinstance(sharding, NamedSharding) else frozenset()


def _committed(array: Array, sharding: Sharding) -> Array:
    return Array(array.shape, array.dtype, sharding, array.local_buffers(), array.weak_type)


def _check_target(shape: tuple[int, ...], target: Sharding) -> None:
    check = getattr(target, "check_rank", None)
    if check is not None:
        check(len(shape))


def _local_targets(target: Sharding, shape: tuple[int, ...], here: int, dtype: np.dtype,
                   pieces: tuple[Piece, ...], sources: dict[Box, np.ndarray]) -> tuple[dict[Box, np.ndarray], set[Box]]:
    """A buffer for each destination box this process holds, and the boxes that are views of a local source."""
    boxes: dict[Box, np.ndarray] = {}
    shared: set[Box] = set()
    for device, box in target.device_boxes(shape).items():
        if device.process_index != here or box in boxes:
            continue
        mine = [p for p in pieces if p.receiver == here and p.target == box]
        if len(mine) == 1 and mine[0].sender == here and mine[0].box == box:
            boxes[box] = sources[mine[0].source][relative(box, mine[0].source)]
            shared.add(box)
    fresh = {box for device, box in target.device_boxes(shape).items() if device.process_index == here} - shared
    boxes.update(local_buffers(fresh, dtype))
    return boxes, shared


def _exchange(pieces: tuple[Piece, ...], here: int, sources: dict[Box, np.ndarray],
              filled: dict[Box, np.ndarray], shared: set[Box], dtype: np.dtype, participants: tuple[int, ...],
              entry: str) -> None:
    """Copy local pieces and move remote ones with nonblocking point-to-point messages, one message for
    all the pieces a sender has for one destination box when they stack into one block of rows."""
    landing = []
    for piece in pieces:
        if piece.receiver == here and piece.sender == here and piece.target not in shared:
            source = sources[piece.source][relative(piece.box, piece.source)]
            filled[piece.target][relative(piece.box, piece.target)] = source
    messages = _messages(pieces, here)
    if len(participants) < 2 or here not in participants:
        return
    peers = sorted({p.sender if p.receiver == here else p.receiver for parts, _ in messages for p in parts})
    comm, rank_of = p2p_link()
    with Exchange(comm, _TAG, f"device_put/reshard exchanging data with processes {peers}", participants,
                  entry, rank_of) as exchange:
        for parts, box in messages:
            first = parts[0]
            if first.sender == here:
                blocks = [sources[p.source][relative(p.box, p.source)] for p in parts]
                data = np.ascontiguousarray(blocks[0]) if len(blocks) == 1 else np.concatenate(blocks, axis=0)
                exchange.send(data, first.receiver)
            else:
                region = relative(box, first.target)
                view = filled[first.target][region]
                direct = view.flags.c_contiguous  # e.g. a block of whole leading rows: receive in place
                buffer = view if direct else np.empty(box_shape(box), dtype)
                exchange.receive(buffer, first.sender)
                if not direct:
                    landing.append((buffer, filled[first.target], region))
    for buffer, destination, region in landing:
        destination[region] = buffer


@functools.lru_cache(maxsize=1024)
def _entry(shape: tuple[int, ...], dtype: np.dtype, source: Sharding, target: Sharding) -> str:
    """How a reshard is recorded in the participants' history: the two layouts with their devices in order,
    so that processes whose meshes order devices differently disagree."""
    return f"reshard {shape} {dtype.str} {placement(source)} -> {placement(target)}"


@functools.lru_cache(maxsize=1024)
def placement(sharding: Sharding) -> str:
    """The sharding as processes compare it: its layout, canonical (equal shardings read the same however their
    spec was spelled), and its devices' ids in order."""
    ids = [device.id for device in sharding._device_list]
    listed = ",".join(map(str, ids)) if len(ids) <= 16 else f"{len(ids)} devices, crc {zlib.crc32(str(ids).encode()):08x}"
    if isinstance(sharding, NamedSharding):
        mesh = sharding.mesh
        axes = ", ".join(f"{name!r}: {size} {str(kind).rsplit('.', 1)[-1]}" for name, size, kind in
                         zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types))
        layout = f"NamedSharding(mesh=({axes}), split={sharding.spec.normalized()})"
    else:
        layout = repr(sharding)
    return f"{layout} on devices [{listed}]"


@functools.lru_cache(maxsize=1024)
def participants(shape: tuple[int, ...], source: Sharding, target: Sharding) -> tuple[int, ...]:
    """The processes that take part in a reshard, the same on each of them: those holding a target device and
    those sending a piece to another process. A process holding only source devices that sends nothing does not
    take part, and a reshard onto one process's devices from data it holds is that process's own business (each
    process may move a replicated array to a device of its own)."""
    pieces = plan(shape, source, target)
    senders = {piece.sender for piece in pieces if piece.sender != piece.receiver}
    return tuple(sorted(senders | {device.process_index for device in target.device_set}))


def _messages(pieces: tuple[Piece, ...], here: int) -> list[tuple[list[Piece], Box]]:
    """This process's remote pieces as messages, in plan order (the same on sender and receiver): pieces
    from one sender into one destination box travel together when their boxes stack along dimension 0."""
    groups: dict[tuple[int, int, Box], list[Piece]] = {}
    for piece in pieces:
        if (piece.sender == here) != (piece.receiver == here):
            groups.setdefault((piece.sender, piece.receiver, piece.target), []).append(piece)
    messages = []
    for parts in groups.values():
        parts = sorted(parts, key=lambda p: p.box)
        merged = _stacked(parts) if any(_strided(p) for p in parts) else None
        messages.extend([(parts, merged)] if merged is not None else [([p], p.box) for p in parts])
    return messages


def _strided(piece: Piece) -> bool:
    """Whether the piece is a strided (non-contiguous) part of its source box, so sending it means packing
    anyway; contiguous pieces go out as they are, without a copy."""
    return any(part != whole for part, whole in zip(piece.box[1:], piece.source[1:]))


def _stacked(parts: list[Piece]) -> Box | None:
    """The box that `parts` (sorted) fill when they are consecutive row blocks of equal columns, else None."""
    boxes = [p.box for p in parts]
    if not boxes[0]:
        return None if len(boxes) > 1 else boxes[0]
    for before, after in zip(boxes, boxes[1:]):
        if before[1:] != after[1:] or before[0][1] != after[0][0]:
            return None
    return ((boxes[0][0][0], boxes[-1][0][1]),) + boxes[0][1:]


_TAG = 7


def p2p_link() -> tuple[Any, dict[int, int] | None]:
    """The point-to-point communicator and each process's rank in it (None: its id)."""
    from ..runtime.distributed import runtime

    rt = runtime()
    comm = None if rt is None else rt.p2p_comm()
    if comm is None:
        raise RuntimeError("moving data between processes needs meshax.distributed.initialize() first.")
    return comm, rt.p2p_ranks()


def local_buffers(boxes: set[Box], dtype: np.dtype, value: np.ndarray | None = None) -> dict[Box, np.ndarray]:
    """A buffer for each of this process's distinct `boxes`, copied from the whole `value` (else uninitialized):
    where the boxes tile the box around them (a process's devices' consecutive blocks of rows), views of one
    buffer for it, which a call over the process's joined blocks reads without copying (process_blocks.py)."""
    if len(boxes) > 1 and all(box for box in boxes):
        ndim = len(next(iter(boxes)))
        around = tuple((min(b[d][0] for b in boxes), max(b[d][1] for b in boxes)) for d in range(ndim))
        if sum(math.prod(box_shape(b)) for b in boxes) == math.prod(box_shape(around)):  # sharding boxes are disjoint
            whole = (np.array(value[_slices(around)], copy=True) if value is not None
                     else np.empty(box_shape(around), dtype))
            return {box: whole[relative(box, around)] for box in boxes}
    if value is None:
        return {box: np.empty(box_shape(box), dtype) for box in boxes}
    return {box: np.array(value[_slices(box)], copy=True) for box in boxes}


def _slices(box: Box) -> tuple[slice, ...]:
    return tuple(slice(start, stop) for start, stop in box)


def _array_from_boxes(shape: tuple[int, ...], dtype: np.dtype, sharding: Sharding,
                      filled: dict[Box, np.ndarray], weak_type: bool) -> Array:
    here = device_table.process_index()
    boxes = sharding.device_boxes(shape)
    buffers = {d: read_only(filled[b]) for d, b in boxes.items() if d.process_index == here}
    shared = {}
    for device, buffer in buffers.items():  # replicas share one read-only buffer object
        buffers[device] = shared.setdefault(boxes[device], buffer)
    return Array(shape, dtype, sharding, buffers, weak_type)


def from_host(value: np.ndarray, sharding: Sharding, weak_type: bool = False, committed: bool = True) -> Array:
    """An Array from a host value every process holds whole: each process copies its boxes."""
    if _unreduced(sharding):  # partial sums: the value on the first device of each group, zeros on the others
        plain = from_host(value, partial_sum_rules["without"](sharding), weak_type, committed)
        result = partial_sum_rules["reshard"](plain, sharding)
        result.committed = committed
        return result
    _check_target(value.shape, sharding)
    here = device_table.process_index()
    local = {box for device, box in sharding.device_boxes(value.shape).items() if device.process_index == here}
    result = _array_from_boxes(value.shape, value.dtype, sharding, local_buffers(local, value.dtype, value), weak_type)
    result.committed = committed
    return result


def _replicated_everywhere() -> NamedSharding:
    """Replicated over the devices of every live process (runtime/recovery.py)."""
    from ..runtime.distributed import live_processes

    live = set(live_processes())
    return NamedSharding(Mesh([d for d in device_table.devices() if d.process_index in live], ("processes",)),
                         PartitionSpec())


def global_value(array: Array) -> np.ndarray:
    """The whole value of `array` on every live process (a collective when it spans processes)."""
    from ..runtime.distributed import live_processes

    spans_all = set(array.sharding.process_indices) == set(live_processes())
    if array.is_fully_replicated and spans_all:
        return np.asarray(array)
    return np.asarray(reshard(array, _replicated_everywhere()))
