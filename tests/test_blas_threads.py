"""OpenBLAS's idle threads sleep at once (runtime/blas_threads.py): set at import, restarted on the first
computation with 2 compute threads or more where NumPy came first, never over the user's own choice.
Measured as the CPU time a process burns while it sleeps right after a matmul (a spinning BLAS thread
burns a core)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from threadpoolctl import threadpool_info

OPENBLAS = any(lib.get("internal_api") == "openblas" and lib.get("threading_layer") == "pthreads"
               for lib in threadpool_info())

# NumPy imported first (its OpenBLAS loads with the default wait), then a meshax matmul (the first
# computation), then a NumPy matmul on 2 BLAS threads and a sleep: the CPU time the process burns meanwhile.
PROGRAM = """
import os, time
import numpy as np
import meshax, meshax.numpy as jnp
from threadpoolctl import threadpool_limits
from meshax._src.runtime import blas_threads, compute_pool
print("environment:", os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
(jnp.ones((256, 256)) @ jnp.ones((256, 256))).block_until_ready()
print("state:", blas_threads.quiet_idle_threads(compute_pool.blas_controller(), compute_pool.workers()))
a = np.ones((1024, 1024), np.float32)
with threadpool_limits(2, "blas"):
    a @ a
    start = time.process_time()
    time.sleep(0.2)
    print("idle CPU ms:", (time.process_time() - start) * 1e3)
"""


def run(threads: int = 4, **env: str) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT",
                                                                    "MESHAX_QUIET_BLAS_THREADS")}
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120,
                         env={**environment, "MESHAX_CPU_THREADS": str(threads), **env})
    assert out.returncode == 0, out.stderr
    return dict(line.split(": ", 1) for line in out.stdout.splitlines())


@pytest.mark.skipif(not OPENBLAS, reason="NumPy's BLAS is not OpenBLAS on its own threads")
def test_numpy_imported_first_still_gets_threads_that_sleep_at_once():
    quiet = run()
    assert quiet["environment"] == "4"
    assert "sleep at once" in quiet["state"] and "restarted" in quiet["state"], quiet
    assert float(quiet["idle CPU ms"]) < 20, quiet


@pytest.mark.skipif(not OPENBLAS or (os.cpu_count() or 1) < 2, reason="needs OpenBLAS and 2 cores")
def test_without_meshax_the_idle_threads_spin():
    """The control: the same program with the setting turned off burns CPU while it sleeps."""
    spinning = run(MESHAX_QUIET_BLAS_THREADS="0")
    assert spinning["environment"] == "None"
    assert "default wait (MESHAX_QUIET_BLAS_THREADS=0)" in spinning["state"]
    assert float(spinning["idle CPU ms"]) > 20, spinning


@pytest.mark.skipif(not OPENBLAS, reason="NumPy's BLAS is not OpenBLAS on its own threads")
def test_with_one_compute_thread_numpys_openblas_is_left_alone():
    few = run(threads=1)
    assert "default wait (NumPy was imported first; with 1 compute thread BLAS runs no threads" in few["state"], few


@pytest.mark.skipif(not OPENBLAS, reason="NumPy's BLAS is not OpenBLAS on its own threads")
def test_the_restart_entry_points_are_found_exported_or_in_the_symbol_table():
    """scipy-openblas 0.3.31 (NumPy 2.4, the Python 3.11 venv) exports openblas_read_env and
    blas_thread_shutdown_; 0.3.34 (NumPy 2.5, Python 3.12) has them hidden, only in its ELF .symtab, and
    meshax then locates them there. The symbol table's offsets plus the load address must give the very
    addresses the dynamic linker gives where a build also exports them (checked without calling them)."""
    import ctypes

    from meshax._src.runtime import blas_threads

    names = (blas_threads.READ_SETTINGS, blas_threads.STOP_THREADS)
    paths = sorted({lib["filepath"] for lib in threadpool_info() if lib.get("internal_api") == "openblas"})
    assert paths  # NumPy's, and SciPy's own where scipy.linalg was imported
    for path in paths:
        assert blas_threads._entry_points(path) is not None, path
        in_table, exported = blas_threads._symbol_table(path, names)
        assert set(in_table) == set(names) and exported, (path, in_table, exported)
        library = ctypes.CDLL(path)
        anchor, offset = next(iter(exported.items()))
        base = ctypes.cast(getattr(library, anchor), ctypes.c_void_p).value - offset
        for name in names:
            if hasattr(library, name):
                assert ctypes.cast(getattr(library, name), ctypes.c_void_p).value == base + in_table[name], name


def test_the_users_wait_is_kept():
    chosen = run(OPENBLAS_THREAD_TIMEOUT="28")
    assert chosen["environment"] == "28"
    assert "the user's OPENBLAS_THREAD_TIMEOUT=28" in chosen["state"]


def test_meshax_info_says_what_is_in_effect():
    info = subprocess.run([sys.executable, "-m", "meshax", "info"], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"})
    assert info.returncode == 0, info.stderr
    line = next(line for line in info.stdout.splitlines() if line.startswith("BLAS idle:"))
    assert "sleep at once" in line or "no OpenBLAS" in line, line
