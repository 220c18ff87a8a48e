"""Keeps this controller's kernels within its share of the host's cores (runtime/cpu_budget.py).

One big kernel (one device's matmul) gets every thread of the share through BLAS; several
independent ones (the shards of the process's devices) run side by side on a pool, the share
divided between them (`cpu_budget.split`): never both multiplied, so that the controllers of a
host together never ask for more threads than it has usable cores. A call's part of the share is
not given to BLAS (OpenBLAS runs concurrent multi-threaded calls one at a time) but used by the
call splitting its work into single-threaded pieces (`call_parts`, `run_parts`). BLAS is set to the share on
first use and whenever the share changes (initialize() learns how many controllers share the
host); the pool and the thread-limit controller are created on first use, so importing meshax
starts no threads. The first use also keeps freed memory mapped (allocator.py) and lets OpenBLAS's idle
threads sleep at once (blas_threads.py).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import numpy as np

from . import allocator, blas_threads, cpu_budget

logger = logging.getLogger("meshax")

_lock = threading.RLock()
_pools: dict[str, tuple[ThreadPoolExecutor, int]] = {}  # name: (pool, its threads)
_this_call = threading.local()  # .parts: into how many pieces the call on this thread may split its work
_controller: Any = None
_threads = 0  # this controller's share, as applied to BLAS (0: not yet)
_applied_for: tuple[Any, ...] | None = None  # what the applied share was computed from


def hold_budget() -> int:
    """Set BLAS to this controller's share of the cores, if that is not done already; returns the share."""
    key = (cpu_budget.host_controllers(), cpu_budget.host_index(), cpu_budget.override_text())
    if key != _applied_for and getattr(_this_call, "parts", None) is None:  # not inside a batch of run_each
        _apply(key)
    return _threads


def _apply(key: tuple[Any, ...]) -> None:
    global _threads, _applied_for
    with _lock:
        threads = cpu_budget.compute_threads()
        blas = blas_threads.quiet_idle_threads(blas_controller(), threads)
        blas_controller().limit(limits=threads, user_api="blas")  # kept: the limit stays until changed
        _threads, _applied_for = threads, key
    if not logger.handlers and os.environ.get("MESHAX_LOG"):  # a single process that never called initialize()
        from .distributed import _configure_logging

        _configure_logging()
    memory = allocator.keep_freed_memory()
    logger.info("meshax compute threads: %s; BLAS threads: %s; memory: %s", cpu_budget.describe(), blas, memory)


def workers() -> int:
    """How many kernels may run at once: this controller's share of the cores."""
    return hold_budget()


def run_each(calls: Sequence[Callable[[], Any]], *, blas: bool = True) -> list[Any]:
    """The results of `calls`, run side by side within this controller's share of the cores (one after the
    other, each with all of it, when the share is one thread), this thread taking its turn with the pool's.
    With `blas` (calls that use BLAS), BLAS runs one thread per call meanwhile and each call may split its work
    into `call_parts()` pieces (`run_parts`): OpenBLAS runs concurrent multi-threaded calls one at a time."""
    threads = hold_budget()
    side_by_side, per_call = cpu_budget.split(threads, len(calls))
    if side_by_side < 2:
        return [call() for call in calls]
    with _lock:  # one batch at a time: the pool is sized for it, and the BLAS thread limit is process-wide
        if not blas:
            return _side_by_side(calls, side_by_side, 1)
        with blas_controller().limit(limits=1, user_api="blas"):
            return _side_by_side(calls, side_by_side, per_call)


def call_parts() -> int:
    """Into how many pieces the call running on this thread may split its work (`run_parts`)."""
    return getattr(_this_call, "parts", None) or 1


def in_batch() -> bool:
    """Whether this thread is running a call of a batch of `run_each` (whose work splits with `run_parts`,
    never with a nested `run_each`)."""
    return getattr(_this_call, "parts", None) is not None


def call_threads() -> int:
    """How many threads the call on this thread may keep busy: its part inside a batch of `run_each`, else this
    controller's whole share."""
    return call_parts() if in_batch() else hold_budget()


def run_parts(pieces: Sequence[Callable[[], Any]]) -> None:
    """Run the pieces of one call (at most `call_parts()`), this thread taking the first, the piece pool the
    others; they must not wait for anything."""
    futures = [_piece_executor().submit(piece) for piece in pieces[1:]]
    try:
        if pieces:
            pieces[0]()
    finally:
        for future in futures:
            future.result()


def spread(calls: Sequence[Callable[[], Any]], threads: int) -> None:
    """Run the independent, BLAS-free `calls` (the pieces of one kernel) on at most `threads` threads: the
    pool's within the controller's share, or, inside a batch of `run_each`, this call's part of it
    (`run_parts`)."""
    parts = max(1, min(threads, len(calls), call_parts() if in_batch() else threads))
    groups = [lambda mine=calls[i::parts]: [call() for call in mine] for i in range(parts)]
    if in_batch():
        run_parts(groups)
    else:
        run_each(groups, blas=False)


def blas_controller() -> Any:
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


def _side_by_side(calls: Sequence[Callable[[], Any]], threads: int, parts: int) -> list[Any]:
    """Each of `threads` threads (this one included) takes the next call not yet taken until none is left; each
    call may split into `parts` pieces."""
    results: list[Any] = [None] * len(calls)
    taken = itertools.count()  # next() on a count is atomic under the GIL
    errors = np.geterr()  # the caller's floating-point error handling, for the pool's threads too

    def drain() -> None:
        _this_call.parts = parts
        try:
            with np.errstate(**errors):
                while (index := next(taken)) < len(calls):
                    results[index] = calls[index]()
        finally:
            _this_call.parts = None

    if parts > 1:
        _piece_executor(threads * (parts - 1))
    helpers = [_executor(threads - 1).submit(drain) for _ in range(threads - 1)]
    try:
        drain()
    finally:
        for helper in helpers:
            helper.result()
    return results


def _executor(size: int) -> ThreadPoolExecutor:
    """The pool of calls, with at least `size` threads (replaced by a larger one when the share grows)."""
    return _pool("meshax-device", size)


def _piece_executor(size: int = 1) -> ThreadPoolExecutor:
    """The pool of pieces of calls (`run_parts`), with at least `size` threads."""
    return _pool("meshax-piece", size)


def _pool(name: str, size: int) -> ThreadPoolExecutor:
    pool, threads = _pools.get(name, (None, 0))
    if pool is None or threads < size:
        if pool is not None:
            pool.shutdown(wait=False)
        pool, threads = ThreadPoolExecutor(max_workers=max(1, size), thread_name_prefix=name), max(1, size)
        _pools[name] = (pool, threads)
    return pool
