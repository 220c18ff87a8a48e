"""A value's per-device arrays where one call computed them all (interpreters/process_blocks.py): the devices'
views of one joined result, the result itself kept beside them, so that the next joined call reads it at once
instead of finding, device by device, where each view lies (a 16-device FSDP step on one process makes ~50 such
calls). Both shard_map's per-device values and an Array's local buffers may be one.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .array import read_only

STACKED = -1  # a result stacked along a new first dimension: device i's value is result[i]


class JoinedValues(dict):
    """device -> its read-only view of `whole`, for the `devices` in order: `whole` cut along dimension `how` into
    equal blocks (or `STACKED`). An ordinary dict to everything else."""

    __slots__ = ("whole", "how", "devices")

    def over(self, devices: Sequence[Any]) -> bool:
        """Whether these are the values of exactly `devices`, in that order."""
        return self.devices is devices or self.devices == tuple(devices)


def joined_values(whole: np.ndarray, how: int, devices: tuple[Any, ...],
                  sizes: Sequence[int] | None = None) -> JoinedValues:
    """The `devices`' values cut from `whole` (made read-only, and so are the views): in equal blocks, or blocks
    of `sizes` along `how`."""
    whole = read_only(whole)
    count = len(devices)
    if how == STACKED:
        views: Sequence[np.ndarray] = [whole[i, ...] for i in range(count)]  # arrays, scalars' too (not NumPy scalars)
    elif how == 0 and whole.flags.c_contiguous and (sizes is None or len(set(sizes)) == 1):
        views = list(whole.reshape((count, whole.shape[0] // count) + whole.shape[1:]))
    else:
        if sizes is None:
            sizes = [whole.shape[how] // count] * count
        cut = [slice(None)] * whole.ndim
        views, start = [], 0
        for size in sizes:
            cut[how] = slice(start, start + size)
            views.append(whole[tuple(cut)])
            start += size
    values = JoinedValues(zip(devices, views))
    values.whole, values.how, values.devices = whole, how, devices
    return values


def whole_of(values: Any, devices: Sequence[Any], how: int) -> np.ndarray | None:
    """The result that `values` (a value's per-device arrays) are cut from, where they are `devices`' blocks of it
    along `how`, in that order (a C-ordered stack, asked for along its first dimension, is viewed so); else None."""
    if not (isinstance(values, JoinedValues) and values.over(devices)):
        return None
    whole = values.whole
    if values.how == how:
        return whole
    if how == 0 and values.how == STACKED and whole.ndim >= 2 and whole.flags.c_contiguous:
        return whole.reshape((whole.shape[0] * whole.shape[1],) + whole.shape[2:])
    return None
