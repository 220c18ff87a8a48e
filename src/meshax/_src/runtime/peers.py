"""Point-to-point exchanges (reshards, ppermute) as checked steps of the participants' history.

Every participant enters the exchange, which advances their history (history.py). When
checking is on, the first message from one process to another carries the sender's
history hash, ahead of the data on the same tag (MPI keeps their order), and the receiver
compares it with its own: a receiver that is in another step than its sender fails the
job instead of taking the bytes of an unrelated message.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..config import config
from ..profiler import recorder
from . import recovery, watch
from .progress import wait_all


class Exchange:
    """Context manager: post sends and receives inside; at exit the receivers first check their senders'
    headers, then take the data (so a mismatched message never meets a buffer of the wrong size)."""

    def __init__(self, comm: Any, tag: int, what: str, ranks: Iterable[int], entry: str,
                 rank_of: dict[int, int] | None = None) -> None:
        """An exchange among processes `ranks` over `comm`, whose rank of process p is rank_of[p] (None: p)."""
        self.comm, self.tag, self.what = comm, tag, what
        self.ranks = tuple(ranks)
        self._rank_of = rank_of
        self._step = watch.communicating(what, self.ranks, entry)
        self._checking = config.read("meshax_check")
        self._sends: list[Any] = []
        self._receives: list[tuple[np.ndarray, int]] = []
        self._headers: dict[int, tuple[np.ndarray, Any]] = {}
        self._headed: set[int] = set()
        self._keep: list[np.ndarray] = []

    def __enter__(self) -> "Exchange":
        recovery.check(self.ranks, self.what)
        self._begin = recorder.now() if recorder.on else 0
        self.activity = self._step.__enter__()
        self._mine = np.array([self.activity.chain, self.activity.group_sequence], np.int64)
        return self

    def send(self, data: np.ndarray, dest: int) -> None:
        dest = dest if self._rank_of is None else self._rank_of[dest]
        if self._checking and dest not in self._headed:
            self._headed.add(dest)
            self._sends.append(self.comm.Isend(self._mine, dest=dest, tag=self.tag))
        self._keep.append(data)
        self._sends.append(self.comm.Isend(_raw(data), dest=dest, tag=self.tag))

    def receive(self, buffer: np.ndarray, source: int) -> None:
        source = source if self._rank_of is None else self._rank_of[source]
        if self._checking and source not in self._headers:
            header = np.zeros(2, np.int64)
            self._headers[source] = (header, self.comm.Irecv(header, source=source, tag=self.tag))
        self._receives.append((buffer, source))

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        try:
            if kind is None:
                self._finish()
        finally:
            self._step.__exit__(kind, error, traceback)

    def _finish(self) -> None:
        if self._headers:
            wait_all([request for _, request in self._headers.values()], keep=self._headers)
            strangers = sorted(source for source, (header, _) in self._headers.items()
                               if not np.array_equal(header, self._mine))
            if strangers:
                watch.desync(self.activity, self.ranks,
                             f"the messages from processes {strangers} belong to another step of their history")
        receives = [self.comm.Irecv(_raw(buffer), source=source, tag=self.tag) for buffer, source in self._receives]
        moved = sum(data.nbytes for data in self._keep) + sum(buffer.nbytes for buffer, _ in self._receives)
        waiting = recorder.now() if self._begin else 0
        wait_all(self._sends + receives, moved, (self._keep, self._receives, self._mine))
        if waiting:  # the exchange, and the time blocked in it, as events of the process's MPI track
            args = {"bytes": moved, "processes": list(self.ranks)}
            waited = recorder.now()
            recorder.add("wait", "wait", (recorder.COLLECTIVES,), waiting, waited, args)
            recorder.add(f"MPI point-to-point: {self.what}", "collective", (recorder.COLLECTIVES,), self._begin,
                         max(recorder.now(), waited + 1), args)


def _raw(array: np.ndarray) -> np.ndarray:
    """The (contiguous) array's bytes: point-to-point messages need no MPI datatype, and MPI has none for
    bfloat16, float8, ... (ml_dtypes)."""
    return array.reshape(-1).view(np.uint8)
