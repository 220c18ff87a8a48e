"""meshax.numpy's print options, angle, bitwise_count, frexp, gcd, lcm, spacing, isdtype and index helpers (ix_,
*_indices_from, unravel_index, ravel_multi_index, fill_diagonal), each against real JAX: values, dtypes and weak
types, eagerly, under jit, and under vmap or grad where they apply."""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from differential import assert_matches, check_modes, run_jax, run_meshax

RNG = np.random.default_rng(13)
F32 = np.array([0.0, 1.5, -3.0, np.inf, -np.inf, np.nan, 1e-30, 7.0, 0.5, -0.0, 1e38, -2.5e-7], np.float32)
C64 = np.array([1 + 1j, -1, -2j, 0, 3 - 4j], np.complex64)
I32 = np.array([12, -18, 0, 7, 2**30, -(2**31) + 1, 45], np.int32)  # JAX's gcd never ends on the type's minimum
J32 = np.array([8, 24, 0, -21, 6, 0, -60], np.int32)


check = check_modes


def same_error(case, *args):
    """`case` raises the same exception class (and message) in meshax as in JAX."""
    with pytest.raises(Exception) as theirs:
        run_jax(case, args)
    with pytest.raises(theirs.type) as ours:
        run_meshax(case, args, "eager")
    return str(ours.value), str(theirs.value)


# print options

def test_printoptions_delegate_to_numpy():
    before = mnp.get_printoptions()
    assert before == jnp.get_printoptions() == np.get_printoptions()
    x = mnp.array([1.23456789, 2.0])
    with mnp.printoptions(precision=2, suppress=True):
        assert np.get_printoptions()["precision"] == 2
        assert "1.23" in str(x) and "1.2345" not in str(x)
    assert mnp.get_printoptions() == before
    try:
        mnp.set_printoptions(precision=3)
        assert jnp.get_printoptions()["precision"] == 3
    finally:
        np.set_printoptions(**before)


# elementwise

@pytest.mark.parametrize("x", [F32, F32.astype(np.float16), np.array([1, -2, 0], np.int32), C64],
                         ids=["f32", "f16", "i32", "c64"])
@pytest.mark.parametrize("deg", [False, True])
def test_angle(x, deg):
    check(lambda L, a: L.numpy.angle(a, deg=deg), x, rtol=1e-6 if x.dtype != np.float16 else 1e-3)


def test_angle_scalars_and_derivatives():
    check(lambda L: (L.numpy.angle(1), L.numpy.angle(-2.0, True), L.numpy.angle(1j)))
    check(lambda L, a: L.vmap(L.numpy.angle)(a), C64)
    check(lambda L, a: L.vmap(L.grad(lambda t: L.numpy.angle(t * (1 + 2j)).real))(a),
          np.array([0.5, 2.0, -1.0], np.float32), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8, np.uint32, np.bool_])
def test_bitwise_count(dtype):
    x = RNG.integers(-200, 200, 20).astype(dtype)
    x[:2] = [np.iinfo(dtype).min, np.iinfo(dtype).max] if dtype != np.bool_ else [False, True]
    check(lambda L, a: L.numpy.bitwise_count(a), x)
    check(lambda L, a: L.vmap(L.numpy.bitwise_count)(a), x, modes=("eager",))


def test_bitwise_count_scalars_and_errors():
    check(lambda L: (L.numpy.bitwise_count(5), L.numpy.bitwise_count(True), L.numpy.bitwise_count(-1)))
    same_error(lambda L, a: L.numpy.bitwise_count(a), F32)


@pytest.mark.parametrize("x", [F32, F32.astype(np.float16), np.array([1, -6, 0, 1024], np.int32),
                               RNG.standard_normal(30).astype(np.float32) * 1e6],
                         ids=["f32", "f16", "i32", "random"])
