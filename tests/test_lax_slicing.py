"""meshax.lax's slicing, shape, elementwise, reduction, contraction and creation functions, differential
against jax.lax: eagerly, under jit (with traced start indices), under grad and vmap."""
from __future__ import annotations

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 5, 6)).astype(np.float32)
V = np.arange(10, dtype=np.float32)


def check(fun, *args, jit=False, rtol=1e-6):
    """fun(lib, *args) with meshax and JAX (optionally both jitted over the array arguments) agree."""
    ours_f = lambda *a: fun(meshax, *a)  # noqa: E731
    theirs_f = lambda *a: fun(jax, *a)  # noqa: E731
    if jit:
        ours_f, theirs_f = meshax.jit(ours_f), jax.jit(theirs_f)
    ours = ours_f(*[jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args])
    theirs = theirs_f(*[jjnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args])
    ours_l, theirs_l = jax.tree.leaves(ours), jax.tree.leaves(theirs)
    assert len(ours_l) == len(theirs_l)
    for o, t in zip(ours_l, theirs_l):
        assert o.shape == t.shape and np.dtype(o.dtype) == np.dtype(t.dtype), (o, t)
        assert bool(getattr(o, "weak_type", False)) == bool(getattr(t, "weak_type", False)), (o, t)
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=rtol, atol=1e-6)


STARTS = [(0, 0, 0), (1, 2, 3), (3, 4, 5), (-1, -2, 0), (10, 10, 10), (-10, 0, 2)]


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_slice(starts, jit):
    check(lambda lib, x, *s: lib.lax.dynamic_slice(x, s, (2, 3, 4)), X, *[np.int32(s) for s in starts], jit=jit)
    check(lambda lib, x, s: lib.lax.dynamic_slice(x, (s, 1, 0), (2, 3, 4)), X, np.int32(starts[0]), jit=jit)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_update_slice(starts, jit):
    update = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check(lambda lib, x, u, *s: lib.lax.dynamic_update_slice(x, u, s), X, update,
          *[np.int32(s) for s in starts], jit=jit)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("index", [0, 3, -1, 7, 12])
def test_in_dim_variants(index, jit):
    i = np.int32(index)
    check(lambda lib, x, i: lib.lax.dynamic_slice_in_dim(x, i, 3), V, i, jit=jit)
    check(lambda lib, x, i: lib.lax.dynamic_slice_in_dim(x, i, 2, axis=1), X, i, jit=jit)
    check(lambda lib, x, i: lib.lax.dynamic_index_in_dim(x, i, 2, keepdims=False), X, i, jit=jit)
    check(lambda lib, x, i: lib.lax.dynamic_index_in_dim(x, i, 0), X, i, jit=jit)
    check(lambda lib, x, u, i: lib.lax.dynamic_update_slice_in_dim(x, u, i, 1), X, np.ones((4, 2, 6), np.float32),
          i, jit=jit)
    check(lambda lib, x, u, i: lib.lax.dynamic_update_index_in_dim(x, u, i, 0), X, np.ones((5, 6), np.float32), i,
          jit=jit)


def test_dynamic_slicing_under_grad_and_vmap():
    def loss(lib, x, i):
        y = lib.lax.dynamic_slice(x, (i, 0, 1), (2, 5, 3))
        z = lib.lax.dynamic_update_slice(x, y * 2, (0, 0, i))
        return (z ** 2).sum() + y.sum()

    for i in [0, 1, 3, -1]:
        for jit in [False, True]:
            check(lambda lib, x, i: lib.grad(lambda x: loss(lib, x, i))(x), X, np.int32(i), jit=jit, rtol=1e-5)
    check(lambda lib, x, s: lib.vmap(lambda i: lib.lax.dynamic_slice_in_dim(x, i, 2))(s), V,
          np.array([0, 3, 9, -1], np.int32))
    check(lambda lib, x, s: lib.vmap(lambda r, i: lib.lax.dynamic_update_slice(r, r[:2] * 0, (i,)))(x, s),
          X[:, 0, :], np.array([0, 3, 9, -1], np.int32))


@pytest.mark.parametrize("jit", [False, True])
def test_static_slicing_and_shapes(jit):
    check(lambda lib, x: lib.lax.slice(x, (1, 0, 2), (3, 5, 6)), X, jit=jit)
    check(lambda lib, x: lib.lax.slice(x, (0, 1, 0), (4, 5, 6), (2, 2, 3)), X, jit=jit)
    check(lambda lib, x: lib.lax.slice_in_dim(x, 1, 4, axis=1), X, jit=jit)
    check(lambda lib, x: lib.lax.slice_in_dim(x, -3, None, stride=2, axis=2), X, jit=jit)
    check(lambda lib, x: lib.lax.index_in_dim(x, -1, axis=1), X, jit=jit)
    check(lambda lib, x: lib.lax.index_in_dim(x, 2, axis=2, keepdims=False), X, jit=jit)
    check(lambda lib, x: lib.lax.squeeze(lib.lax.expand_dims(x, (0, 2)), (0,)), X, jit=jit)
    check(lambda lib, x: lib.lax.concatenate([x, x * 2], 1), X, jit=jit)
    check(lambda lib, x: lib.lax.reshape(x, (20, 6)), X, jit=jit)
    check(lambda lib, x: lib.lax.reshape(x, (6, 20), dimensions=(2, 0, 1)), X, jit=jit)
    check(lambda lib, x: lib.lax.transpose(x, (2, 0, 1)), X, jit=jit)
    check(lambda lib, x: lib.lax.broadcast_in_dim(x[:, :1], (3, 4, 7, 6), (1, 2, 3)), X, jit=jit)
    check(lambda lib, x: lib.lax.broadcast(x, (2,)), X, jit=jit)
    check(lambda lib, x: lib.lax.rev(x, (0, 2)), X, jit=jit)
    check(lambda lib, x: lib.lax.collapse(x, 1), X, jit=jit)


