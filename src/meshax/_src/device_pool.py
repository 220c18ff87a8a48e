"""Runs heavy per-device kernels of one process side by side, one BLAS thread each.

A process with K logical devices computes K shards of a matmul. Run one after the other, each
call uses every core through BLAS threads, but small shards scale poorly across threads; run
side by side on a pool with BLAS held to one thread per call, the cores stay busy on independent
work. When several controllers share a machine, each gets its share of the cores, so that they
do not oversubscribe them. The pool and the thread-limit controller are created on first use,
so importing meshax starts no threads.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_controller: Any = None
_controllers_here = 1  # controllers on this machine, this one included


def share_machine(controllers: int) -> None:
    """Record how many controllers (this one included) run on this machine and share its cores."""
    global _controllers_here
    _controllers_here = max(1, controllers)


def workers() -> int:
    """How many kernels run at once: this controller's share of the cores it may use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        cores = os.cpu_count() or 1
    return max(1, cores // _controllers_here)


def run_each(calls: Sequence[Callable[[], Any]], *, blas: bool = True) -> list[Any]:
    """The results of `calls`, run side by side on this controller's share of the cores (one after the
    other when that share is one core), this thread taking its turn with the pool's. With `blas` (calls
    that use BLAS), BLAS is held to one thread per call meanwhile."""
    if len(calls) < 2:
        return [call() for call in calls]
    global _controller
    with _lock:  # one batch at a time: the pool is sized for it, and the BLAS thread limit is process-wide
        if not blas:
            return _side_by_side(calls)
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        with _controller.limit(limits=1, user_api="blas"):
            return _side_by_side(calls)


def _side_by_side(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Each of `workers()` threads (this one included) takes the next call not yet taken until none is left."""
    results: list[Any] = [None] * len(calls)
    taken = itertools.count()  # next() on a count is atomic under the GIL

    def drain() -> None:
        while (index := next(taken)) < len(calls):
            results[index] = calls[index]()

    helpers = [_executor().submit(drain) for _ in range(min(workers(), len(calls)) - 1)]
    try:
        drain()
    finally:
        for helper in helpers:
            helper.result()
    return results


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(1, workers() - 1), thread_name_prefix="meshax-device")
    return _pool
