"""Local reductions of large buffers in any memory layout, and the pool's threads warning of no floating-point error."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from meshax._src.arrays import collectives
from meshax._src.runtime import compute_pool as device_pool
from meshax._src.runtime import numpy_errors


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


@pytest.mark.parametrize("count", list(range(1, 20)))
@pytest.mark.parametrize("op", ["sum", "max"])
def test_stacked_values_combine_level_by_level_in_the_trees_order(count, op):
    """Small per-device values stacked in one result (one call over the devices' blocks): combined a level of the
    pairwise tree at a time, bit for bit the tree's result, through allreduce_devices too."""
    import meshax
    from meshax._src.arrays.joined_values import STACKED, joined_values
    rng = np.random.default_rng(count)
    stack = (rng.standard_normal((count, 7, 5)) * 10.0 ** rng.integers(-6, 7, (count, 7, 5))).astype(np.float32)
    combine = collectives.NUMPY_COMBINE[op]
    tree = np.empty_like(stack[0])
    levels = max(0, (count - 1).bit_length() - 1)
    collectives._combine_into(list(stack), tree, combine, [np.empty_like(tree) for _ in range(levels)])
    stacked = collectives._Stacked(list(stack))
    stacked.whole = stack
    assert collectives.combine_all(stacked, combine).tobytes() == tree.tobytes()
    if count <= len(meshax.devices()):
        mesh = meshax.make_mesh((count,), ("data",), devices=meshax.devices()[:count])
        values = joined_values(stack, STACKED, mesh.local_device_tuple())
        parts = collectives._parts(values, mesh.local_device_tuple())
        assert isinstance(parts, collectives._Stacked) and parts.whole is values.whole
        reduced = collectives.allreduce_devices(mesh, ("data",), values, op)
        assert all(r.tobytes() == tree.tobytes() for r in reduced.values())


def test_calls_run_side_by_side_warn_of_nothing_inside_a_meshax_computation(monkeypatch):
    monkeypatch.setenv("MESHAX_CPU_THREADS", "2")
    zero = np.zeros(4, np.float32)
    calls = [lambda: np.float32(1) / zero for _ in range(4)]
    state = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with numpy_errors.silenced:  # as every eager operation and jitted call
            assert all(np.isinf(v).all() for v in device_pool.run_each(calls, blas=False))
    assert np.geterr() == state


def test_in_batch_and_call_threads(monkeypatch):
    monkeypatch.setenv("MESHAX_CPU_THREADS", "4")
    assert not device_pool.in_batch() and device_pool.call_threads() == 4
    seen = device_pool.run_each([lambda: (device_pool.in_batch(), device_pool.call_threads()) for _ in range(2)])
    assert seen == [(True, 2), (True, 2)]


@pytest.mark.parametrize("where", ["eager", "jit", "shard_map"])
def test_large_elementwise_operations_of_several_devices_run_side_by_side(monkeypatch, where):
    """A process's devices' large elementwise calls share its cores (as its matmuls do), with NumPy's values."""
    import meshax
    import meshax.numpy as jnp

    monkeypatch.setenv("MESHAX_CPU_THREADS", "2")
    batches = []
    run_each = device_pool.run_each

    def recording(calls, *, blas=True):
        batches.append((len(calls), blas))
        return run_each(calls, blas=blas)

    monkeypatch.setattr(device_pool, "run_each", recording)
    mesh = meshax.make_mesh((2,), ("a",), devices=meshax.devices()[:2])
    host = np.random.default_rng(1).standard_normal((1024, 256)).astype(np.float32)
    x = meshax.device_put(host, meshax.NamedSharding(mesh, meshax.P("a")))

    def step(v):
        return jnp.where(v > 0, v * 2.0, v - 1.0)

    if where == "shard_map":
        step = meshax.shard_map(step, mesh=mesh, in_specs=meshax.P("a"), out_specs=meshax.P("a"))
    elif where == "jit":
        step = meshax.jit(step)
    np.testing.assert_array_equal(np.asarray(step(x)), np.where(host > 0, host * 2.0, host - 1.0))
    assert (2, False) in batches, batches  # jit: one fused cluster per device (BLAS-free: no BLAS limit set)
