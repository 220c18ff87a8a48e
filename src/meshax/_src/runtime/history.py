"""The call history of each set of processes, for desync detection.

Every cross-process operation among a set of processes (collectives, reshards, barriers,
jit calls on arrays spanning them, multihost_utils) advances that set's History: a
sequence number and a running CRC of what was called (operation, shapes, dtypes and the
user's file:line). Processes that ran the same program hold equal histories, so
comparing two numbers tells whether they reached the same point the same way.
"""
from __future__ import annotations

import os
import zlib
from typing import Any, Iterable


class History:
    """The sequence number and running hash of one process set's cross-process operations."""

    __slots__ = ("ranks", "key", "sequence", "chain", "calls")

    def __init__(self, ranks: tuple[int, ...]) -> None:
        self.ranks = ranks
        self.key = ",".join(map(str, ranks))
        self.sequence = 0
        self.chain = 0
        self.calls = 0  # calls noted (jit calls)

    def advance(self, entry: str) -> None:
        """Record one operation that every member takes part in."""
        self.sequence += 1
        self.chain = zlib.crc32(entry.encode(), self.chain)

    def note(self, entry: str) -> None:
        """Record a call every member makes without communicating (e.g. a jit call): it changes the hash only."""
        self.calls += 1
        self.chain = zlib.crc32(entry.encode(), self.chain)


_histories: dict[tuple[int, ...], History] = {}


def history(ranks: Iterable[int]) -> History:
    """The History of the processes `ranks` (the same tuple on every member)."""
    key = tuple(ranks)
    found = _histories.get(key)
    if found is None:
        found = _histories[key] = History(key)
    return found


def calls(key: str) -> int:
    """How many calls were noted in the history of process set `key`."""
    return next((h.calls for h in _histories.values() if h.key == key), 0)


def sequences() -> dict[str, int]:
    """How many operations this process has run in each of its process sets."""
    return {h.key: h.sequence for h in _histories.values()}


_basenames: dict[str, str] = {}


def site_key(frame: Any) -> str:
    """The user's call site as hashed: file name (not its directory, which may differ between hosts) and line."""
    if frame is None:
        return "end"
    code = frame.f_code
    path = code.co_filename
    name = _basenames.get(path)
    if name is None:
        name = _basenames[path] = os.path.basename(path)
    return f"{name}:{frame.f_lineno}:{code.co_name}"


def reset() -> None:
    """Forget all histories (a new job starts counting from zero)."""
    _histories.clear()
