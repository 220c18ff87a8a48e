"""The pool of large buffers: size classes, reuse only of unreferenced buffers, an LRU-bounded total."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import weakref

import numpy as np
import pytest

from meshax._src.runtime import buffers
from meshax._src.config import config

MiB = 1 << 20


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


@pytest.fixture(autouse=True)
def fresh_pool():
    before = config.read("meshax_buffer_pool_mb")
    buffers.trim(0)
    yield
    config.update("meshax_buffer_pool_mb", before)
    buffers.trim(0)


@pytest.mark.parametrize("nbytes", [MiB, MiB + 1, 3 * MiB - 5, 4_000_000, 64 * MiB + 12345, 1 << 30])
def test_size_classes_round_up_by_at_most_a_quarter(nbytes):
    cls = buffers.size_class(nbytes)
    assert nbytes <= cls <= nbytes * 1.25
    assert buffers.size_class(cls) == cls


def test_powers_of_two_and_quarter_octaves_are_classes():
    assert buffers.size_class(MiB) == MiB
    assert buffers.size_class(MiB + 1) == MiB + MiB // 4
    assert [buffers.size_class(MiB * k // 4 + 1) for k in (4, 5, 6, 7)] == [MiB * k // 4 for k in (5, 6, 7, 8)]


def test_small_arrays_are_not_pooled():
    a = buffers.empty((100,), np.float32)
    assert a.shape == (100,) and a.dtype == np.float32
    assert buffers.pooled_bytes() == 0


def test_a_buffer_is_reused_only_once_nothing_refers_to_it():
    a = buffers.empty((MiB // 4,), np.float32)
    first = address(a)
    b = buffers.empty((MiB // 4,), np.float32)
    assert address(b) != first  # a is still alive
    view = a[::2]
    del a
    c = buffers.empty((MiB // 4,), np.float32)
    assert address(c) not in (first, address(b))  # the view keeps a's buffer in use
    del view
    d = buffers.empty((512, 512), np.float32)
    assert address(d) == first
    assert d.shape == (512, 512) and d.flags.c_contiguous


def test_nearby_sizes_and_other_dtypes_share_a_class():
    a = buffers.empty((4_000_000,), np.uint8)
    first = address(a)
    del a
    b = buffers.empty((4_100_000 // 8,), np.float64)
    assert address(b) == first and b.shape == (512_500,)


def test_the_pool_is_bounded_and_drops_the_least_recently_used():
    config.update("meshax_buffer_pool_mb", 8)
    a, b, c = (buffers.empty((2 * MiB,), np.uint8) for _ in range(3))
    alive = {name: weakref.ref(x.base) for name, x in zip("abc", (a, b, c))}  # the pooled raw buffers
    del a, b, c
    reused = buffers.empty((2 * MiB,), np.uint8)  # takes a (first free), which becomes the most recent
    assert reused.base is alive["a"]()
    del reused
    big = buffers.empty((4 * MiB,), np.uint8)  # needs room for 4 MiB: b, the least recently used, goes
    assert buffers.pooled_bytes() == 8 * MiB
    assert alive["b"]() is None and alive["a"]() is not None and alive["c"]() is not None
    del big
    for size in range(3 * MiB, 7 * MiB, MiB // 2 + 4096):  # many distinct sizes, each released at once
        buffers.empty((size,), np.uint8)
        assert buffers.pooled_bytes() <= 8 * MiB


def test_buffers_in_use_are_never_dropped_and_extra_ones_go_unpooled():
    config.update("meshax_buffer_pool_mb", 4)
    held = [buffers.empty((2 * MiB,), np.uint8) for _ in range(2)]
    assert buffers.pooled_bytes() == 4 * MiB
    extra = buffers.empty((2 * MiB,), np.uint8)
    assert buffers.pooled_bytes() == 4 * MiB  # no room: handed out unpooled
    extra[:] = 1
    held[0][:] = 2
    held[1][:] = 3
    assert extra.min() == 1 and held[0].max() == 2 and held[1].max() == 3  # three distinct buffers


def test_lowering_the_budget_frees_free_buffers():
    kept = buffers.empty((3 * MiB,), np.uint8)
    released = buffers.empty((5 * MiB,), np.uint8)
    del released
    assert buffers.pooled_bytes() == 8 * MiB
    config.update("meshax_buffer_pool_mb", 0)
    small_class = buffers.empty((MiB,), np.uint8)
    assert buffers.pooled_bytes() == 3 * MiB  # only the buffer still in use remains
    assert kept.size == 3 * MiB and small_class.size == MiB


def test_trim_to_zero_keeps_buffers_in_use():
    kept = buffers.empty((MiB,), np.uint8)
    del kept
    other = buffers.empty((2 * MiB,), np.uint8)
    buffers.trim(0)
    assert buffers.pooled_bytes() == 2 * MiB
    assert other.size == 2 * MiB


@pytest.mark.parametrize("value", [-1, "big", True])
def test_bad_budgets_are_refused(value):
    with pytest.raises(ValueError, match="meshax_buffer_pool_mb=.* must be a number of MiB >= 0"):
        config.update("meshax_buffer_pool_mb", value)


def test_budget_from_the_environment():
    env = dict(os.environ, MESHAX_BUFFER_POOL_MB="16")
    out = subprocess.run([sys.executable, "-c", "from meshax._src.runtime import buffers; print(buffers.budget())"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str(16 * MiB), out.stderr
    default = subprocess.run([sys.executable, "-c", "from meshax._src.runtime import buffers; print(buffers.budget())"],
                             env={k: v for k, v in env.items() if k != "MESHAX_BUFFER_POOL_MB"},
                             capture_output=True, text=True, timeout=60)
    assert default.stdout.strip() == str(256 * MiB), default.stderr


def test_buffers_idle_for_long_are_dropped(monkeypatch):
    monkeypatch.setattr(buffers, "IDLE_SECONDS", 0.2)
    idle = buffers.empty((2 * MiB,), np.uint8)
    busy = buffers.empty((MiB,), np.uint8)
    idle_raw = weakref.ref(idle.base)
    del idle
    time.sleep(1.3)  # the pool looks for idle buffers at most once a second
    other = buffers.empty((3 * MiB,), np.uint8)
    assert idle_raw() is None  # unused for longer than IDLE_SECONDS: freed
    assert buffers.pooled_bytes() == MiB + 3 * MiB  # buffers in use stay, however old
    assert busy.size == MiB and other.size == 3 * MiB
