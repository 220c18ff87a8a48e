"""Side channels: communication of background threads, apart from the main thread's.

A thread that communicates while the main thread goes on (an asynchronous checkpoint save,
a prefetching loader) interleaves its operations with the main thread's in a different
order on each process. Mixed into one history (history.py) or one MPI communicator, that
order would look like a desync, or mismatch messages. A Channel gives such a thread its
own histories and, if it uses MPI, its own communicators (duplicated from the world when
the channel opens), so that only operations every process issues in the same order ever
share a history or a communicator:

    channel = Channel("checkpoint-save")        # histories only: the thread uses coordinator barriers
    channel = side_channel("prefetch")          # distributed.py, with MPI communicators: open it on the
                                                # main thread of every process, in program order
    ...in the thread: with channel.active(): ...  # its communication stays in the channel
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from . import history, watch
from .mpi import CommunicatorCache
from .progress import wait_all

_lock = threading.Lock()
_open: dict[str, "Channel"] = {}
_active: dict[int, "Channel"] = {}  # thread ident -> the channel it runs in


class Channel:
    """The histories, communicators and process groups of one side channel. Without `world` it has histories
    only (its thread may use the coordinator's barriers, not MPI); with `world`, MPI communicators duplicated
    from it (collective: create it where every process creates it, in program order)."""

    def __init__(self, name: str, world: Any = None) -> None:
        self.name = name
        self.histories: history.Table = {}
        self.groups: dict[tuple[int, ...], Any] = {}  # ProcessGroups over this channel's communicators
        self.communicators: CommunicatorCache | None = None
        self.p2p = None
        if world is not None:
            with watch.communicating(f"opening the side channel {name!r} (duplicating MPI_COMM_WORLD)"):
                (base, first), (p2p, second) = world.Idup(), world.Idup()
                wait_all([first, second])
            self.communicators = CommunicatorCache(base)
            self.p2p = p2p

    @contextlib.contextmanager
    def active(self) -> Iterator["Channel"]:
        """Run the block's communication (in this thread) in this channel; one thread at a time, since its
        operations must come in the same order on every process."""
        ident = threading.get_ident()
        with _lock:
            if ident in _active:
                raise RuntimeError(f"this thread already runs in the side channel {_active[ident].name!r}.")
            if self in _active.values():
                raise RuntimeError(f"another thread runs in the side channel {self.name!r}; its operations would "
                                   "interleave differently on each process (open one channel per thread).")
            _active[ident] = self
        history.enter_channel(self.histories, self.name)
        try:
            yield self
        finally:
            history.leave_channel()
            with _lock:
                del _active[ident]


def open_channel(name: str, world: Any) -> Channel:
    """The side channel `name` with MPI communicators, created the first time with communicators duplicated
    from `world` (None: a job of one process). Call it where the program issues its collectives (the main
    thread) on every process, in the same order as their other operations: duplicating is collective."""
    with _lock:
        channel = _open.get(name)
        if channel is None:
            channel = _open[name] = Channel(name, world)
        return channel


def current() -> Channel | None:
    """The side channel this thread runs in, or None (the main channel)."""
    return _active.get(threading.get_ident()) if _active else None
