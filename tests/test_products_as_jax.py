"""Products and slice updates as JAX emits them (issue 41): matmul contracts a batched operand with a 2-D one
without broadcasting it; convolutions are one product over channels-last patches; a scatter of slices and integers
is one basic-indexed update. Values and gradients against JAX 0.12, eagerly, under jit, in shard_map and on a
batch split over 8 devices."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from differential import assert_matches, check_modes
from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

RNG = np.random.default_rng(41)
MODES = ("eager", "jit", "shard_map")


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


MATMUL_SHAPES = [((16, 8, 12), (12, 5)), ((12,), (3, 12, 4)), ((2, 1, 3, 4), (5, 4, 6)), ((1, 3, 4), (2, 1, 4, 5)),
                 ((7, 3, 4), (7, 4, 2)), ((3, 4), (2, 3, 4, 5)), ((1, 1, 3, 4), (1, 4, 5)), ((2, 3, 4), (4,)),
                 ((2, 1, 3, 4), (1, 6, 4, 2))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_matmul_values_and_gradients(shapes, mode):
    a, b = _normal(*shapes[0]), _normal(*shapes[1])

    def case(L, a, b):
        loss = lambda a, b: L.numpy.sum(L.numpy.sin(L.numpy.matmul(a, b)))
        return L.numpy.matmul(a, b), L.grad(loss, argnums=(0, 1))(a, b)
    check_modes(case, a, b, modes=(mode,), rtol=2e-5, atol=2e-5)


def test_matmul_with_a_matrix_is_one_product_without_broadcasting():
    x, w = np.ones((16, 128, 32), np.float32), np.ones((32, 8), np.float32)
    jaxpr = meshax.make_jaxpr(meshax.grad(lambda x, w: meshax.numpy.sum(x @ w), argnums=(0, 1)))(x, w)
    names = [eq.primitive.name for eq in jaxpr.jaxpr.equations]
    shapes = [tuple(v.aval.shape) for eq in jaxpr.jaxpr.equations for v in eq.outputs]
    assert names.count("dot_general") == 3, names
    assert (16, 32, 8) not in shapes and (16, 8, 32) not in shapes, shapes  # no weight broadcast to the batch


def test_matmul_on_a_batch_split_over_devices():
    mesh = Mesh(np.array(meshax.devices()), ("data",))
    x, w = _normal(16, 4, 6), _normal(6, 3)
    xs = meshax.device_put(x, NamedSharding(mesh, P("data")))
    loss = lambda x, w: meshax.numpy.sum(meshax.numpy.tanh(x @ w))
    value, grad = meshax.jit(meshax.value_and_grad(loss, argnums=1))(xs, w)
    want_value, want_grad = jax.value_and_grad(lambda x, w: jax.numpy.sum(jax.numpy.tanh(x @ w)), argnums=1)(x, w)
    np.testing.assert_allclose(np.asarray(value), np.asarray(want_value), rtol=2e-5)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(want_grad), rtol=2e-5, atol=2e-5)


CONVS = {
    "nhwc_same": dict(lhs=(2, 7, 6, 3), rhs=(3, 3, 3, 4), strides=(1, 1), padding="SAME",
                      dn=("NHWC", "HWIO", "NHWC")),
    "nchw_strided_dilated": dict(lhs=(2, 4, 9, 8), rhs=(6, 4, 2, 3), strides=(2, 1), padding=((1, 0), (2, 1)),
                                 dn=("NCHW", "OIHW", "NCHW"), lhs_dilation=(1, 2), rhs_dilation=(2, 1)),
    "grouped": dict(lhs=(2, 5, 5, 4), rhs=(3, 3, 2, 6), strides=(1, 1), padding="VALID",
                    dn=("NHWC", "HWIO", "NHWC"), groups=2),
    "pointwise": dict(lhs=(3, 4, 4, 5), rhs=(1, 1, 5, 2), strides=(1, 1), padding="VALID",
                      dn=("NHWC", "HWIO", "NHWC")),
    "1d_mixed_layout": dict(lhs=(4, 10, 3), rhs=(3, 2, 5), strides=(3,), padding="SAME", dn=("NWC", "IWO", "NCW")),
}


@pytest.mark.parametrize("name", sorted(CONVS))
@pytest.mark.parametrize("mode", MODES)
def test_conv_values_and_gradients(name, mode):
    spec = CONVS[name]
    lhs, rhs = _normal(*spec["lhs"]), _normal(*spec["rhs"])

    def case(L, lhs, rhs):
        def conv(lhs, rhs):
            return L.lax.conv_general_dilated(lhs, rhs, spec["strides"], spec["padding"],
                                              lhs_dilation=spec.get("lhs_dilation"),
                                              rhs_dilation=spec.get("rhs_dilation"), dimension_numbers=spec["dn"],
                                              feature_group_count=spec.get("groups", 1))
        return conv(lhs, rhs), L.grad(lambda a, b: L.numpy.sum(L.numpy.cos(conv(a, b))), argnums=(0, 1))(lhs, rhs)
    check_modes(case, lhs, rhs, modes=(mode,), rtol=2e-4, atol=2e-4)


INDEXES = [(slice(1, 4),), (slice(None, None, 2), 1), (2, slice(1, None, 3)), (slice(-3, None), slice(None, -1)),
           (slice(5, 9),), (-1,), (slice(None), slice(4, 2))]


@pytest.mark.parametrize("index", INDEXES, ids=str)
@pytest.mark.parametrize("method", ["set", "add", "mul", "max", "min"])
@pytest.mark.parametrize("mode", ("eager", "jit"))
def test_slice_updates(index, method, mode):
    x = _normal(6, 5)
    y = _normal(*np.zeros((6, 5))[index].shape) if np.zeros((6, 5))[index].ndim else np.float32(1.5)

    def case(L, x, y):
        return getattr(x.at[index], method)(y)
    check_modes(case, x, y, modes=(mode,))


def test_slice_gradient_on_a_sharded_operand():
    mesh = Mesh(np.array(meshax.devices()), ("data",))
    x = _normal(16, 6)
    f = lambda L: (lambda x: L.numpy.sum(L.numpy.exp(x[3:13:2, 1:5])))
    ours = meshax.jit(meshax.grad(f(meshax)))(meshax.device_put(x, NamedSharding(mesh, P("data"))))
    assert_matches(ours, jax.grad(f(jax))(x), rtol=2e-6)
