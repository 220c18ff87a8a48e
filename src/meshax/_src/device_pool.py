"""Runs heavy per-device kernels of one process side by side, one BLAS thread each.

A process with K logical devices computes K shards of a matmul. Run one after the other, each
call uses every core through BLAS threads, but small shards scale poorly across threads; run
side by side on a pool with BLAS held to one thread per call, the cores stay busy on independent
work. The pool and the thread-limit controller are created on first use, so importing meshax
starts no threads.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_controller: Any = None


def workers() -> int:
    """How many kernels run at once: the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


def run_each(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """The results of `calls`, run side by side when there are several calls and several cores."""
    if len(calls) < 2 or workers() < 2:
        return [call() for call in calls]
    global _pool, _controller
    with _lock:  # one batch at a time: the BLAS thread limit is process-wide
        if _pool is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
            _pool = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="meshax-device")
        with _controller.limit(limits=1, user_api="blas"):
            futures = [_pool.submit(call) for call in calls]
            return [future.result() for future in futures]
