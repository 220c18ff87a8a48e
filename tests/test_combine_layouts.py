"""Local reductions of large buffers in any memory layout, and the pool's threads under the caller's errstate."""
from __future__ import annotations

import numpy as np
import pytest

from meshax._src.arrays import collectives
from meshax._src.runtime import compute_pool as device_pool


def _values(layout: str, count: int = 5, shape=(600, 1100)) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    base = [rng.standard_normal(shape[::-1] if layout == "transposed" else shape).astype(np.float32)
            for _ in range(count)]
    if layout == "transposed":
        return [b.T for b in base]  # Fortran-ordered views, as a matmul's transposed result
    if layout == "strided":
        return [b[:, ::2] for b in base]  # neither C- nor F-contiguous
    return base


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_combine_all_equals_the_running_combine_in_mesh_order(layout, op):
    values = _values(layout)
    assert values[0].nbytes >= collectives.PARALLEL_FROM
    combine = collectives.NUMPY_COMBINE[op]
    expected = values[0].copy()
    for v in values[1:]:
        combine(expected, v, out=expected)
    result = collectives.combine_all(values, combine)
    assert result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)  # bit for bit: the same order of operations per element


def test_calls_run_side_by_side_keep_the_callers_errstate(monkeypatch):
    monkeypatch.setenv("MESHAX_CPU_THREADS", "2")
    zero = np.zeros(4, np.float32)
    calls = [lambda: np.float32(1) / zero for _ in range(4)]
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            device_pool.run_each(calls, blas=False)
    with np.errstate(divide="ignore"):
        assert all(np.isinf(v).all() for v in device_pool.run_each(calls, blas=False))


def test_in_batch_and_call_threads(monkeypatch):
    monkeypatch.setenv("MESHAX_CPU_THREADS", "4")
    assert not device_pool.in_batch() and device_pool.call_threads() == 4
    seen = device_pool.run_each([lambda: (device_pool.in_batch(), device_pool.call_threads()) for _ in range(2)])
    assert seen == [(True, 2), (True, 2)]
