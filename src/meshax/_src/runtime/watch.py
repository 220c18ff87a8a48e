"""What this process is doing: the communication it is blocked in (if any) and where it came from.

Every cross-process communication runs inside `communicating(...)`, which records the
operation, a sequence number and the user's source line. The watchdog (client.py)
reads it to notice a wait that lasts too long, and state reports sent to the
coordinator quote it, or, outside communication, the line the main thread is running.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Iterator

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_THREADING = os.path.dirname(os.path.abspath(threading.__file__))


@dataclass(frozen=True)
class Activity:
    """A communication in progress."""

    sequence: int
    what: str
    site: str
    started: float

    def describe(self, now: float | None = None) -> str:
        waited = (now or time.monotonic()) - self.started
        return f"in {self.what} (communication #{self.sequence}) called at {self.site}, waiting for {waited:.0f} s"


_sequence = itertools.count(1)
_current: Activity | None = None
_main_thread_id = threading.main_thread().ident


def _frame_site(frame) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


def user_site(frame=None) -> str:
    """The innermost stack frame outside meshax (and outside the standard library's threading)."""
    frame = frame or sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE) and not filename.startswith(_THREADING):
            return _frame_site(frame)
        frame = frame.f_back
    return "the end of the program"


@contextlib.contextmanager
def communicating(what: str) -> Iterator[Activity]:
    """Mark the current thread as blocked in communication `what` until the block ends."""
    global _current
    activity = Activity(next(_sequence), what, user_site(sys._getframe(2)), time.monotonic())
    previous, _current = _current, activity
    try:
        yield activity
    finally:
        _current = previous


def current() -> Activity | None:
    return _current


def describe_process(now: float | None = None) -> str:
    """One line: the communication this process waits in, or the line its main thread is running."""
    activity = _current
    if activity is not None:
        return activity.describe(now)
    frame = sys._current_frames().get(_main_thread_id)
    if frame is None:
        return "its main thread has ended"
    running, caller = _frame_site(frame), user_site(frame)
    return f"not in a communication; running {running}" + ("" if caller == running else f" (called from {caller})")
