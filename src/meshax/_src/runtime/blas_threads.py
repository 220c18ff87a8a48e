"""Lets OpenBLAS's idle threads sleep at once instead of spinning, so that they leave the cores to other
controllers and to meshax's own threads between matrix products.

After each multi-threaded call OpenBLAS keeps its threads spinning for 2^28 cycles (about 0.1 s) before
they sleep: a controller at rest burns a core per BLAS thread, and a step that alternates matmuls with
elementwise work on meshax's pool shares every core with a spinning BLAS thread (on a 16-core host an
add and max over (2048, 1024) float32 took 4.8 ms on 16 threads right after a matmul, 1.7-2.5 ms
otherwise). XLA runs both kinds of work on one pool. OpenBLAS reads its wait, OPENBLAS_THREAD_TIMEOUT,
when it loads; its shortest, 4, is 16 cycles. Waking sleeping threads costs microseconds, a matmul of a
step milliseconds.

- `import meshax` sets OPENBLAS_THREAD_TIMEOUT=4 in the environment (`choose_at_import`): an OpenBLAS
  loaded later (NumPy imported after meshax, the launcher's children) starts with it.
- Where NumPy was imported first, its OpenBLAS already waits long: on the first computation with
  `CONTENDED_FROM` compute threads or more (`quiet_idle_threads`; BLAS then has threads of its own)
  meshax has it re-read its settings with the short wait (`openblas_read_env`) and restarts its threads
  (`blas_thread_shutdown_`; they start again on the next multi-threaded call). Measured on 2 cores: two
  devices' matmuls side by side after a spinning BLAS thread 34 ms, 17 ms after a sleeping one; a
  one-device step the same either way (115.7 vs 116.5 ms, medians of 5 alternating runs).
Neither is done where the user set OPENBLAS_THREAD_TIMEOUT or MESHAX_QUIET_BLAS_THREADS=0; the restart
only for OpenBLAS on its own threads (pthreads) with those entry points.
"""
from __future__ import annotations

import os
import sys
from typing import Any

DISABLE_VARIABLE = "MESHAX_QUIET_BLAS_THREADS"
TIMEOUT_VARIABLE = "OPENBLAS_THREAD_TIMEOUT"
SHORTEST_TIMEOUT = "4"  # OpenBLAS's smallest: its threads wait 2^4 cycles before they sleep
CONTENDED_FROM = 2  # compute threads from which BLAS runs threads of its own

_restart_needed = False  # set at import: NumPy's OpenBLAS was loaded before meshax set the variable
_state: list[str] = []  # what was done, once decided (a one-element cache)


def choose_at_import() -> None:
    """Set the short wait in the environment unless the user chose a wait or turned this off."""
    global _restart_needed
    if TIMEOUT_VARIABLE in os.environ or _disabled():
        return
    os.environ[TIMEOUT_VARIABLE] = SHORTEST_TIMEOUT
    _restart_needed = "numpy" in sys.modules


def quiet_idle_threads(controller: Any, threads: int) -> str:
    """Restart the OpenBLAS libraries that `controller` (a threadpoolctl ThreadpoolController) found with
    the short wait where they loaded before meshax, once, when the controller's share is `threads` >=
    CONTENDED_FROM; returns what is in effect, in words (for `meshax info` and the log)."""
    if _state:
        return _state[0]
    if _restart_needed and not _disabled() and threads < CONTENDED_FROM:
        return (f"OpenBLAS's default wait (NumPy was imported first; with {threads} compute thread BLAS runs "
                "no threads of its own)")
    _state.append(_apply(controller))
    return _state[0]


def _disabled() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "").strip() == "0"


def _apply(controller: Any) -> str:
    if _disabled():
        return f"OpenBLAS's default wait ({DISABLE_VARIABLE}=0)"
    if os.environ.get(TIMEOUT_VARIABLE) != SHORTEST_TIMEOUT:
        return f"the user's {TIMEOUT_VARIABLE}={os.environ.get(TIMEOUT_VARIABLE, '(unset)')}"
    quiet = "they sleep at once (OPENBLAS_THREAD_TIMEOUT=4)"
    if not _restart_needed:
        return quiet
    libraries = [lib for lib in controller.lib_controllers if lib.internal_api == "openblas"]
    if not libraries:
        return "no OpenBLAS"
    if all(lib.threading_layer == "pthreads" and _restart(lib.filepath) for lib in libraries):
        return quiet + ", restarted: NumPy was imported first"
    return "OpenBLAS's default wait (loaded before meshax, and it cannot restart its threads)"


def _restart(path: str) -> bool:
    """Have the OpenBLAS at `path` re-read its settings (the short wait is in the environment) and stop its
    threads; False where the library lacks the entry points."""
    import ctypes  # here: importing it costs 3 ms of every `import meshax`

    try:
        library = ctypes.CDLL(path)
        read_settings, stop_threads = library.openblas_read_env, library.blas_thread_shutdown_
    except (OSError, AttributeError):
        return False
    read_settings()
    stop_threads()
    return True
