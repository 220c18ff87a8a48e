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
    threshold = 256 if tuple(map(int, platform.libc_ver()[1].split(".")[:2])) >= (2, 35) else 32
    assert f"freed memory kept (arrays up to {threshold} MiB from the heap, up to 256 MiB kept)" in out.stdout
    info = subprocess.run([sys.executable, "-m", "meshax", "info"], capture_output=True, text=True, timeout=120,
                          env=env)
    assert "memory:      freed memory kept" in info.stdout, info.stdout


@pytest.mark.skipif(not GLIBC or tuple(map(int, platform.libc_ver()[1].split(".")[:2])) < (2, 35),
                    reason="glibc 2.35's mallopt, which takes thresholds above 32 MiB")
def test_a_large_array_made_again_reuses_the_freed_memory():
    """A 75 MiB array (a convolution's windows) freed and made again takes no page fault per 4 KiB page once the
    settings apply (huge pages off, so that glibc's defaults would fault ~19000 times)."""
    program = ("import resource, numpy as np\n"
               "from numpy._core import multiarray\n"
               "from meshax._src.runtime import allocator\n"
               "multiarray._set_madvise_hugepage(False)\n"
               "def faults():\n"
               "    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
               "    np.ones(75 << 18, np.float32)\n"  # made, written and freed
               "    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before\n"
               "faults(); default = faults()\n"
               "allocator.keep_freed_memory(); faults(); kept = faults()\n"
               "print(default, kept)\n")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("MALLOC_")}
    env.pop("GLIBC_TUNABLES", None)
    env.pop(allocator.DISABLE_VARIABLE, None)
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    default, kept = map(int, out.stdout.split())
    assert default > 15000 and kept < 1000, (default, kept)
