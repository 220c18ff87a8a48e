"""A bounded pool of large buffers for the arrays meshax allocates on every call.

Collective results, combine scratch and receive buffers of 1 MiB and more come from
here. A pooled buffer is handed out again only once nothing refers to it any more (no
result, no view of it: NumPy views keep their base alive), so reuse is invisible to
users; what it saves is faulting in and zeroing fresh pages on every call, which costs
more than the copy itself for a few MiB. Requests are rounded up to size classes a
quarter octave apart (at most 25 % slack), so arrays of nearby sizes share buffers. The
pool holds at most `meshax_buffer_pool_mb` MiB (default 256, env MESHAX_BUFFER_POOL_MB);
to make room it drops the least recently used free buffers, and a buffer that does not
fit while the others are in use is handed out unpooled (NumPy frees it as usual). Free
buffers not handed out for `IDLE_SECONDS` are dropped too, so sizes a program no longer
uses do not hold memory. Every `TRIM_SECONDS` at most, while large buffers are requested, the
pool also asks the C library to return free heap pages to the system (glibc's malloc_trim,
a few ms): NumPy's large temporaries come from the heap once glibc has raised its mmap
threshold, and without this their freed pages would stay in the process's resident memory.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from ..config import config

POOLED_FROM = 1 << 20  # Smaller buffers come from NumPy directly (malloc reuses them cheaply).
CLASSES_PER_OCTAVE = 4
IDLE_SECONDS = 30.0
TRIM_SECONDS = 5.0

_lock = threading.Lock()
_pooled: dict[int, OrderedDict[int, np.ndarray]] = {}  # size class -> id -> raw uint8 buffer (free or in use)
_recency: OrderedDict[int, tuple[int, float]] = OrderedDict()  # id -> (size class, last handed out), oldest first
_pooled_bytes = 0
_idle_checked = 0.0
_trimmed = 0.0  # when free heap pages were last returned to the system
_FREE_REFCOUNT = 3  # the pool's dict, the loop variable and getrefcount's argument


def size_class(nbytes: int) -> int:
    """The smallest class size >= nbytes: 2**e * (1 + k / CLASSES_PER_OCTAVE)."""
    exponent = max(0, nbytes - 1).bit_length() - 1
    step = max(1, (1 << exponent) // CLASSES_PER_OCTAVE)
    return -(-nbytes // step) * step


def budget() -> int:
    """The pool's limit in bytes, from meshax.config's meshax_buffer_pool_mb."""
    return int(float(config.read("meshax_buffer_pool_mb")) * (1 << 20))


def pooled_bytes() -> int:
    """Bytes the pool holds now (in use or free)."""
    return _pooled_bytes


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array, from the pool when it is large."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < POOLED_FROM:
        return np.empty(shape, dtype)
    cls = size_class(nbytes)
    global _idle_checked
    with _lock:  # the refcount check and taking a view must not interleave with another thread's
        limit, now = budget(), time.monotonic()
        if _pooled_bytes > limit or now - _idle_checked > 1.0:  # a lowered budget, or idle buffers
            _idle_checked = now
            _evict(limit, idle_before=now - IDLE_SECONDS)
        raw = _take(cls, now)
        if raw is None:
            raw = np.empty(cls, np.uint8)
            _adopt(raw, cls, limit, now)
        array = raw[:nbytes].view(dtype).reshape(shape)
    if now - _trimmed > TRIM_SECONDS:
        _return_free_memory(now)
    return array


def empty_like(array: np.ndarray) -> np.ndarray:
    return empty(array.shape, array.dtype)


def trim(limit: int | None = None) -> None:
    """Drop free buffers, least recently used first, until the pool holds at most `limit` bytes (default:
    the configured budget; 0 empties it of every buffer not in use)."""
    with _lock:
        _evict(budget() if limit is None else limit)
    _return_free_memory(time.monotonic())


def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_libc_trim = _malloc_trim()


def _return_free_memory(now: float) -> None:
    """Hand free heap pages back to the system (glibc only)."""
    global _trimmed
    _trimmed = now
    if _libc_trim is not None:
        _libc_trim(0)


def _take(cls: int, now: float) -> np.ndarray | None:
    """A free pooled buffer of class `cls`, marked as used at `now`; None if there is none."""
    for raw in _pooled.get(cls, {}).values():  # (not items(): its reused tuple would hold a reference too)
        if sys.getrefcount(raw) == _FREE_REFCOUNT:
            _recency[id(raw)] = (cls, now)
            _recency.move_to_end(id(raw))
            return raw
    return None


def _adopt(raw: np.ndarray, cls: int, limit: int, now: float) -> None:
    """Keep the new buffer `raw` in the pool if room can be made for it within `limit` bytes."""
    global _pooled_bytes
    if _pooled_bytes + cls > limit:
        _evict(limit - cls)
    if _pooled_bytes + cls <= limit:
        _pooled.setdefault(cls, OrderedDict())[id(raw)] = raw
        _recency[id(raw)] = (cls, now)
        _pooled_bytes += cls


def _evict(limit: int, idle_before: float = -math.inf) -> None:
    """Drop free buffers, least recently used first, while more than `limit` bytes are pooled, and those last
    handed out before `idle_before`."""
    global _pooled_bytes
    for key, (cls, used) in list(_recency.items()):
        if _pooled_bytes <= limit and used >= idle_before:
            break
        same = _pooled[cls]
        if sys.getrefcount(same[key]) == _FREE_REFCOUNT - 1:  # the dict and getrefcount's argument
            del same[key], _recency[key]
            _pooled_bytes -= cls
            if not same:
                del _pooled[cls]
