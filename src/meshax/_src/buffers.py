"""A small pool of large buffers for the arrays meshax allocates on every call.

Collective results, combine scratch and receive buffers of 1 MiB and more come from
here. A pooled buffer is handed out again only once nothing refers to it any more (no
result, no view of it: NumPy views keep their base alive), so reuse is invisible to
users; what it saves is faulting in and zeroing fresh pages on every call, which costs
more than the copy itself for a few MiB. The pool keeps at most `PER_SIZE` buffers of
each byte size and `BUDGET` bytes in all, like XLA's allocator keeping freed memory.
"""
from __future__ import annotations

import math
import sys
import threading
from typing import Any

import numpy as np

POOLED_FROM = 1 << 20  # Smaller buffers come from NumPy directly (malloc reuses them cheaply).
PER_SIZE = 3
BUDGET = 1 << 30

_lock = threading.Lock()
_pool: dict[int, list[np.ndarray]] = {}  # byte size -> raw uint8 buffers
_pooled_bytes = 0
_FREE_REFCOUNT = 3  # the pool's list, the loop variable and getrefcount's argument


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array, from the pool when it is large."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < POOLED_FROM:
        return np.empty(shape, dtype)
    global _pooled_bytes
    with _lock:  # the refcount check and taking a view must not interleave with another thread's
        same_size = _pool.setdefault(nbytes, [])
        for raw in same_size:
            if sys.getrefcount(raw) == _FREE_REFCOUNT:
                return raw.view(dtype).reshape(shape)
        raw = np.empty(nbytes, np.uint8)
        if len(same_size) < PER_SIZE and _pooled_bytes + nbytes <= BUDGET:
            same_size.append(raw)
            _pooled_bytes += nbytes
        return raw.view(dtype).reshape(shape)


def empty_like(array: np.ndarray) -> np.ndarray:
    return empty(array.shape, array.dtype)

