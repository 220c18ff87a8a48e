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

Outside a batch, a call takes the threads that pay and that the machine can give now (`available_threads`,
`product_blas`: cpu_budget.py says how and what was measured): each matrix product sets BLAS's threads just
before it runs where they differ from the last product's (one ctypes call), the load is re-read every
cpu_budget.LOAD_INTERVAL. `hold_budget` sets BLAS back to the whole share (LAPACK, the tests' view).
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from . import allocator, blas_threads, cpu_budget, denormals, numpy_errors

logger = logging.getLogger("meshax")

_lock = threading.RLock()
_pools: dict[str, tuple[ThreadPoolExecutor, int]] = {}  # name: (pool, its threads)


class _CallState(threading.local):
    parts: int | None = None  # into how many pieces the call on this thread may split its work (None: no batch)


_this_call = _CallState()  # a class default: reading an unset attribute of a bare threading.local costs 0.5 us
_controller: Any = None
_threads = 0  # this controller's share, as applied to BLAS (0: not yet)
_applied_for: tuple[Any, ...] | None = None  # what the applied share was computed from
_fixed = False  # MESHAX_CPU_THREADS fixes the threads: the load is not read
_available = 1  # the threads the machine gives this controller now (within the share; re-read with the load)
_free = math.inf  # the cores other processes left free at the last reading of the load
_blas_now = 0  # BLAS's threads as meshax last set them
_blas_lock = threading.Lock()
_blas_setters: list[Callable[[int], Any]] | None = None
_clock, _load, _product_threads = time.monotonic, cpu_budget.load, cpu_budget.product_threads  # 0.1 us saved


def hold_budget() -> int:
    """Set BLAS to this controller's share of the cores, if that is not done already; returns the share."""
    threads = _share()
    if _blas_now != threads and _this_call.parts is None:
        _set_blas(threads)
    return threads


def _share() -> int:
    """This controller's share, applied to BLAS when it changed (not inside a batch of run_each)."""
    key = (cpu_budget.host_controllers(), cpu_budget.host_index(), cpu_budget.override_text())
    if key != _applied_for and _this_call.parts is None:
        _apply(key)
    return _threads


def available_threads() -> int:
    """The threads this controller may keep busy now: its share, cut to the cores other processes leave free
    (read at most every cpu_budget.LOAD_INTERVAL; the whole share where MESHAX_CPU_THREADS fixes it)."""
    share = _share()
    now = _clock()
    if now >= _load.due:
        _read_load(now)
    return _available if _available < share else share


def product_blas(multiply_adds: int, rows: int) -> None:
    """Give BLAS the threads that one matrix product of `multiply_adds` (m * n * k of one matrix) and `rows` (m)
    should use now (cpu_budget.product_threads, mostly within `available_threads`); nothing inside a batch of run_each,
    where BLAS runs one thread per call. Costs ~0.2 us where the threads stay as they are."""
    if _this_call.parts is not None:
        return
    now = _clock()
    if now >= _load.due:
        _read_load(now)
    threads = _product_threads(multiply_adds, rows, _available, _threads)
    if threads != _blas_now:
        _set_blas(threads)


def _read_load(now: float) -> None:
    """Check the share and re-read the cores the machine leaves this controller."""
    global _available, _free
    share = _share()
    if _fixed:
        cpu_budget.load.due = now + cpu_budget.LOAD_INTERVAL
        _available, _free = share, math.inf
    else:
        _free = cpu_budget.load.read(now)
        _available = cpu_budget.threads_for_load(share, _free)


def host_busy() -> bool:
    """Whether other processes keep busy part of the cores this controller's share counts on (a quarter of a
    core or more, read at most every cpu_budget.LOAD_INTERVAL; never where MESHAX_CPU_THREADS fixes the
    threads)."""
    available_threads()  # the share applied, the load re-read when due
    return _free < _threads - BUSY_MARGIN


BUSY_MARGIN = 0.25  # cores


def on_fresh_thread(call: Callable[[], Any]) -> Any:
    """`call()` run on a new thread (prepared as a compute thread), this one waiting for it; its exception raised
    here. On a host busy with other processes, Linux starts a new thread on the CPU with the least load, where a
    thread that keeps running stays on its CPU when another frees up: a long call run so gets a CPU of its own
    more often (a GRU step of 20 ms beside two busy loops on 2 cores: its median 22-23 ms in 13 of 16 runs,
    against 32-43 ms in 4 of 6 on the caller's thread). Starting one costs ~0.1 ms."""
    box: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()  # the caller's context variables (NumPy's error state then ignored)

    def prepared() -> Any:
        _prepare_thread()
        return call()

    def target() -> None:
        try:
            box.append((True, context.run(prepared)))
        except BaseException as error:  # noqa: BLE001 - handed to the caller, who raises it
            box.append((False, error))

    thread = threading.Thread(target=target, name="meshax-call", daemon=True)
    thread.start()
    thread.join()
    done, value = box[0]
    if not done:
        raise value
    return value


def _set_blas(threads: int) -> None:
    """Set the threads of every BLAS library meshax computes with (OpenBLAS directly through ctypes)."""
    global _blas_now, _blas_setters
    with _blas_lock:
        if _blas_setters is None:
            _blas_setters = _setters(blas_controller())
        for setter in _blas_setters:
            setter(threads)
        _blas_now = threads


def _setters(controller: Any) -> list[Callable[[int], Any]]:
    """A function setting the threads of each BLAS library that `controller` found: OpenBLAS's own
    openblas_set_num_threads (threadpoolctl's lets only the first thread that used it set them), else
    threadpoolctl's."""
    import ctypes

    names = [f"{prefix}openblas_set_num_threads{suffix}" for prefix in ("", "scipy_") for suffix in ("", "64_", "_64")]
    setters = []
    for lib in controller.lib_controllers:
        if lib.user_api != "blas":
            continue
        found = [getattr(lib.dynlib, name) for name in names if lib.internal_api == "openblas" and
                 lib.threading_layer == "pthreads" and hasattr(lib.dynlib, name)]
        if found:
            found[0].argtypes, found[0].restype = [ctypes.c_int], None
            setters.append(found[0])
        else:
            setters.append(lib.set_num_threads)
    return setters


def _apply(key: tuple[Any, ...]) -> None:
    global _threads, _applied_for, _fixed
    with _lock:
        threads = cpu_budget.compute_threads()
        blas = blas_threads.quiet_idle_threads(blas_controller(), threads)
        _set_blas(threads)  # kept until a product or a batch of run_each sets other threads
        if threads >= blas_threads.CONTENDED_FROM:
            blas_threads.start_threads_flushing()
        _threads, _applied_for = threads, key
        _fixed = bool(key[2] and key[2].strip())
        cpu_budget.load.restart()
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
    threads = _share()  # BLAS's threads stay as the last product set them (each product sets its own)
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
    return _this_call.parts or 1


def in_batch() -> bool:
    """Whether this thread is running a call of a batch of `run_each` (whose work splits with `run_parts`,
    never with a nested `run_each`)."""
    return _this_call.parts is not None


def call_threads() -> int:
    """How many threads the call on this thread may keep busy: its part inside a batch of `run_each`, else this
    controller's share as the machine gives it now (`available_threads`)."""
    return call_parts() if in_batch() else available_threads()


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


def spread(calls: Sequence[Callable[[], Any]], threads: int, *, blas: bool = False) -> None:
    """Run the independent `calls` (the pieces of one kernel, BLAS-free unless `blas`) on at most `threads` threads:
    the pool's within the controller's share (with `blas`, BLAS one thread per call meanwhile), or, inside a batch
    of `run_each`, this call's part of it (`run_parts`)."""
    parts = max(1, min(threads, len(calls), call_parts() if in_batch() else threads))
    groups = [lambda mine=calls[i::parts]: [call() for call in mine] for i in range(parts)]
    if in_batch():
        run_parts(groups)
    else:
        run_each(groups, blas=blas)


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

    def drain() -> None:
        _this_call.parts = parts
        try:
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


def _prepare_thread() -> None:
    """A compute thread computes as XLA's CPU: subnormals flushed, NumPy's floating-point errors ignored."""
    denormals.flush_this_thread()
    numpy_errors.silence_this_thread()


def _pool(name: str, size: int) -> ThreadPoolExecutor:
    pool, threads = _pools.get(name, (None, 0))
    if pool is None or threads < size:
        if pool is not None:
            pool.shutdown(wait=False)
        pool, threads = (ThreadPoolExecutor(max_workers=max(1, size), thread_name_prefix=name,
                                            initializer=_prepare_thread), max(1, size))
        _pools[name] = (pool, threads)
    return pool