@pytest.mark.parametrize("config", [[(1, 2, 0)], [(0, 0, 1)], [(2, -1, 2)], [(-2, 3, 0)], [(1, 1, 1)]])
def test_pad(config):
    check(lambda lib, x: lib.lax.pad(x, np.float32(-1), config), V)
    check(lambda lib, x: lib.lax.pad(x, np.float32(0), config + [(1, 0, 1)]), X[0], jit=True)
    check(lambda lib, x: lib.grad(lambda x: (lib.lax.pad(x, np.float32(0), config) ** 2).sum())(x), V)


UNARY = ["exp", "log", "sin", "cos", "tan", "tanh", "sinh", "cosh", "asinh", "atan", "logistic", "erf", "abs", "sign",
         "square", "sqrt", "rsqrt", "neg", "floor", "ceil", "log1p", "expm1", "exp2", "cbrt", "reciprocal", "round",
         "is_finite"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    x = np.abs(X[0]) + 0.1
    check(lambda lib, x: getattr(lib.lax, name)(x), x, rtol=2e-6)
    check(lambda lib, x: getattr(lib.lax, name)(x), x, jit=True, rtol=2e-6)
    if name not in ("is_finite", "sign", "floor", "ceil", "round"):
        check(lambda lib, x: lib.grad(lambda x: getattr(lib.lax, name)(x).sum())(x), x, rtol=1e-5)


BINARY = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("name", BINARY)
def test_binary(name):
    a, b = np.abs(X[0]) + 0.5, np.abs(X[1]) + 0.5
    check(lambda lib, a, b: getattr(lib.lax, name)(a, b), a, b, rtol=2e-6)
    check(lambda lib, a: getattr(lib.lax, name)(a, 2.0), a, jit=True, rtol=2e-6)
    ints = np.array([-7, 7, -8, 9, 5], np.int32), np.array([2, -2, 3, 4, -5], np.int32)
    if name not in ("pow", "atan2"):
        check(lambda lib, a, b: getattr(lib.lax, name)(a, b), *ints)


def test_integer_ops_and_dtype_rules():
    a, b = np.array([-8, 7, 3], np.int32), np.array([1, 2, 3], np.int32)
    for name in ["shift_left", "shift_right_arithmetic", "shift_right_logical", "bitwise_and", "bitwise_or",
                 "bitwise_xor"]:
        check(lambda lib, a, b: getattr(lib.lax, name)(a, b), a, b)
    check(lambda lib, a: lib.lax.bitwise_not(a), a)
    check(lambda lib: (lib.lax.mul(2, 3), lib.lax.add(np.float32(1), 2.0), lib.lax.integer_pow(np.int32(3), 3)))
    check(lambda lib, x: (lib.lax.integer_pow(x, 3), lib.lax.integer_pow(x, -2), lib.lax.integer_pow(x, 0)), V + 1)
    check(lambda lib, x: lib.grad(lambda x: lib.lax.integer_pow(x, 3).sum())(x), V)
    check(lambda lib, x: lib.lax.clamp(np.float32(2), x, np.float32(5)), V)
    check(lambda lib: lib.lax.round(np.float32(2.5), lib.lax.RoundingMethod.TO_NEAREST_EVEN))
    for lib in (meshax, jax):
        with pytest.raises(TypeError):
            lib.lax.add(np.float32(1), np.int32(2))
        with pytest.raises(TypeError):
            lib.lax.add(1.0, 2)


@pytest.mark.parametrize("jit", [False, True])
def test_reductions_contractions_creation(jit):
    for name in ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"]:
        check(lambda lib, x: getattr(lib.lax, name)(x, (0, 2)), X, jit=jit, rtol=1e-5)
    check(lambda lib, x: (lib.lax.reduce_and(x > 0, (1,)), lib.lax.reduce_or(x > 0, (1,))), X, jit=jit)
    check(lambda lib, x: (lib.lax.argmax(x, 1, np.int32), lib.lax.argmin(x, 2, np.int32)), X, jit=jit)
    check(lambda lib, x: (lib.lax.cumsum(x, 1), lib.lax.cummax(x, 2, reverse=True)), X, jit=jit, rtol=1e-5)
    y = RNG.standard_normal((4, 6, 3)).astype(np.float32)
    check(lambda lib, x, y: lib.lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))), X, y, jit=jit, rtol=1e-5)
    check(lambda lib, a, b: lib.lax.dot(a, b), X[0], y[0], jit=jit, rtol=1e-5)
    check(lambda lib, a, b: lib.lax.dot(a[0], b[:, 0]), X[0], y[0], jit=jit, rtol=1e-5)
    check(lambda lib, x: lib.lax.convert_element_type(x, np.int32), X * 3, jit=jit)
    check(lambda lib: (lib.lax.convert_element_type(2.5, np.int32), lib.lax.convert_element_type(2, np.float32)),
          jit=jit)
    check(lambda lib: (lib.lax.iota(np.int32, 5), lib.lax.broadcasted_iota(np.float32, (2, 3), 1)), jit=jit)
    check(lambda lib, x: (lib.lax.full((2, 3), 7), lib.lax.full((2,), 1.5, np.float32), lib.lax.full_like(x, 2)),
          V, jit=jit)
