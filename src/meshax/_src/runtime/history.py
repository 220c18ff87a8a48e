"""The call history of each set of processes, for desync detection.

Every cross-process operation among a set of processes that all of them must issue in the
same order (collectives, reshards, barriers, jit calls on arrays spanning them, placements
on shardings spanning them, multihost_utils) advances that set's History: a sequence
number and a running CRC of what was called (operation, shapes, dtypes, shardings and the
user's file:line). Processes that ran the same program hold equal histories, so comparing
two numbers tells whether they reached the same point the same way.

Histories belong to a channel: the main one, or a side channel (channels.py) that a
background thread (an asynchronous checkpoint save) runs in with its own communicators.
Operations of different threads interleave differently on each process, so each thread's
channel keeps its own histories and never changes another's.
"""
from __future__ import annotations

import collections
import os
import threading
import zlib
from typing import Any, Iterable

RECENT = 6  # entries each history remembers, to name the first difference when processes disagree


class History:
    """The sequence number and running hash of one process set's cross-process operations in one channel."""

    __slots__ = ("ranks", "key", "channel", "sequence", "chain", "calls", "recent")

    def __init__(self, ranks: tuple[int, ...], channel: str | None = None) -> None:
        self.ranks = ranks
        self.key = ",".join(map(str, ranks))
        self.channel = channel  # None: the main channel
        self.sequence = 0
        self.chain = 0
        self.calls = 0  # jit calls noted
        self.recent: collections.deque[str] = collections.deque(maxlen=RECENT)

    def advance(self, entry: str) -> None:
        """Record one operation that every member takes part in."""
        self.sequence += 1
        self.chain = zlib.crc32(entry.encode(), self.chain)
        self.recent.append(entry)

    def note(self, entry: str, jit_call: bool = True) -> None:
        """Record a call every member makes without communicating (a jit call, or a placement): it changes the
        hash only."""
        self.calls += jit_call
        self.chain = zlib.crc32(entry.encode(), self.chain)
        self.recent.append(entry)


Table = dict[tuple[int, ...], History]
_main: Table = {}
_by_thread: dict[int, tuple[Table, str]] = {}  # threads running in a side channel: its histories and name
_get_ident = threading.get_ident
_main_ident = threading.main_thread().ident


def history(ranks: Iterable[int]) -> History:
    """The History of the processes `ranks` (the same tuple on every member) in this thread's channel."""
    key = tuple(ranks)
    side = _by_thread.get(_get_ident()) if _by_thread else None
    table = _main if side is None else side[0]
    found = table.get(key)
    if found is None:
        found = table[key] = History(key, None if side is None else side[1])
    return found


def ordered() -> bool:
    """Whether this thread's calls come in program order on every process: the main thread's and a side
    channel's do; a user's own thread (a prefetching loader) interleaves with the main thread differently on each
    process, so its calls that need no communication (placements, jit calls) enter no history."""
    ident = _get_ident()
    return ident == _main_ident or ident in _by_thread


def note(ranks: Iterable[int], entry: str, jit_call: bool = True) -> None:
    """Record, in this thread's channel, a call that every process of `ranks` makes in the same order without
    communicating (a jit call or a placement on arrays spanning them): the next communication among them
    compares it. Calls of threads outside the program order (`ordered`) are not recorded."""
    if ordered():
        history(ranks).note(entry, jit_call)


def channel_name() -> str | None:
    """The side channel this thread runs in, or None (the main channel)."""
    side = _by_thread.get(_get_ident()) if _by_thread else None
    return None if side is None else side[1]


def enter_channel(table: Table, name: str) -> None:
    """From now on this thread records its operations in `table` (side channel `name`), not the main histories."""
    _by_thread[_get_ident()] = (table, name)


def leave_channel() -> None:
    """This thread records in the main histories again."""
    _by_thread.pop(_get_ident(), None)


def calls(key: str) -> int:
    """How many calls were noted in the main history of process set `key`."""
    return next((h.calls for h in _main.values() if h.key == key), 0)


def sequences() -> dict[str, int]:
    """How many operations this process has run in each of its process sets (main channel)."""
    return {h.key: h.sequence for h in _main.values()}


def recent(key: str) -> list[str]:
    """The last operations recorded in the main history of process set `key`, oldest first."""
    return next((list(h.recent) for h in _main.values() if h.key == key), [])


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
    _main.clear()
