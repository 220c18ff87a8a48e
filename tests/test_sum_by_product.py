"""Float sums over adjacent axes as one BLAS product with ones (cpu_kernels.reduce_sum): the same sums as NumPy's
(to float rounding) and JAX's, eagerly, under jit and in shard_map, and NumPy's reduction wherever the product
does not apply."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax._src.primitives import cpu_kernels

CASES = [  # shape, axes, taken as a product
    ((64, 32, 32, 32), (0, 1, 2), True),  # a bias gradient over every position
    ((64, 32, 32, 32), (1, 2), True),  # a mean over each image's positions
    ((2048, 1024), (0,), True),  # a dense layer's bias gradient
    ((16, 128, 256), (0, 1), True),
    ((300, 64), (1,), True),  # rows along the last axis (softmax's, layer norm's)
    ((4, 80, 3, 64), (2, 3), True),  # rows along the last two axes
    ((64, 16, 32), (1,), True),
    ((64, 32, 32, 32), (0, 2), False),  # not adjacent
    ((64, 8, 64), (1,), False),  # too short a run (8 < SUM_MIN_LENGTH)
    ((32, 64), (0,), False),  # too few elements
    ((100, 64), (1,), False),  # too few rows
    ((4096,), (0,), False),  # a sum of every element stays NumPy's pairwise sum
    ((0, 64), (0,), False),
]


def _operand(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape,axes,by_product", CASES)
def test_sums_equal_numpys_and_take_the_product_where_it_applies(shape, axes, by_product, keepdims, dtype):
    x = _operand(shape, dtype)
    got = cpu_kernels.reduce_sum(x, axes, keepdims)
    want = np.add.reduce(x.astype(np.float64), axis=axes, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == x.dtype
    scale = np.sqrt(np.prod([shape[a] for a in axes]))  # the sums' size: each term ~1
    np.testing.assert_allclose(got, want, rtol=0, atol=np.finfo(dtype).eps * 8 * scale * max(1.0, scale))
    assert (cpu_kernels._summed_by_product(x, axes) is not None) == by_product


def test_a_strided_operand_is_summed_by_numpy():
    x = _operand((64, 64, 64), np.float32)[:, ::2]
    assert cpu_kernels._summed_by_product(x, (0, 1)) is None
    np.testing.assert_allclose(cpu_kernels.reduce_sum(x, (0, 1)), x.sum(axis=(0, 1)), rtol=1e-5, atol=1e-4)


def test_integer_sums_are_exact():
    x = np.random.default_rng(0).integers(-1000, 1000, (2048, 64)).astype(np.int32)
    np.testing.assert_array_equal(cpu_kernels.reduce_sum(x, (0,)), x.sum(axis=0, dtype=np.int32))


@pytest.mark.parametrize("shape,axes,by_product", [c for c in CASES if c[2]])
def test_sum_and_mean_match_jax_eagerly_and_under_jit(shape, axes, by_product):
    x = _operand(shape, np.float32)
    for reduce, jax_reduce in ((jnp.sum, jjnp.sum), (jnp.mean, jjnp.mean)):
        want = np.asarray(jax_reduce(x, axis=axes))
        for run in (lambda v: reduce(v, axis=axes), meshax.jit(lambda v: reduce(v, axis=axes))):
            got = np.asarray(run(x))
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.sqrt(x.size / want.size))


def test_a_bias_gradient_inside_shard_map_matches_jax():
    n = len(meshax.devices())
    mesh = meshax.make_mesh((n,), ("data",))
    P = meshax.sharding.PartitionSpec
    x = _operand((4 * n, 32, 32, 32), np.float32)

    def loss(b, x):
        return (jnp.tanh(x + b) ** 2).sum()

    # b is the same on every device: its gradient is summed over them (the transpose of its broadcast), as JAX's
    step = meshax.jit(meshax.shard_map(lambda x, b: meshax.grad(loss)(b, x), mesh=mesh, in_specs=(P("data"), P()),
                                       out_specs=P()))
    b = np.linspace(-1, 1, 32, dtype=np.float32)
    got = np.asarray(step(x, b))
    want = np.asarray(jax.grad(lambda b, x: (jjnp.tanh(x + b) ** 2).sum())(b, x))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
