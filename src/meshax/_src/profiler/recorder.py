"""The events of the trace being recorded, if one is: what ran, on which track, from when to when.

Every hook reads `on` first and does nothing more when it is False, so code not being traced pays one boolean check.
A track is a device id (its work, one track per device), HOST (work done once for the whole process: an operation
as a whole, a call over all of its devices' blocks joined, compilation, user annotations) or COLLECTIVES (MPI calls
and their waits). An event made inside `timed` lands on the track(s) of the call it is part of.
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

HOST = -1  # the process's own track
COLLECTIVES = -2  # the process's MPI calls

on = False  # whether a trace is being recorded

# one event: (name, category, tracks, begin ns, end ns, arguments or None); begin and end on perf_counter_ns's clock
Event = tuple[str, str, tuple[int, ...], int, int, "dict[str, Any] | None"]


@dataclass
class Recording:
    """A finished trace: its events and its window, with the offset from perf_counter_ns to the Unix epoch (ns)."""

    events: list[Event] = field(default_factory=list)
    begin: int = 0
    end: int = 0
    epoch_offset: int = 0


_recording = Recording()
_lock = threading.Lock()
_watchers: list[Callable[[bool], None]] = []  # told when recording starts (True) and stops (False)


def watch(callback: Callable[[bool], None]) -> None:
    """Call `callback(on)` whenever recording starts or stops (a higher layer swapping in its recording variant)."""
    _watchers.append(callback)


class _Tracks(threading.local):
    """Per thread: the tracks of the call being timed (`timed`), which events made inside it belong to."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, ...]] = [(HOST,)]


_tracks = _Tracks()


def now() -> int:
    """The recorder's clock, in nanoseconds."""
    return time.perf_counter_ns()


def start() -> None:
    """Begin recording a trace; RuntimeError if one is being recorded already."""
    global on, _recording
    with _lock:
        if on:
            raise RuntimeError("Profile has already been started. Only one profile may be run at a time.")
        begin = now()
        _recording = Recording([], begin, begin, time.time_ns() - begin)
        on = True
    for callback in _watchers:
        callback(True)


def stop() -> Recording:
    """End the trace being recorded and return it; RuntimeError if none is."""
    global on
    with _lock:
        if not on:
            raise RuntimeError("No profile started")
        on = False
        _recording.end = now()
        recording = _recording
    for callback in _watchers:
        callback(False)
    return recording


def window(begin: int) -> Recording:
    """The events of the trace being recorded that began at `begin` or later, as a recording ending now (which goes
    on); RuntimeError if none is being recorded."""
    if not on:
        raise RuntimeError("No profile started")
    end = now()
    events = [e for e in list(_recording.events) if e[3] >= begin and e[4] <= end]
    return Recording(events, begin, end, _recording.epoch_offset)


def add(name: str, category: str, tracks: Sequence[int] | None, begin: int, end: int,
        args: dict[str, Any] | None = None) -> None:
    """Record an event of `category` from `begin` to `end` (recorder clock) on `tracks` (None: the current thread's)."""
    if on:
        _recording.events.append((name, category, tuple(tracks) if tracks is not None else _tracks.stack[-1],
                                  begin, end, args))


@contextlib.contextmanager
def span(name: str, category: str, tracks: Sequence[int] | None = None,
         args: dict[str, Any] | None = None) -> Iterator[None]:
    """Record the time the block takes as one event (see `add`)."""
    begin = now()
    try:
        yield
    finally:
        add(name, category, tracks, begin, now(), args)


def timed(call: Callable[[], Any], name: str, category: str, tracks: Sequence[int],
          args: dict[str, Any] | None = None) -> Callable[[], Any]:
    """`call`, recording each run as an event on `tracks`; events recorded during it land on those tracks too."""
    tracks = tuple(tracks)

    def run() -> Any:
        _tracks.stack.append(tracks)
        begin = now()
        try:
            return call()
        finally:
            add(name, category, tracks, begin, now(), args)
            _tracks.stack.pop()

    return run