def test_frexp(x):
    check(lambda L, a: L.numpy.frexp(a), x)
    check(lambda L, a: L.vmap(L.numpy.frexp)(a), x, modes=("eager",))


def test_frexp_scalars_and_errors():
    check(lambda L: (L.numpy.frexp(3), L.numpy.frexp(1.0), L.numpy.frexp(-0.1)))
    same_error(lambda L, a: L.numpy.frexp(a), C64)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.int64])
def test_gcd_lcm(dtype):
    x, y = I32.astype(dtype), J32.astype(dtype)
    if dtype == np.int8:
        x, y = RNG.integers(-127, 128, 40).astype(dtype), RNG.integers(-127, 128, 40).astype(dtype)
    check(lambda L, a, b: (L.numpy.gcd(a, b), L.numpy.gcd(b, a)), x, y)
    small = (x % 100).astype(dtype), (y % 100).astype(dtype)
    check(lambda L, a, b: L.numpy.lcm(a, b), *small)
    check(lambda L, a, b: L.vmap(L.numpy.gcd)(a, b), x, y, modes=("eager",))


def test_gcd_lcm_broadcasting_scalars_and_errors():
    check(lambda L, a: (L.numpy.gcd(12, a), L.numpy.lcm(a, 4), L.numpy.gcd(4, 6), L.numpy.lcm(0, 0)),
          np.array([[8, -18, 0], [5, 7, 9]], np.int32))
    same_error(lambda L, a: L.numpy.gcd(a, a), F32)


@pytest.mark.parametrize("x", [F32, F32.astype(np.float16), np.array([1, -2, 0], np.int32)],
                         ids=["f32", "f16", "i32"])
def test_spacing(x):
    check(lambda L, a: L.numpy.spacing(a), x, rtol=0, atol=0)
    check(lambda L, a: L.vmap(L.numpy.spacing)(a), x, modes=("eager",), rtol=0, atol=0)


def test_spacing_scalars():
    check(lambda L: (L.numpy.spacing(1.0), L.numpy.spacing(-4), L.numpy.spacing(0.0)), rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["bool", "signed integer", "unsigned integer", "integral", "real floating",
                                  "complex floating", "numeric", ("bool", "complex floating"), np.int8,
                                  (np.float32, "unsigned integer")], ids=str)
def test_isdtype(kind):
    for dtype in (np.bool_, np.int8, np.int32, np.uint16, np.float16, jnp.bfloat16, np.float32, np.complex64):
        assert mnp.isdtype(dtype, kind) == jnp.isdtype(dtype, kind), (dtype, kind)


def test_isdtype_errors():
    for kind in ("foo", 3):
        with pytest.raises(Exception) as theirs:
            jnp.isdtype(np.float32, kind)
        with pytest.raises(theirs.type):
            mnp.isdtype(np.float32, kind)


# index helpers

def test_ix():
    check(lambda L, a, b, c: L.numpy.ix_(a, b, c), np.array([0, 1]), np.array([2, 3, 4], np.int8),
          np.array([5.0], np.float32))
    check(lambda L: L.numpy.ix_())
    check(lambda L, a, b: a[L.numpy.ix_(b, b)], RNG.standard_normal((4, 4)).astype(np.float32), np.array([3, 0]))
    same_error(lambda L, a: L.numpy.ix_(a), np.zeros((2, 2)))


@pytest.mark.parametrize("shape", [(3, 3), (2, 2, 2), (1, 1)])
def test_diag_indices_from(shape):
    check(lambda L, a: L.numpy.diag_indices_from(a), np.zeros(shape, np.float32))


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (4, 1)])
@pytest.mark.parametrize("k", [0, 1, -2])
def test_tril_triu_indices_from(shape, k):
    check(lambda L, a: (L.numpy.tril_indices_from(a, k), L.numpy.triu_indices_from(a, k=k)),
          np.zeros(shape, np.float32))


