"""A job that survives losses (`jax_enable_recoverability`): this process's side.

When the coordinator says a process was lost (its `peer_lost` notice), every communication of this process
that the lost process takes part in is cancelled: the wait for it raises JaxRuntimeError naming the lost
process (progress.py asks `check` between polls), on every survivor, within the heartbeat timeout or at once
when its connection closed. The cancelled MPI request is abandoned, never waited for again, and its buffers
are kept (MPI may still write into them). Communicators among live processes go on working; those that
include a lost process are never used again (mpi.CommunicatorCache forgets them).
"""
from __future__ import annotations

import secrets
import threading
from typing import Any, Callable, Iterable, TypeVar

T = TypeVar("T")

# this process's incarnation: told apart from an earlier process of the same id that died
INCARNATION = secrets.randbits(62)


class JaxRuntimeError(RuntimeError):
    """A failure while running a computation (XLA's runtime errors in JAX): here, a communication cancelled
    because a process taking part in it was lost."""


_lock = threading.Lock()
_lost: dict[int, str] = {}  # lost process -> why, as the coordinator said
_abandoned: list[Any] = []  # cancelled requests and the buffers MPI may still write into


def note_lost(process_id: int, name: str, why: str) -> None:
    """The coordinator said `process_id` (`name`) was lost."""
    with _lock:
        _lost[process_id] = f"{name} {why}"


def note_back(process_id: int) -> None:
    """`process_id` joined again (a new incarnation): communication with it is possible again."""
    with _lock:
        _lost.pop(process_id, None)


def any_lost() -> bool:
    """Whether any process is lost now (no lock: a wait asks between polls)."""
    return bool(_lost)


def lost() -> dict[int, str]:
    """The processes lost and not back, with why."""
    with _lock:
        return dict(_lost)


def check(ranks: Iterable[int] | None, what: str, keep: Any = None) -> None:
    """Raise JaxRuntimeError if a process among `ranks` (None: any) was lost, keeping `keep` (the cancelled
    request and its buffers) alive for good."""
    if not _lost:
        return
    with _lock:
        named = [why for process_id, why in sorted(_lost.items()) if ranks is None or process_id in ranks]
    if not named:
        return
    if keep is not None:
        _abandoned.append(keep)
    raise JaxRuntimeError(f"{what} was cancelled: {'; '.join(named)}. The processes still live go on "
                          "(jax_enable_recoverability); run the next step within live_devices().")


def watched(make: Callable[[], T], ranks: Iterable[int], what: str) -> T:
    """`make()` (a blocking MPI call among `ranks`: creating a communicator, joining a rejoined process), run in a
    thread of its own while this one watches for losses: if a process among `ranks` is lost meanwhile, raise
    JaxRuntimeError and leave the call behind, blocked for good (MPI has no way to cancel it)."""
    ranks = tuple(ranks)
    result: list[Any] = []

    def run() -> None:
        try:
            result.append((True, make()))
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            result.append((False, error))

    worker = threading.Thread(target=run, name=f"meshax-{what}", daemon=True)
    worker.start()
    pause = 1e-4
    while worker.is_alive():
        worker.join(pause)
        pause = min(pause * 2, 5e-3)
        if not result and any_lost():
            check(ranks, what, worker)
    ok, value = result[0]
    if not ok:
        raise value
    return value
