"""The data plane: buffer-based MPI operations among a group of processes.

Everything meshax moves between processes goes through a ProcessGroup, so that
later layers (collectives, resharding, desync checks) have one place to hook into.
Buffers are NumPy arrays passed to MPI without pickling or extra copies.
"""
from __future__ import annotations

import contextlib
import zlib
from typing import Any, Iterator, Sequence

import numpy as np

from .. import buffers
from ..config import config
from .mpi import mpi_module
from .shared_reduce import SharedMemoryReducer
from .watch import communicating


class DesyncError(RuntimeError):
    """Processes reached different communications: the same program diverged between processes."""

_REDUCTIONS = ("sum", "prod", "max", "min")
_NUMPY_OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
SHARED_MEMORY_FROM = 1 << 20  # bytes; smaller reductions are latency-bound and MPI's own path is best


class ProcessGroup:
    """MPI operations among `ranks` (world ranks, i.e. process indices), in that order."""

    def __init__(self, comm: Any, ranks: Sequence[int]) -> None:
        self.comm = comm
        self.ranks = tuple(ranks)
        self.size = len(self.ranks)
        self.rank = comm.Get_rank()
        self._labels: dict[str, str] = {}
        self._reducer: SharedMemoryReducer | bool | None = None  # None: not decided yet; False: not usable

    @contextlib.contextmanager
    def _operation(self, name: str, signature: Any) -> Iterator[None]:
        """Run MPI operation `name` under the watchdog; with MESHAX_CHECK, first check that every member
        is entering the same operation with the same shapes (else raise DesyncError on all of them)."""
        label = self._labels.get(name)
        if label is None:
            label = self._labels[name] = f"MPI {name} among processes {list(self.ranks)}"
        with communicating(label) as activity:
            if config.read("meshax_check"):
                self._agree(f"MPI {name}", signature, activity)
            yield

    def check_same(self, name: str, signature: Any) -> None:
        """Raise DesyncError on every member unless all pass the same `signature` (always checked)."""
        with communicating(f"{name} among processes {list(self.ranks)}") as activity:
            self._agree(name, signature, activity)

    def _agree(self, name: str, signature: Any, activity: Any) -> None:
        mine = zlib.crc32(repr((name, signature)).encode())
        bounds = np.array([mine, -mine], np.int64)
        self.comm.Allreduce(mpi_module().IN_PLACE, bounds, op=mpi_module().MAX)
        if bounds[0] == -bounds[1]:
            return
        everyone = self.comm.allgather((name, signature, activity.site))
        lines = [f"process {rank}: {n} {sig} called at {site}" for rank, (n, sig, site) in zip(self.ranks, everyone)]
        raise DesyncError(
            f"processes {list(self.ranks)} disagree on communication #{activity.sequence} (they must run the same "
            "operations in the same order): " + "; ".join(lines)
        )

    def _mpi_op(self, op: str) -> Any:
        if op not in _REDUCTIONS:
            raise ValueError(f"reduction op={op!r} is not one of {_REDUCTIONS}.")
        MPI = mpi_module()
        return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[op]

    def allreduce(self, array: np.ndarray, op: str = "sum", out: np.ndarray | None = None) -> np.ndarray:
        """Reduce `array` elementwise over the group; every member gets the result. NaN propagates through
        max and min, as in NumPy and XLA."""
        send = np.require(array, requirements="C")
        return self._allreduce(send, buffers.empty_like(send) if out is None else out, op)

    def allreduce_inplace(self, array: np.ndarray, op: str = "sum") -> np.ndarray:
        """Like allreduce, overwriting the contiguous `array` with the result."""
        return self._allreduce(array, array, op)

    def _allreduce(self, send: np.ndarray, result: np.ndarray, op: str) -> np.ndarray:
        mpi_op = self._mpi_op(op)
        with self._operation("Allreduce", (op, send.shape, send.dtype.str)):
            reducer = self._shared_reducer(send.nbytes)
            if reducer is not None:  # NumPy combines the parts: NaN already propagates
                reducer.allreduce(send.reshape(-1), result.reshape(-1), _NUMPY_OPS[op])
                return result
            MPI = mpi_module()
            nans = np.isnan(send) if op in ("max", "min") and send.dtype.kind in "fc" else None
            self.comm.Allreduce(MPI.IN_PLACE if send is result else send, result, op=mpi_op)
            if nans is not None:
                self._propagate_nans(nans, result)
        return result

    def _propagate_nans(self, nans: np.ndarray, result: np.ndarray) -> None:
        """Put NaN wherever any member had one: MPI's MAX and MIN may skip NaN, NumPy's propagate it."""
        MPI = mpi_module()
        anywhere = np.array([nans.any()], np.uint8)
        self.comm.Allreduce(MPI.IN_PLACE, anywhere, op=MPI.MAX)
        if anywhere[0]:
            mask = nans.view(np.uint8)
            self.comm.Allreduce(MPI.IN_PLACE, mask, op=MPI.MAX)
            result[mask.view(np.bool_)] = np.nan

    def _shared_reducer(self, nbytes: int) -> SharedMemoryReducer | None:
        """The shared-memory path for large reductions when every member is on this machine. Whether they are
        is found out (collectively) at the group's first large reduction, which every member reaches together."""
        if nbytes < SHARED_MEMORY_FROM or self.size < 2:
            return None
        if self._reducer is None:
            self._reducer = SharedMemoryReducer(self.comm) if SharedMemoryReducer.usable(self.comm) else False
        return self._reducer or None

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
            self.comm.Barrier()
