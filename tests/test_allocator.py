"""Freed memory kept mapped (runtime/allocator.py): applied once on glibc, never over the user's own settings."""
from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from meshax._src.runtime import allocator

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def test_the_users_settings_and_the_switch_leave_glibc_alone(monkeypatch):
    monkeypatch.setenv(allocator.DISABLE_VARIABLE, "0")
    assert allocator._apply() == "glibc's defaults (MESHAX_KEEP_FREED_MEMORY=0)"
    monkeypatch.delenv(allocator.DISABLE_VARIABLE)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert allocator._apply() == "the user's malloc settings"
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536")
    assert allocator._apply() == "the user's malloc settings"


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt")
def test_a_computation_keeps_freed_memory_and_info_says_so():
    """In a fresh process: nothing at import, the settings on the first matmul, `meshax info` names them."""
    program = ("import meshax, meshax.numpy as jnp\n"
               "from meshax._src.runtime import allocator\n"
               "assert not allocator._state, 'applied at import'\n"
               "jnp.ones((64, 64)) @ jnp.ones((64, 64))\n"
               "print(allocator._state)\n")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "freed memory kept (arrays up to 32 MiB from the heap, up to 256 MiB kept)" in out.stdout
    info = subprocess.run([sys.executable, "-m", "meshax", "info"], capture_output=True, text=True, timeout=120,
                          env=env)
    assert "memory:      freed memory kept" in info.stdout, info.stdout
