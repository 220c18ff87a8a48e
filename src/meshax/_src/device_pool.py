"""Runs heavy per-device kernels of one process side by side, one BLAS thread each.

A process with K logical devices computes K shards of a matmul. Run one after the other, each
call uses every core through BLAS threads, but small shards scale poorly across threads; run
side by side on a pool with BLAS held to one thread per call, the cores stay busy on independent
work. When several controllers share a machine, each gets its share of the cores, so that they
do not oversubscribe them. The pool and the thread-limit controller are created on first use,
so importing meshax starts no threads.
"""

from __future__ import annotations

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


def run_each(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """The results of `calls`; with several calls, BLAS is held to one thread each and they run side
    by side on this controller's share of the cores (one after the other when that share is one core)."""
    if len(calls) < 2:
        return [call() for call in calls]
    global _controller
    with _lock:  # one batch at a time: the BLAS thread limit is process-wide
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
        with _controller.limit(limits=1, user_api="blas"):
            if workers() < 2:
                return [call() for call in calls]
            futures = [_executor().submit(call) for call in calls]
            return [future.result() for future in futures]


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="meshax-device")
    return _pool
