"""dot_general as one BLAS matmul on transposed views: every kind of dimension numbers against JAX."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from meshax import lax
from meshax._src.primitives.cpu_kernels import _blas_ready

CASES = [  # lhs shape, rhs shape, ((lhs contract, rhs contract), (lhs batch, rhs batch))
    ((5, 7), (7, 3), (((1,), (0,)), ((), ()))),  # plain matmul
    ((7, 5), (7, 3), (((0,), (0,)), ((), ()))),  # x.T @ g (a weight gradient)
    ((5, 7), (3, 7), (((1,), (1,)), ((), ()))),  # g @ w.T (an input gradient)
    ((7, 5), (3, 7), (((0,), (1,)), ((), ()))),  # both transposed
    ((2, 5, 7), (2, 7, 3), (((2,), (1,)), ((0,), (0,)))),  # batched
    ((5, 2, 7), (7, 3, 2), (((2,), (0,)), ((1,), (2,)))),  # batch dimensions in the middle and last
    ((2, 3, 4, 5), (4, 2, 6, 3), (((1, 2), (3, 0)), ((0,), (1,)))),  # two contracted dimensions, permuted
    ((4, 3), (5,), (((), ()), ((), ()))),  # outer product
    ((), (3,), (((), ()), ((), ()))),  # scalar times vector
    ((6,), (6,), (((0,), (0,)), ((), ()))),  # inner product
    ((3, 0), (0, 4), (((1,), (0,)), ((), ()))),  # empty contraction: zeros
    ((0, 3), (3, 4), (((1,), (0,)), ((), ()))),  # empty result
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.int32])
@pytest.mark.parametrize("lhs_shape,rhs_shape,dimension_numbers", CASES)
def test_dot_general_matches_jax_eagerly_and_under_jit(lhs_shape, rhs_shape, dimension_numbers, dtype):
    rng = np.random.default_rng(0)
    lhs = (rng.standard_normal(lhs_shape) * 3).astype(dtype)
    rhs = (rng.standard_normal(rhs_shape) * 3).astype(dtype)
    want = np.asarray(jax.lax.dot_general(lhs, rhs, dimension_numbers, precision="highest"))
    for run in (lax.dot_general, meshax.jit(lax.dot_general, static_argnums=2)):
        got = np.asarray(run(lhs, rhs, dimension_numbers))
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_strided_views_reach_blas_as_contiguous_copies_and_good_views_stay_views():
    base = np.arange(2 * 6 * 4, dtype=np.float32).reshape(6, 4, 2)
    strided = base[:, :, 0]  # neither dimension has unit stride: np.matmul would take its slow loop
    ready = _blas_ready(strided)
    assert ready.flags.c_contiguous and np.array_equal(ready, strided)
    transposed = np.ones((4, 6), np.float32).T
    assert _blas_ready(transposed) is transposed
    integers = np.ones((6, 4, 2), np.int32)[:, :, 0]
    assert _blas_ready(integers) is integers  # no BLAS for integers: nothing to copy
    got = np.asarray(lax.dot_general(strided, strided.T, (((1,), (0,)), ((), ()))))
    np.testing.assert_array_equal(got, strided @ strided.T)


def test_dot_general_inside_shard_map_on_each_device():
    mesh = meshax.make_mesh((len(meshax.devices()),), ("data",))
    n = len(meshax.devices())
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4 * n, 8)).astype(np.float32)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    P = meshax.sharding.PartitionSpec
    step = meshax.jit(meshax.shard_map(lambda x, w: x.T @ (x @ w), mesh=mesh, in_specs=(P("data"), P()),
                                       out_specs=P("data")))
    got = np.asarray(step(x, w))
    want = np.concatenate([xs.T @ (xs @ w) for xs in np.split(x, n)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_a_large_batch_of_small_products_splits_among_the_threads_free_now(threads, dtype, monkeypatch):
    """Attention's batched products (many small matrices) run as pieces of the batch side by side, one per thread
    the machine gives now, each matrix's bits what one np.matmul gives; with one thread free, one call. Eagerly,
    under jit and in shard_map, against JAX."""
    from meshax._src.primitives import cpu_kernels
    from meshax._src.runtime import compute_pool

    monkeypatch.setattr(compute_pool, "available_threads", lambda: threads)
    monkeypatch.setattr(cpu_kernels, "SPLIT_BATCH_FROM", 1 << 12)
    batches = []
    original = compute_pool.run_each

    def run_each(calls, **options):
        if calls and getattr(calls[0], "func", None) is np.matmul:  # the pieces of one product
            batches.append(len(calls))
        return original(calls, **options)

    monkeypatch.setattr(compute_pool, "run_each", run_each)
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((4, 3, 16, 16)).astype(dtype)
    if dtype is np.complex64:
        scores = scores + 1j * rng.standard_normal(scores.shape).astype(np.float32)
    values = rng.standard_normal((4, 16, 3, 8)).astype(dtype)
    numbers = (((3,), (1,)), ((0, 1), (0, 2)))
    exact = np.matmul(scores.reshape(12, 16, 16), values.transpose(0, 2, 1, 3).reshape(12, 16, 8)).reshape(4, 3, 16, 8)
    want = np.asarray(jax.lax.dot_general(scores, values, numbers, precision="highest"))
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("d",))
    P = meshax.sharding.PartitionSpec

    def product(a, b):
        return lax.dot_general(a, b, numbers)

    runs = {"eager": product, "jit": meshax.jit(product),
            "shard_map": meshax.jit(meshax.shard_map(product, mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d")))}
    for name, run in runs.items():
        batches.clear()
        got = np.asarray(run(scores, values))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        if name != "shard_map":  # on one device: split (or not) as the threads free now say, the same bits
            assert got.tobytes() == exact.tobytes()
            assert batches == ([threads] if threads > 1 else []), (name, batches)
