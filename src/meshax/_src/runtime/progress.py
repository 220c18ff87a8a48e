"""Waiting for MPI without burning a core: nonblocking operations polled with a backoff.

MPICH's blocking calls spin in its progress engine, so a process waiting for a slow or
stuck peer uses 100 % of a CPU (which, on a shared machine, the peer may need). Here
every blocking collective of a communicator is its nonblocking twin followed by `wait`:
it polls the request, yielding the CPU, for as long as the operation could plausibly
take (`SPIN_FLOOR` plus its bytes at `SPIN_RATE`; large transfers only advance while
polled), then sleeps between polls with an exponential backoff up to `SLEEP_MAX`. Signal
handlers run between polls, so a process stuck in a collective still stops promptly.
"""
from __future__ import annotations

import os
import pickle
import threading
import time
from typing import Any, Sequence

from . import recovery, watch
from .mpi import mpi_module

SPIN_FLOOR = 20e-3  # seconds of polling before any sleep: waits shorter than this behave as before
SPIN_RATE = 250e6  # bytes per second: a transfer of n bytes is polled for n / SPIN_RATE more
SLEEP_FIRST = 50e-6
SLEEP_MAX = 2e-3
# Set when the coordinator says a process of the job was lost: MPI's progress engine is not entered again (its
# transport may fault, or assert, on the dead peer's connection), and the coordinator's failure notice, which
# names the dead once it has gathered them, ends this process. HALT_WAIT bounds the wait for that notice.
halted = threading.Event()
HALT_WAIT = 10.0


def _poll(test: Any, nbytes: int, keep: Any) -> None:
    """Call `test()` until it returns true: polling first, then sleeping with a backoff. In a job that survives
    losses, a process lost among those of this thread's communication cancels the wait (recovery.py), `keep`
    (the request and its buffers) kept alive."""
    if not halted.is_set() and test():
        return
    clock = time.perf_counter
    spin_until = clock() + SPIN_FLOOR + nbytes / SPIN_RATE
    delay = SLEEP_FIRST
    while halted.is_set() or not test():
        if recovery.any_lost():
            activity = watch.this_thread()
            recovery.check(None if activity is None else activity.ranks,
                           "communication" if activity is None else activity.what, keep)
        if halted.is_set():
            _wait_for_the_failure_notice()
        elif clock() < spin_until:
            os.sched_yield()
        else:
            time.sleep(delay)
            delay = min(SLEEP_MAX, delay * 2)


def _wait_for_the_failure_notice() -> None:
    """Wait (outside MPI) for the coordinator's notice that ends this process; raise if none comes."""
    time.sleep(HALT_WAIT)
    raise RuntimeError(f"a process of the job was lost, and no failure notice came from the coordinator within "
                       f"{HALT_WAIT:g} s; the job cannot go on.")


def wait(request: Any, nbytes: int = 0, keep: Any = None) -> None:
    """Block until the MPI `request` (moving about `nbytes`, through the buffers `keep`) completes, without
    spinning for long."""
    _poll(request.Test, nbytes, (request, keep))


def wait_all(requests: Sequence[Any], nbytes: int = 0, keep: Any = None) -> None:
    """Block until every request completes (see `wait`)."""
    if requests:
        Request = mpi_module().Request
        _poll(lambda: Request.Testall(requests), nbytes, (requests, keep))


def _nbytes(buffer: Any) -> int:
    if isinstance(buffer, (list, tuple)):
        buffer = buffer[0] if buffer else None
    return int(getattr(buffer, "nbytes", 0))


_patient_class: Any = None


def patient(comm: Any) -> Any:
    """`comm` (same MPI handle) with collectives that wait as `wait` does; already-patient ones pass through."""
    global _patient_class
    if _patient_class is None:
        _patient_class = _make_patient_class()
    return comm if isinstance(comm, _patient_class) else _patient_class(comm)


def _make_patient_class() -> type:
    import numpy as np  # only once a job communicates: joining one does not need NumPy

    MPI = mpi_module()

    class PatientComm(MPI.Intracomm):
        """An Intracomm whose blocking collectives are nonblocking ones waited for with a backoff."""

        def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM) -> None:
            wait(self.Iallreduce(sendbuf, recvbuf, op), _nbytes(recvbuf), (sendbuf, recvbuf))

        def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
            wait(self.Iallgather(sendbuf, recvbuf), _nbytes(recvbuf), (sendbuf, recvbuf))

        def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
            wait(self.Iallgatherv(sendbuf, recvbuf), _nbytes(recvbuf), (sendbuf, recvbuf))

        def Bcast(self, buf: Any, root: int = 0) -> None:
            wait(self.Ibcast(buf, root), _nbytes(buf), buf)

        def Barrier(self) -> None:
            wait(self.Ibarrier())

        def bcast(self, obj: Any, root: int = 0) -> Any:
            data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL) if self.Get_rank() == root else b""
            size = np.array([len(data)], np.int64)
            self.Bcast(size, root)
            payload = np.frombuffer(data, np.uint8).copy() if data else np.empty(int(size[0]), np.uint8)
            self.Bcast(payload, root)
            return obj if self.Get_rank() == root else pickle.loads(payload.tobytes())

        def allgather(self, sendobj: Any) -> list[Any]:
            data = np.frombuffer(pickle.dumps(sendobj, pickle.HIGHEST_PROTOCOL), np.uint8)
            sizes = np.empty(self.Get_size(), np.int64)
            self.Allgather(np.array([data.size], np.int64), sizes)
            counts = [int(s) for s in sizes]
            gathered = np.empty(sum(counts), np.uint8)
            self.Allgatherv(data, [gathered, counts])
            bounds = np.concatenate([[0], np.cumsum(counts)])
            return [pickle.loads(gathered[a:b].tobytes()) for a, b in zip(bounds[:-1], bounds[1:])]

    return PatientComm
