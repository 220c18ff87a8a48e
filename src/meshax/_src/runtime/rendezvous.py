"""The coordinator's meeting points: a key-value store whose gets may wait, and named barriers with deadlines.

Both are used under the coordinator's lock (coordinator.py calls every method holding it). A barrier waits for
its participants (every process by default) less those the job has lost when it survives losses
(membership.py): it completes when the last live one arrives, or when a loss leaves none missing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable

from .wire import LineSocket


@dataclass
class Waiter:
    """A request answered later: a barrier arrival, a key-value get or a live-processes call."""

    conn: LineSocket
    rid: int
    deadline: float
    process_id: int


class Rendezvous:
    """The key-value store and the barriers of a job of `num_processes` processes."""

    def __init__(self, num_processes: int) -> None:
        self.num_processes = num_processes
        self._barriers: dict[str, tuple[set[int], dict[int, Waiter]]] = {}
        self._kv: dict[str, str] = {}
        self._kv_waiters: dict[str, list[Waiter]] = {}

    def kv_set(self, key: str, value: str) -> None:
        self._kv[key] = value
        for waiter in self._kv_waiters.pop(key, []):
            waiter.conn.write_message({"rid": waiter.rid, "ok": True, "value": value})

    def kv_get(self, conn: LineSocket, process_id: int, rid: int, key: str, timeout: float) -> None:
        """Answer now if `key` is set (or `timeout` <= 0: None), else when it is set or the timeout passes."""
        if key in self._kv:
            conn.write_message({"rid": rid, "ok": True, "value": self._kv[key]})
        elif timeout <= 0:
            conn.write_message({"rid": rid, "ok": True, "value": None})
        else:
            self._kv_waiters.setdefault(key, []).append(Waiter(conn, rid, time.monotonic() + timeout, process_id))

    def barrier(self, conn: LineSocket, process_id: int, rid: int, name: str, participants: list[int] | None,
                timeout: float, lost: Iterable[int] = ()) -> None:
        """Process `process_id` arrives at barrier `name` of `participants` (None: every process)."""
        expected = set(range(self.num_processes)) if participants is None else set(participants)
        expected, arrived = self._barriers.setdefault(name, (expected, {}))
        arrived[process_id] = Waiter(conn, rid, time.monotonic() + timeout, process_id)
        self._release_if_complete(name, set(lost))

    def lost(self, lost: Iterable[int]) -> None:
        """The job lost processes and goes on: barriers that waited only for them complete."""
        lost = set(lost)
        for name in list(self._barriers):
            self._release_if_complete(name, lost)

    def _release_if_complete(self, name: str, lost: set[int]) -> None:
        expected, arrived = self._barriers[name]
        if expected - lost <= arrived.keys():
            del self._barriers[name]
            for waiter in arrived.values():
                waiter.conn.write_message({"rid": waiter.rid, "ok": True})

    def expire(self, now: float) -> None:
        """Answer the barriers and gets whose deadline passed with an error naming who never came."""
        for name, (expected, arrived) in list(self._barriers.items()):
            if not any(w.deadline <= now for w in arrived.values()):
                continue
            del self._barriers[name]
            absent = sorted(expected - arrived.keys())
            message = f"barrier {name!r} timed out: processes {absent} never arrived (arrived: {sorted(arrived)})."
            for waiter in arrived.values():
                waiter.conn.write_message({"rid": waiter.rid, "error": message, "absent": absent})
        for key, waiters in list(self._kv_waiters.items()):
            for waiter in [w for w in waiters if w.deadline <= now]:
                waiter.conn.write_message({"rid": waiter.rid, "error": f"key {key!r} was not set before the deadline."})
                waiters.remove(waiter)
            if not waiters:
                del self._kv_waiters[key]


def answer(waiter: Waiter, **fields: Any) -> None:
    """Send `waiter` its answer."""
    waiter.conn.write_message({"rid": waiter.rid, **fields})
