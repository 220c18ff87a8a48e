"""Cooperative restore: when processes would read the same chunks many times over, each chunk is read once.

Restoring onto a sharding whose boxes cut across the stored chunks (say rows saved, columns
wanted) makes every process read most of every chunk. Instead, the stored chunk grid becomes a
sharding of the job's devices (one chunk per device, spread over the processes), each process reads
only its chunks, and meshax's resharding moves the pieces to the target layout over MPI. The choice
depends only on the checkpoint's metadata and the target sharding, so every process makes the same
one; the cooperative path is then a collective of all processes.
"""
from __future__ import annotations

import math

import numpy as np

from .. import devices as device_table
from ..array import Array
from ..mesh import Mesh
from ..sharding import Box, NamedSharding, PartitionSpec, Sharding, unique_boxes
from ..transfer import _array_from_boxes, reshard
from .zarr_io import ArraySource

OVERREAD = 1.25  # read cooperatively when the processes together would read more than this many copies


def _direct_bytes(stored: ArraySource, sharding: Sharding) -> int:
    """Bytes all processes together read when each reads the rows of the chunks its own boxes need."""
    row = math.prod(stored.chunk[1:]) * stored.dtype.itemsize
    total = 0
    for process in sharding.process_indices:
        boxes = unique_boxes((d, b) for d, b in sharding.device_boxes(stored.shape).items()
                             if d.process_index == process)
        rows: dict[tuple[int, ...], tuple[int, int]] = {}
        for box in boxes:
            grid = [range(a // c, -(-b // c)) if b > a else range(0) for (a, b), c in zip(box, stored.chunk)]
            for position in np.ndindex(*[len(r) for r in grid]):
                index = tuple(r[i] for r, i in zip(grid, position))
                origin = index[0] * stored.chunk[0]
                lo, hi = max(box[0][0], origin) - origin, min(box[0][1], origin + stored.chunk[0]) - origin
                old = rows.get(index, (lo, hi))
                rows[index] = (min(old[0], lo), max(old[1], hi))
        total += sum((hi - lo) * row for lo, hi in rows.values())
    return total


def chunk_sharding(stored: ArraySource, sharding: Sharding) -> Sharding | None:
    """The sharding that gives each stored chunk to one device, if reading through it saves reading."""
    processes = device_table.process_count()
    if (processes == 1 or not isinstance(stored, ArraySource) or stored._zarr is not None or not stored.shape
            or set(sharding.process_indices) != set(range(processes)) or 0 in stored.shape):
        return None
    grid = tuple(-(-n // c) for n, c in zip(stored.shape, stored.chunk))
    # meshax splits a dimension of n into k boxes of ceil(n / k): that must be the chunk size
    if any(-(-n // k) != c for n, k, c in zip(stored.shape, grid, stored.chunk)):
        return None
    count = math.prod(grid)
    if count < 2 or count > len(device_table.devices()):
        return None
    array_bytes = math.prod(stored.shape) * stored.dtype.itemsize
    if _direct_bytes(stored, sharding) <= OVERREAD * array_bytes:
        return None
    # one chunk per device, taking the processes in turn so that each reads its share
    devices = sorted(device_table.devices(), key=lambda d: (d.local_hardware_id, d.process_index))[:count]
    names = tuple(f"chunks{i}" for i in range(len(grid)))
    return NamedSharding(Mesh(np.array(devices, dtype=object).reshape(grid), names), PartitionSpec(*names))


def read_chunks(stored: ArraySource, source: Sharding) -> Array:
    """The stored array laid out on `source`, each process reading only the chunks of its devices.

    ml_dtypes types (bfloat16, float8, ...) travel as unsigned integers of their size, which MPI can send."""
    here = device_table.process_index()
    boxes: list[Box] = list(unique_boxes((d, b) for d, b in source.device_boxes(stored.shape).items()
                                         if d.process_index == here))
    wire = _wire_dtype(stored.dtype)
    filled = {box: value.view(wire) for box, value in stored.read_boxes(boxes).items()}
    return _array_from_boxes(stored.shape, wire, source, filled, False)


def move(chunks: Array, target: Sharding, dtype: np.dtype) -> Array:
    """`chunks` resharded onto `target` (a collective of the processes holding either), as `dtype`."""
    moved = reshard(chunks, target)
    if moved.dtype == dtype:
        return moved
    return _array_from_boxes(moved.shape, dtype, target, {b: v.view(dtype) for b, v in moved.local_boxes().items()},
                             False)


def _wire_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}") if dtype.kind == "V" else dtype
