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


@pytest.mark.parametrize("modes, turned_off", [("always defer [defer+madvise] madvise never", True),
                                               ("always defer defer+madvise [madvise] never", True),
                                               ("[always] defer defer+madvise madvise never", True),
                                               ("always [defer] defer+madvise madvise never", False),
                                               ("always defer defer+madvise madvise [never]", False)])
def test_numpys_huge_page_advice_is_off_where_the_kernel_compacts_for_it(modes, turned_off, tmp_path, monkeypatch):
    """Off where a fault in an advised array compacts memory at once (a first step 1.8-1.9 s after an idle host
    against 0.85 s), left as it is under the other modes and wherever the user set NUMPY_MADVISE_HUGEPAGE."""
    from numpy._core import multiarray

    setting = tmp_path / "defrag"
    setting.write_text(modes + "\n")
    monkeypatch.setattr(allocator, "DEFRAG_SETTING", str(setting))
    monkeypatch.delenv(allocator.HUGE_PAGE_VARIABLE, raising=False)
    before = multiarray._set_madvise_hugepage(True)
    try:
        said = allocator._huge_page_advice()
        assert multiarray._set_madvise_hugepage(True) is (not turned_off)
        chosen = modes.split("[")[1].split("]")[0]
        want = f"; NumPy's huge-page advice off (transparent huge pages' defrag: {chosen})"
        assert said == (want if turned_off else "")
        monkeypatch.setenv(allocator.HUGE_PAGE_VARIABLE, "1")
        assert allocator._huge_page_advice() == "" and multiarray._set_madvise_hugepage(True) is True
        monkeypatch.setattr(allocator, "DEFRAG_SETTING", str(tmp_path / "missing"))
        monkeypatch.delenv(allocator.HUGE_PAGE_VARIABLE)
        assert allocator._huge_page_advice() == "" and multiarray._set_madvise_hugepage(True) is True
    finally:
        multiarray._set_madvise_hugepage(before)