def test_indices_from_errors():
    same_error(lambda L, a: L.numpy.diag_indices_from(a), np.zeros((2, 3)))
    same_error(lambda L, a: L.numpy.tril_indices_from(a), np.zeros((2, 3, 3)))
    same_error(lambda L, a: L.numpy.triu_indices_from(a), np.zeros(3))


@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 3, 4)])  # JAX's zero-size answers are arbitrary
@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8])
def test_unravel_index(shape, dtype):
    idx = np.array([0, 5, 23, 30, 11], dtype)
    if np.issubdtype(dtype, np.signedinteger):
        idx = np.concatenate([idx, np.array([-1, -13, -30], dtype)])
    check(lambda L, a: L.numpy.unravel_index(a, shape), idx)
    check(lambda L: L.numpy.unravel_index(5, shape))
    check(lambda L, a: L.vmap(lambda i: L.numpy.unravel_index(i, shape))(a), idx, modes=("eager",))


@pytest.mark.parametrize("mode", ["clip", "wrap", "raise"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_ravel_multi_index(mode, order):
    dims = (3, 4, 5)
    coords = [RNG.integers(0, d, 10).astype(np.int32) for d in dims]
    if mode != "raise":
        coords[0][:3], coords[2][:2] = [-1, 3, 7], [-6, 12]
    modes = ("eager", "jit") if mode != "raise" else ("eager",)
    check(lambda L, a, b, c: L.numpy.ravel_multi_index((a, b, c), dims, mode=mode, order=order), *coords,
          modes=modes)
    check(lambda L: L.numpy.ravel_multi_index((1, 2, 3), dims, mode=mode, order=order), modes=modes)
    if mode == "raise":  # JAX's needs known values: traced ones fail under jit, in both
        for L in (meshax, jax):
            with pytest.raises(Exception):
                L.jit(lambda a: L.numpy.ravel_multi_index((a, a, a), dims))(L.numpy.asarray(coords[0]))


def test_ravel_multi_index_dtype_and_errors():
    coords = (np.array([1, 2], np.int8), np.array([3, 0], np.int16))
    check(lambda L, a, b: L.numpy.ravel_multi_index((a, b), (3, 4)), *coords, modes=("eager",))
    check(lambda L, a, b: L.numpy.ravel_multi_index((a, b), (3, 4), mode="clip", dtype=np.int32), *coords)
    same_error(lambda L, a, b: L.numpy.ravel_multi_index((a, b), (3, 4)), np.array([5]), np.array([1]))
    same_error(lambda L, a, b: L.numpy.ravel_multi_index((a, b), (3, 4)), np.array([1.0]), np.array([1]))


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (2, 4), (3, 3, 3)])
@pytest.mark.parametrize("val", [4, 2.5, np.array([1, 2]), np.array([[1.5], [2.5], [3.5], [4.5]])], ids=str)
def test_fill_diagonal(shape, val):
    a = RNG.standard_normal(shape).astype(np.float32)
    check(lambda L, x, v: L.numpy.fill_diagonal(x, v, inplace=False), a, np.asarray(val))
    check(lambda L, x: L.numpy.fill_diagonal(x.astype(np.int32), val, inplace=False), a)


def test_fill_diagonal_grad_vmap_and_errors():
    a = RNG.standard_normal((4, 3, 3)).astype(np.float32)
    check(lambda L, x: L.vmap(lambda m: L.numpy.fill_diagonal(m, 0.0, inplace=False))(x), a, modes=("eager",))
    check(lambda L, x: L.grad(lambda m: (L.numpy.fill_diagonal(m, 2.0, inplace=False) ** 2).sum())(x), a[0])
    same_error(lambda L, x: L.numpy.fill_diagonal(x, 1), a[0])
    same_error(lambda L, x: L.numpy.fill_diagonal(x, 1, wrap=True, inplace=False), a[0])
    same_error(lambda L, x: L.numpy.fill_diagonal(x, 1, inplace=False), a)


