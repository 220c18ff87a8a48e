"""What this process is doing: the communication it is blocked in (if any) and where it came from.

Every cross-process communication runs inside `communicating(...)`, which records, for the
thread that runs it, the operation, a sequence number and the user's source line. The
watchdog (client.py) reads the main thread's to notice a wait that lasts too long; state
reports sent to the coordinator quote it (or, outside communication, the line the main
thread is running) and name those of other threads (an asynchronous save).
"""
from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from typing import Any, Callable, Iterable

from . import recovery
from .history import calls, channel_name, history, recent, sequences, site_key

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_THREADING = os.path.dirname(os.path.abspath(threading.__file__))


class Activity:
    """A communication in progress; where it was called from is worked out only when asked. Operations among
    a process set also carry that set's key, sequence number and history hash (history.py), and the side
    channel they run in (None: the main one)."""

    __slots__ = ("sequence", "what", "frame", "started", "group", "group_sequence", "chain", "channel", "thread",
                 "ranks")

    def __init__(self, sequence: int, what: str, frame, started: float) -> None:
        self.sequence = sequence
        self.what = what
        self.frame = frame
        self.started = started
        self.group: str | None = None
        self.group_sequence = 0
        self.chain = 0
        self.channel: str | None = None
        self.thread = 0  # the ident of the thread in it
        self.ranks: tuple[int, ...] | None = None  # the processes taking part (None: not known)

    @property
    def site(self) -> str:
        return "the end of the program" if self.frame is None else _frame_site(self.frame)

    def describe(self, now: float | None = None) -> str:
        waited = (now or time.monotonic()) - self.started
        return f"in {self.what} (communication #{self.sequence}) called at {self.site}, waiting for {waited:.0f} s"


_sequence = itertools.count(1)
_current: dict[int, Activity] = {}  # thread ident -> the communication that thread is in
_main_thread_id = threading.main_thread().ident
_get_ident = threading.get_ident


def _frame_site(frame) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


_internal_files: dict[str, bool] = {}  # source file -> whether it is meshax's or the threading module's


def _user_frame(frame):
    """The innermost frame from `frame` outward that is outside meshax and the threading module. This runs on
    every communication, through some twenty frames: files are looked up by name (hashing a code object would
    cost ten times more)."""
    internal = _internal_files
    while frame is not None:
        name = frame.f_code.co_filename
        inside = internal.get(name)
        if inside is None:
            inside = internal[name] = name.startswith((_PACKAGE, _THREADING))
        if not inside:
            return frame
        frame = frame.f_back
    return None


def user_site_key() -> str:
    """The caller's user call site as histories record it (history.site_key)."""
    return site_key(_user_frame(sys._getframe(1)))


def user_site(frame=None) -> str:
    """Where the user's code is: file:line of the innermost frame outside meshax."""
    found = _user_frame(frame or sys._getframe(1))
    return "the end of the program" if found is None else _frame_site(found)


class communicating:
    """Context manager marking this thread as blocked in communication `what` until the block ends. With
    `ranks`, it is an operation every one of those processes takes part in: `entry` (or `what`) and the user's
    call site advance their history in this thread's channel."""

    __slots__ = ("activity", "previous")

    def __init__(self, what: str, ranks: Iterable[int] | None = None, entry: str | None = None) -> None:
        frame = _user_frame(sys._getframe(1))
        self.activity = activity = Activity(next(_sequence), what, frame, time.monotonic())
        if ranks is not None:
            activity.ranks = ranks = tuple(ranks)
            record = history(ranks)
            record.advance(f"{entry or what}|{site_key(frame)}")
            activity.group, activity.group_sequence, activity.chain = record.key, record.sequence, record.chain
            activity.channel = record.channel
        else:
            activity.channel = channel_name()

    def __enter__(self) -> Activity:
        activity = self.activity
        activity.thread = thread = _get_ident()
        self.previous = _current.get(thread)
        _current[thread] = activity
        return activity

    def __exit__(self, *exc: object) -> None:
        if self.previous is None:
            _current.pop(self.activity.thread, None)
        else:
            _current[self.activity.thread] = self.previous


