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
