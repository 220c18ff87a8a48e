"""Keeps the memory of freed arrays mapped, so that the next arrays of a step reuse it without page faults.

A step allocates and frees many large arrays (8 MiB for one (2048, 1024) float32 intermediate). With
glibc's defaults, freed memory at the top of the heap beyond 128 KiB or twice the last freed mmap'd
block is given back to the kernel, and the next array of that size takes a page fault per 4 KiB when
first written: an elementwise add over 8 MiB took 2.3 ms instead of 1.0 ms inside a step, and the
devices' calls run side by side in one process queued on the process's memory-map lock (a data
parallel step on 2 devices: 130-175 ms, 120 ms with the memory kept). As XLA keeps its buffers, meshax
asks glibc, on the first computation, to serve arrays of up to `MMAP_THRESHOLD` from the heap and to
keep up to `TRIM_THRESHOLD` of freed memory. Arrays larger than 32 MiB (a convolution's windows: 75 MiB for
3x3x32 over 64x32x32 images) are mapped afresh by every call under glibc's defaults, which costs more than
copying them on a virtual machine (7 ms of page faults for those 75 MiB, the copy itself 5 ms); glibc 2.35 and
later accept a threshold above 32 MiB, older ones refuse it and get 32 MiB. Not done where the user set glibc's malloc variables, where
MESHAX_KEEP_FREED_MEMORY=0, or where the C library is not glibc.

NumPy asks the kernel for huge pages for every array of 4 MiB or more (madvise). Where the kernel then compacts
memory synchronously on a page fault in such an array (transparent_hugepage/defrag set to always, madvise or
defer+madvise), a process's first arrays wait for it: a GPT training step's first run took 1.81-1.93 s after the
2-core host sat idle for 45 s, against 0.84-0.85 s with the advice off (0.67-0.70 s with it right after another run;
steady steps the same either way). meshax turns the advice off there, unless NUMPY_MADVISE_HUGEPAGE is set.
"""
from __future__ import annotations

import ctypes
import os
import platform

DISABLE_VARIABLE = "MESHAX_KEEP_FREED_MEMORY"
TRIM_THRESHOLD = 256 << 20
MMAP_THRESHOLD = TRIM_THRESHOLD  # arrays larger than what is kept free are mapped for themselves
OLD_GLIBC_MMAP_THRESHOLD = 32 << 20  # the largest value glibc before 2.35 allows on 64-bit hosts
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")

HUGE_PAGE_VARIABLE = "NUMPY_MADVISE_HUGEPAGE"
DEFRAG_SETTING = "/sys/kernel/mm/transparent_hugepage/defrag"
# the modes under which a page fault in an advised array compacts memory at once
_COMPACTING_MODES = frozenset({"always", "madvise", "defer+madvise"})

_state: list[str] = []  # what was done, once decided (a one-element cache)


def keep_freed_memory() -> str:
    """Apply the settings once per process; returns what was done, in words (for `meshax info` and the log)."""
    if not _state:
        _state.append(_apply() + _huge_page_advice())
    return _state[0]


def _huge_page_advice() -> str:
    """Turn NumPy's huge-page advice off where the kernel compacts memory synchronously for it (the user's
    NUMPY_MADVISE_HUGEPAGE decides otherwise); what was done, as a clause of keep_freed_memory's words."""
    if HUGE_PAGE_VARIABLE in os.environ:
        return ""
    try:
        with open(DEFRAG_SETTING) as setting:
            modes = setting.read()
    except OSError:
        return ""
    chosen = modes[modes.find("[") + 1:modes.find("]")] if "[" in modes else ""
    if chosen not in _COMPACTING_MODES:
        return ""
    import numpy as np

    multiarray = getattr(np, "_core", None) or np.core
    multiarray.multiarray._set_madvise_hugepage(False)
    return f"; NumPy's huge-page advice off (transparent huge pages' defrag: {chosen})"


def _apply() -> str:
    if os.environ.get(DISABLE_VARIABLE, "").strip() == "0":
        return f"glibc's defaults ({DISABLE_VARIABLE}=0)"
    if any(name in os.environ for name in _USER_SETTINGS) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "the user's malloc settings"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "the C library's defaults (not glibc)"
    try:
        libc = ctypes.CDLL("libc.so.6")
        threshold = next((t for t in (MMAP_THRESHOLD, OLD_GLIBC_MMAP_THRESHOLD)
                          if libc.mallopt(_M_MMAP_THRESHOLD, t) == 1), None)
        applied = threshold is not None and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    except (OSError, AttributeError):
        applied = False
    if not applied:
        return "glibc's defaults (mallopt refused)"
    return f"freed memory kept (arrays up to {threshold >> 20} MiB from the heap, up to {TRIM_THRESHOLD >> 20} MiB kept)"