# construction from host data and functions, and printing

def test_array_str():
    x = np.array([[1.123456, 2.0], [1e-9, -3.5]], np.float32)
    for kwargs in ({}, {"precision": 2}, {"suppress_small": True, "max_line_width": 10}):
        assert mnp.array_str(mnp.asarray(x), **kwargs) == jnp.array_str(jnp.asarray(x), **kwargs)


@pytest.mark.parametrize("dtype,count,offset", [(np.uint8, -1, 0), (float, -1, 0), (np.int16, 2, 2),
                                                (np.float32, 1, 4)])
def test_frombuffer(dtype, count, offset):
    data = np.arange(8, dtype=np.float64).tobytes()
    assert_matches(mnp.frombuffer(data, dtype, count, offset), jnp.frombuffer(data, dtype, count, offset))


def test_fromstring_and_fromiter():
    for text, kwargs in (("1 2 3", {"sep": " "}), ("1,2,3,4", {"sep": ",", "dtype": int, "count": 3})):
        assert_matches(mnp.fromstring(text, **kwargs), jnp.fromstring(text, **kwargs))
    with pytest.raises(NotImplementedError):
        mnp.fromiter(range(3), int)
    with pytest.raises(NotImplementedError):
        jnp.fromiter(range(3), int)


FROM_FUNCTIONS = {1: lambda i: i * 2.5 - 1, 2: lambda i, j: i * 2.5 + j, 3: lambda i, j, k: i - j * k}


@pytest.mark.parametrize("shape,dtype", [((2, 3), float), ((2, 3), int), ((3,), np.int8), ((2, 2, 2), np.float32)])
def test_fromfunction(shape, dtype):
    check(lambda L: L.numpy.fromfunction(FROM_FUNCTIONS[len(shape)], shape, dtype=dtype))
    check(lambda L: L.numpy.fromfunction(lambda *coordinates: 2.5, shape, dtype=dtype))  # broadcast, as JAX's
    # JAX 0.10's fromfunction fails on any keyword argument (it hands them to vmap); meshax passes them on, as NumPy
    got = mnp.fromfunction(lambda i, j, scale: i * scale + j, (2, 3), dtype=dtype, scale=3)
    assert np.array_equal(np.asarray(got), np.fromfunction(lambda i, j, scale: i * scale + j, (2, 3), scale=3))


@pytest.mark.parametrize("shape", [(2, 4), 3, (0,), (3, 2, 2), ()])
@pytest.mark.parametrize("x", [np.arange(5, dtype=np.int32), np.ones((2, 3), np.float32) * 1.5,
                               np.array([], np.float32)], ids=["i32", "f32_2d", "empty"])
def test_resize(shape, x):
    check(lambda L, a: L.numpy.resize(a, shape), x)
    check(lambda L, a: L.vmap(lambda r: L.numpy.resize(r, shape))(a), np.stack([x, x]), modes=("eager",))


def test_resize_grad_and_errors():
    check(lambda L, a: L.grad(lambda r: (L.numpy.resize(r, (3, 3)) ** 2).sum())(a), np.arange(4, dtype=np.float32))
    same_error(lambda L, a: L.numpy.resize(a, (-1, 2)), np.arange(3))


@pytest.mark.parametrize("axes", [[0], [0, 2], [-1, 1], []], ids=str)
def test_apply_over_axes(axes):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check(lambda L, a: L.numpy.apply_over_axes(L.numpy.sum, a, axes), x, rtol=1e-5)
    check(lambda L, a: L.numpy.apply_over_axes(lambda t, ax: L.numpy.cumsum(t, ax), a, axes), x, rtol=1e-5)
    check(lambda L, a: L.grad(lambda t: L.numpy.apply_over_axes(L.numpy.max, t, axes).sum())(a), x)
    same_error(lambda L, a: L.numpy.apply_over_axes(lambda t, ax: t.sum(), a, [0, 1]), x)
