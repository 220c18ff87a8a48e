"""Allreduce through an MPI shared-memory window, for groups whose processes share one machine.

Each member copies its part into its own slot of the window; after a barrier, member r
reduces slice r of every slot (with NumPy, so NaN propagates as in NumPy and XLA) into
the window's result area; after a second barrier every member copies the result out.
Every byte is read from memory about three times, against MPI's pipelined algorithms that
move it through shared-memory queues several times over: on one oversubscribed 2-core
machine this is 2-5x faster than MPICH's Allreduce from 1 MiB up.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .mpi import mpi_module

_ALIGN = 64  # bytes: slots start on cache lines


class SharedMemoryReducer:
    """Allreduce among the members of `comm`, which must all run on this machine."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self._window: Any = None
        self._memory: np.ndarray | None = None  # the whole window as bytes: size slots, then the result
        self._capacity = 0  # bytes per slot

    def allreduce(self, send: np.ndarray, out: np.ndarray, combine: Callable[..., np.ndarray]) -> np.ndarray:
        """`out` (flat, like `send`) becomes the elementwise `combine` of every member's flat `send`."""
        self.own_slot(send.size, send.dtype)[...] = send
        return self.reduce_slots(out, combine)

    def own_slot(self, count: int, dtype: np.dtype) -> np.ndarray:
        """This member's slot as `count` elements of `dtype`, for the caller to fill before `reduce_slots` (saves
        the copy in; collective, as the window may grow: every member asks for the same size at the same call)."""
        if count * dtype.itemsize > self._capacity:
            self._grow(count * dtype.itemsize)
        return self._slot(self.rank, dtype, count)

    def reduce_slots(self, out: np.ndarray, combine: Callable[..., np.ndarray]) -> np.ndarray:
        """`out` (flat) becomes the elementwise `combine` of every member's filled slot (of out's size and type)."""
        assert self._memory is not None
        n, dtype = out.size, out.dtype
        slots = [self._slot(p, dtype, n) for p in range(self.size)]
        result = self._slot(self.size, dtype, n)
        self.comm.Barrier()
        lo, hi = self._share(n, self.rank, dtype.itemsize), self._share(n, self.rank + 1, dtype.itemsize)
        combine(slots[0][lo:hi], slots[1][lo:hi], out=result[lo:hi])
        for slot in slots[2:]:
            combine(result[lo:hi], slot[lo:hi], out=result[lo:hi])
        self.comm.Barrier()
        out[...] = result
        return out

    def _share(self, n: int, member: int, itemsize: int) -> int:
        """Where member `member`'s part of `n` elements starts (`size` members: the end): parts start on cache
        lines, so that a checked reduction's few extra elements (inband.py) do not misalign every part after the
        first, which costs NumPy's loops several percent of a large reduction."""
        if member >= self.size:
            return n
        step = max(1, _ALIGN // itemsize)
        return min(n, -(-(n * member // self.size) // step) * step)

    def _slot(self, index: int, dtype: np.dtype, count: int) -> np.ndarray:
        assert self._memory is not None
        start = index * self._capacity
        return self._memory[start:start + count * dtype.itemsize].view(dtype)

    def _grow(self, nbytes: int) -> None:
        """Replace the window by one with slots of at least `nbytes` (collective: every member asks for the
        same size at the same call, because allreduce is collective)."""
        MPI = mpi_module()
        if self._window is not None:
            self._memory = None
            self._window.Free()
        capacity = -(-max(nbytes, 2 * self._capacity) // _ALIGN) * _ALIGN
        total = capacity * (self.size + 1)
        self._window = MPI.Win.Allocate_shared(total if self.rank == 0 else 0, 1, comm=self.comm)
        buffer, _ = self._window.Shared_query(0)
        self._memory = np.frombuffer(buffer, np.uint8, count=total)
        self._capacity = capacity
