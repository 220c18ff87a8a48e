"""The data plane: buffer-based MPI operations among a group of processes.

Everything meshax moves between processes goes through a ProcessGroup, so that
later layers (collectives, resharding, desync checks) have one place to hook into.
Buffers are NumPy arrays passed to MPI without pickling or extra copies.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .watch import communicating

_REDUCTIONS = ("sum", "prod", "max", "min")


class ProcessGroup:
    """MPI operations among `ranks` (world ranks, i.e. process indices), in that order."""

    def __init__(self, comm: Any, ranks: Sequence[int]) -> None:
        self.comm = comm
        self.ranks = tuple(ranks)
        self.size = len(self.ranks)
        self.rank = comm.Get_rank()

    def _mpi_op(self, op: str) -> Any:
        from .mpi import mpi_module

        if op not in _REDUCTIONS:
            raise ValueError(f"reduction op={op!r} is not one of {_REDUCTIONS}.")
        MPI = mpi_module()
        return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[op]

    def allreduce(self, array: np.ndarray, op: str = "sum", out: np.ndarray | None = None) -> np.ndarray:
        """Reduce `array` elementwise over the group; every member gets the result."""
        send = np.require(array, requirements="C")
        result = np.empty_like(send) if out is None else out
        with communicating(f"MPI Allreduce among processes {list(self.ranks)}"):
            self.comm.Allreduce(send, result, op=self._mpi_op(op))
        return result

    def allreduce_inplace(self, array: np.ndarray, op: str = "sum") -> np.ndarray:
        """Like allreduce, overwriting the contiguous `array` with the result."""
        from .mpi import mpi_module

        with communicating(f"MPI Allreduce among processes {list(self.ranks)}"):
            self.comm.Allreduce(mpi_module().IN_PLACE, array, op=self._mpi_op(op))
        return array

    def allgather(self, array: np.ndarray) -> np.ndarray:
        """Stack every member's equally shaped `array` along a new leading axis."""
        send = np.require(array, requirements="C")
        result = np.empty((self.size,) + send.shape, send.dtype)
        with communicating(f"MPI Allgather among processes {list(self.ranks)}"):
            self.comm.Allgather(send, result)
        return result

    def allgatherv(self, array: np.ndarray, counts: Sequence[int]) -> np.ndarray:
        """Concatenate every member's flat `array` (member i contributes counts[i] elements)."""
        send = np.require(array, requirements="C").reshape(-1)
        result = np.empty(int(sum(counts)), send.dtype)
        with communicating(f"MPI Allgatherv among processes {list(self.ranks)}"):
            self.comm.Allgatherv(send, [result, list(counts)])
        return result

    def broadcast(self, array: np.ndarray, root: int) -> np.ndarray:
        """Every member gets member `root`'s `array` (others pass a buffer of the same shape)."""
        buffer = np.require(array, requirements="C")
        with communicating(f"MPI Bcast among processes {list(self.ranks)}"):
            self.comm.Bcast(buffer, root=root)
        return buffer

    def broadcast_object(self, value: Any, root: int) -> Any:
        with communicating(f"MPI bcast among processes {list(self.ranks)}"):
            return self.comm.bcast(value, root=root)

    def allgather_object(self, value: Any) -> list[Any]:
        with communicating(f"MPI allgather among processes {list(self.ranks)}"):
            return self.comm.allgather(value)

    def barrier(self) -> None:
        with communicating(f"MPI Barrier among processes {list(self.ranks)}"):
            self.comm.Barrier()
