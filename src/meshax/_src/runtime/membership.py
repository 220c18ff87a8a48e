"""Which processes of a job that survives losses (`jax_enable_recoverability`) are live: the coordinator's view.

Every process registers with an incarnation (a random number drawn at its start), so that a process that died
and was started again is told apart from the one that was there before. `arrive` is JAX's live-processes call:
a barrier among the live processes of the ids asked about, answered to each with the same live ones and
their incarnations; a process lost meanwhile is left out and no longer awaited. The answer also names the
processes readmitted since the previous answer, which all of them then join to the data plane (rejoin.py). Used under the coordinator's
lock.
"""
from __future__ import annotations

import time

from .rendezvous import Waiter, answer
from .wire import LineSocket


class Membership:
    """The live processes of a recoverable job and the live-processes barrier among them."""

    def __init__(self) -> None:
        self.incarnations: dict[int, int] = {}  # live process -> its incarnation
        self.lost: set[int] = set()  # processes lost and not back
        self.fresh: set[int] = set()  # processes readmitted, not yet in a live-processes answer
        self._waiting: dict[int, tuple[Waiter, frozenset[int]]] = {}  # process -> its call and the ids it asked

    def joined(self, process_id: int, incarnation: int, again: bool = False) -> None:
        """`process_id` registered; `again`: it was lost and is readmitted (a new incarnation)."""
        self.incarnations[process_id] = incarnation
        self.lost.discard(process_id)
        if again:
            self.fresh.add(process_id)

    def lose(self, process_id: int) -> None:
        """`process_id` died or stopped answering: leave it out of the live ones, and stop awaiting it."""
        self.incarnations.pop(process_id, None)
        self.lost.add(process_id)
        self._waiting.pop(process_id, None)
        self._release_if_complete()

    def arrive(self, conn: LineSocket, process_id: int, rid: int, ids: list[int], timeout: float) -> None:
        """`process_id` calls live-processes about `ids`; answered once every live one of them has."""
        self._waiting[process_id] = (Waiter(conn, rid, time.monotonic() + timeout, process_id), frozenset(ids))
        self._release_if_complete()

    def _release_if_complete(self) -> None:
        if not self._waiting:
            return
        asked = frozenset().union(*(ids for _, ids in self._waiting.values()))
        live = {i: self.incarnations[i] for i in sorted(asked) if i in self.incarnations}
        if not live.keys() <= self._waiting.keys():
            return
        waiting, self._waiting = self._waiting, {}
        fresh = sorted(self.fresh & live.keys())  # every live one joins them to its communicators now
        self.fresh -= set(fresh)
        for waiter, ids in waiting.values():
            answer(waiter, ok=True, live=[[i, n] for i, n in live.items() if i in ids], fresh=fresh)

    def expire(self, now: float) -> None:
        """Answer the live-processes calls past their deadline with an error naming the live ones that never came."""
        if not any(waiter.deadline <= now for waiter, _ in self._waiting.values()):
            return
        asked = frozenset().union(*(ids for _, ids in self._waiting.values()))
        absent = sorted(i for i in asked if i in self.incarnations and i not in self._waiting)
        waiting, self._waiting = self._waiting, {}
        for waiter, _ in waiting.values():
            answer(waiter, error=f"live_devices timed out: live processes {absent} never called it (arrived: "
                                 f"{sorted(waiting)}).", absent=absent)
