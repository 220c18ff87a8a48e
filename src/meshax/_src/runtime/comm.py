"""The data plane: buffer-based MPI operations among a group of processes.

Everything meshax moves between processes goes through a ProcessGroup, so that
later layers (collectives, resharding, desync checks) have one place to hook into.
Buffers are NumPy arrays passed to MPI without pickling or extra copies.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np

from .. import buffers
from ..config import config
from . import inband
from .mpi import mpi_module
from .shared_reduce import SharedMemoryReducer
from . import watch
from .watch import Activity, communicating


_REDUCTIONS = ("sum", "prod", "max", "min")
_NUMPY_OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
SHARED_MEMORY_FROM = 1 << 20  # bytes; smaller reductions are latency-bound and MPI's own path is best
CHECKED_BYTES = 4096 + 64  # the one size of every small checked reduction: 4 KiB of data and the check


class ProcessGroup:
    """MPI operations among `ranks` (world ranks, i.e. process indices), in that order.

    Every operation advances the group's history (history.py) and, unless checking is off (MESHAX_CHECK=0),
    verifies that every member is running the same operation at the same point of the same history:
    reductions carry the check in their data (inband.py), other operations first agree with a small allreduce.
    A disagreement fails the whole job with what each process is doing, never a wrong number."""

    def __init__(self, comm: Any, ranks: Sequence[int], one_machine: bool = False) -> None:
        self.comm = comm
        self.ranks = tuple(ranks)
        self.size = len(self.ranks)
        self.rank = comm.Get_rank()
        self._where = f"among processes {list(self.ranks)}"
        # Decided from the job's host table, not collectively: members that run different operations must never
        # meet in different collectives before their check has caught it.
        self._reducer = SharedMemoryReducer(comm) if one_machine and self.size > 1 else None

    @contextlib.contextmanager
    def _operation(self, name: str, signature: Any, agree_first: bool = True) -> Iterator[Activity]:
        """Run MPI operation `name` under the watchdog, as a step of the group's history; when checking and
        `agree_first`, first agree with every member that it is the same step."""
        entry = f"MPI {name} {signature}"
        with communicating(f"{entry} {self._where}", self.ranks, entry) as activity:
            if agree_first and config.read("meshax_check"):
                self._agree(activity)
            try:
                yield activity
            except mpi_module().Exception as error:  # e.g. a message truncated: the members' sizes differ
                self._desync(activity, f"MPI failed: {str(error).splitlines()[0]}")

    def check_same(self, name: str, signature: Any) -> None:
        """Fail the job on every member unless all pass the same `signature` (checked even with checks off)."""
        with communicating(f"{name} {signature} {self._where}", self.ranks, f"{name} {signature}") as activity:
            self._agree(activity)

    def _agree(self, activity: Activity) -> None:
        """Check, in one small allreduce, that every member is at the same step of the same history."""
        self._fixed_allreduce(None, "max", activity)

    def _fixed_allreduce(self, payload: np.ndarray | None, op: str, activity: Activity) -> np.ndarray:
        """Reduce the flat `payload` (or nothing: a bare check) in an Allreduce of exactly CHECKED_BYTES, whose
        last elements are the in-band check. Every small reduction and every check has that one size, so members
        that disagree never hand MPI different sizes (which MPICH cannot survive): their checks just differ."""
        dtype = np.dtype(np.int64) if payload is None else payload.dtype
        work = np.empty(CHECKED_BYTES // dtype.itemsize, dtype)
        extra = inband.trailer_length(dtype, op, self.size)
        used = 0 if payload is None else payload.size
        work[:used] = payload if payload is not None else 0
        work[used:work.size - extra] = 0  # not garbage: denormal or NaN bit patterns would slow the reduction
        expected = inband.write_trailer(work[work.size - extra:], activity.chain, op, self.size)
        self.comm.Allreduce(mpi_module().IN_PLACE, work, op=self._mpi_op(op))
        if not inband.trailer_agrees(work[work.size - extra:], expected):
            self._desync(activity, "the members' histories differ")
        return work[:used]

    def _desync(self, activity: Activity, detail: str) -> None:
        watch.desync(activity, self.ranks, detail)

    def _mpi_op(self, op: str) -> Any:
        if op not in _REDUCTIONS:
            raise ValueError(f"reduction op={op!r} is not one of {_REDUCTIONS}.")
        MPI = mpi_module()
        return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[op]

    def allreduce(self, array: np.ndarray, op: str = "sum", out: np.ndarray | None = None) -> np.ndarray:
        """Reduce `array` elementwise over the group; every member gets the result (in `out` if given). NaN
        propagates through max and min, as in NumPy and XLA."""
        result = self._allreduce(np.require(array, requirements="C"), op)
        if out is None:
            return result
        out[...] = result
        return out

    def allreduce_inplace(self, array: np.ndarray, op: str = "sum") -> np.ndarray:
        """Like allreduce for a contiguous `array` that the caller no longer needs: the result may reuse it."""
        return self._allreduce(array, op)

    def _allreduce(self, send: np.ndarray, op: str) -> np.ndarray:
        mpi_op = self._mpi_op(op)
        extra = inband.trailer_length(send.dtype, op, self.size) if config.read("meshax_check") else 0
        small = extra and send.nbytes + extra * send.dtype.itemsize <= CHECKED_BYTES
        shared = self._reducer is not None and send.nbytes >= SHARED_MEMORY_FROM
        with self._operation("Allreduce", (op, send.shape, send.dtype.str), agree_first=not small) as activity:
            nans = np.isnan(send) if op in ("max", "min") and send.dtype.kind in "fc" else None
            if small:
                result = self._fixed_allreduce(send.reshape(-1), op, activity)
            elif shared:  # NumPy combines the parts: NaN already propagates
                assert self._reducer is not None
                result, nans = buffers.empty((send.size,), send.dtype), None
                self._reducer.allreduce(send.reshape(-1), result, _NUMPY_OPS[op])
            else:
                result = buffers.empty((send.size,), send.dtype)
                self.comm.Allreduce(send.reshape(-1), result, op=mpi_op)
            if nans is not None:
                self._propagate_nans(nans.reshape(-1), result)
        return result.reshape(send.shape)

    def _propagate_nans(self, nans: np.ndarray, result: np.ndarray) -> None:
        """Put NaN wherever any member had one: MPI's MAX and MIN may skip NaN, NumPy's propagate it."""
        MPI = mpi_module()
        anywhere = np.array([nans.any()], np.uint8)
        self.comm.Allreduce(MPI.IN_PLACE, anywhere, op=MPI.MAX)
        if anywhere[0]:
            mask = nans.view(np.uint8)
            self.comm.Allreduce(MPI.IN_PLACE, mask, op=MPI.MAX)
            result[mask.view(np.bool_)] = np.nan

    def allgather(self, array: np.ndarray) -> np.ndarray:
        """Stack every member's equally shaped `array` along a new leading axis."""
        send = np.require(array, requirements="C")
        result = buffers.empty((self.size,) + send.shape, send.dtype)
        with self._operation("Allgather", (send.shape, send.dtype.str)):
            self.comm.Allgather(send, result)
        return result

    def allgatherv_inplace(self, result: np.ndarray, counts: Sequence[int]) -> np.ndarray:
        """Fill the flat `result` with every member's part: member i's counts[i] elements follow those of
        members before it, and each member has already written its own part in place."""
        MPI = mpi_module()
        if len(set(counts)) == 1:  # MPICH's Allgatherv is far slower than Allgather for equal parts
            with self._operation("Allgather", (counts[0], result.dtype.str)):
                self.comm.Allgather(MPI.IN_PLACE, result)
        else:
            with self._operation("Allgatherv", (tuple(counts), result.dtype.str)):
                self.comm.Allgatherv(MPI.IN_PLACE, [result, list(counts)])
        return result

    def broadcast(self, array: np.ndarray, root: int) -> np.ndarray:
        """Every member gets member `root`'s `array` (others pass a buffer of the same shape)."""
        buffer = np.require(array, requirements="C")
        with self._operation("Bcast", (root, buffer.shape, buffer.dtype.str)):
            self.comm.Bcast(buffer, root=root)
        return buffer

    def broadcast_object(self, value: Any, root: int) -> Any:
        with self._operation("bcast", root):
            return self.comm.bcast(value, root=root)

    def allgather_object(self, value: Any) -> list[Any]:
        with self._operation("allgather", None):
            return self.comm.allgather(value)

    def barrier(self) -> None:
        with self._operation("Barrier", None):
            if not config.read("meshax_check"):  # else agreeing (an allreduce) already synchronised everyone
                self.comm.Barrier()