def this_thread() -> Activity | None:
    """The communication the calling thread is in, if any."""
    return _current.get(_get_ident())


def current() -> Activity | None:
    """The communication the watchdog watches and the coordinator's survey compares with the other processes':
    the main thread's, or the longest waiting main-channel one of another thread. A side channel's waits (an
    async save's barriers) are bounded by their own timeouts and only named in the state's text: they keep
    histories of their own, and may rightly outlast the collective timeout while training goes on."""
    main = _current.get(_main_thread_id)
    if main is not None and main.channel is None:
        return main
    found = [a for a in list(_current.values()) if a.channel is None]
    return min(found, key=lambda a: a.started) if found else None


def state(now: float | None = None) -> dict[str, Any]:
    """What this process is doing, for the coordinator's survey of a stalled communication."""
    activity, now = current(), now or time.monotonic()
    found: dict[str, Any] = {"text": describe_process(now), "sequences": sequences()}
    if activity is not None and activity.group is not None and calls(activity.group):
        found["text"] += f" (after {calls(activity.group)} jit calls on these processes)"
    if activity is not None:
        found.update(waiting=now - activity.started, what=activity.what, site=activity.site,
                     group=activity.group, sequence=activity.group_sequence, chain=activity.chain)
        if activity.group is not None:
            found["recent"] = recent(activity.group)
    return found


class DesyncError(RuntimeError):
    """Processes reached different communications: the same program diverged between processes."""


# Set by distributed.initialize: reports a desync this process found in-band to the coordinator, which
# tells every process (and returns only if it could not).
report_desync: Callable[[str], None] | None = None


# seconds a process whose MPI call failed waits for the coordinator's word before it reports a disagreement: a
# peer's death breaks the transport before its connection to the coordinator is seen closed (the notice naming
# it then ends this process)
PEER_DEATH_WAIT = 3.0


def transport_failed(activity: Activity, ranks: Iterable[int], detail: str) -> None:
    """An MPI call of `activity` failed: most often because a peer died. In a job, wait PEER_DEATH_WAIT for the
    coordinator to name the dead (its notice ends the process, or, in a job that survives losses, the
    communication raises JaxRuntimeError naming them); else fail as the members' disagreement."""
    if report_desync is not None:
        deadline = time.monotonic() + PEER_DEATH_WAIT
        while time.monotonic() < deadline:
            recovery.check(activity.ranks, activity.what)
            time.sleep(0.02)
    desync(activity, ranks, detail)


def desync(activity: Activity, ranks: Iterable[int], detail: str) -> None:
    """Fail the job because this process found, in `activity`, that processes `ranks` disagree: the coordinator
    names every process's operation; if that does not happen, raise DesyncError here."""
    if report_desync is not None:
        report_desync(detail)
    raise DesyncError(
        f"processes {list(ranks)} disagree on communication #{activity.group_sequence} among them (they must run "
        f"the same operations in the same order): this process is {activity.describe()}; {detail}."
    )


def describe_process(now: float | None = None) -> str:
    """One line: the communication this process's main thread waits in, or the line it is running, and what
    other threads that communicate wait in."""
    activities = dict(_current)
    main = activities.pop(_main_thread_id, None)
    if main is not None:
        text = main.describe(now)
    else:
        frame = sys._current_frames().get(_main_thread_id)
        if frame is None:
            text = "its main thread has ended"
        else:
            running, caller = _frame_site(frame), user_site(frame)
            text = f"not in a communication; running {running}" + (
                "" if caller == running else f" (called from {caller})")
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, activity in sorted(activities.items(), key=lambda item: item[1].started):
        text += f"; its thread {names.get(ident, ident)!r} is {activity.describe(now)}"
    return text
