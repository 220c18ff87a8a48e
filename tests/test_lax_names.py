"""jax.lax names added for JAX 0.12 (issue 40), against JAX: the option types (AccuracyMode, Tolerance, DotAlgorithm,
DotAlgorithmPreset, FftType, RandomAlgorithm, RaggedDotDimensionNumbers), the elementwise functions (log2,
one_minus_square, polynomial, igamma_grad_a, random_gamma_grad, stage), rng_bit_generator (bit for bit), rng_uniform,
tokens, conv_transpose_shape_tuple, conv_general_dilated_local, scaled_dot and fft with FftType: values, dtypes,
shapes and weak types eagerly and under jit, grad and vmap where JAX defines them, errors of the same class."""
from __future__ import annotations

import dataclasses
import types
import warnings
from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

import meshax
import meshax.lax
import meshax.numpy
from differential import assert_matches
from meshax._src.lax import fft as mfft
from meshax._src.lax import lax_more_elementwise, lax_more_enums, lax_more_ops, lax_more_random

# meshax.lax with this names (the lead wires them into meshax/lax.py; the tests import them directly)
MLAX = types.SimpleNamespace(**{n: getattr(meshax.lax, n) for n in dir(meshax.lax) if not n.startswith("_")})
for _module in (lax_more_elementwise, lax_more_enums, lax_more_ops, lax_more_random):
    MLAX.__dict__.update({n: getattr(_module, n) for n in _module.__all__})
MLAX.fft = mfft.fft
M = types.SimpleNamespace(lax=MLAX, numpy=meshax.numpy, jit=meshax.jit, grad=meshax.grad, vmap=meshax.vmap)
J = types.SimpleNamespace(lax=jax.lax, numpy=jax.numpy, jit=jax.jit, grad=jax.grad, vmap=jax.vmap)
MODES = ("eager", "jit")
_rng = np.random.default_rng(0)


def same(case: Any, *args: Any, mode: str = "eager", **tolerances: Any) -> None:
    """`case(L, *args)` with L the meshax and the JAX namespaces (meshax eagerly or jitted) agree: tree, shapes,
    dtypes, weak types and values."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        theirs = case(J, *[jax.numpy.asarray(a) if isinstance(a, np.ndarray) else a for a in args])
        margs = [meshax.numpy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        ours = case(M, *margs) if mode == "eager" else M.jit(lambda *xs: case(M, *xs))(*margs)
    assert_matches(ours, theirs, **tolerances)


def raises_alike(case: Any, error: type, *args: Any) -> None:
    for L in (M, J):
        with pytest.raises(error):
            case(L, *args)


# ---- the option types ----------------------------------------------------------------------------------------------

ENUMS = ["AccuracyMode", "DotAlgorithmPreset", "FftType", "RandomAlgorithm"]


@pytest.mark.parametrize("name", ENUMS)
def test_enum_members_and_values(name):
    ours, theirs = getattr(MLAX, name), getattr(jax.lax, name)
    assert [(m.name, m.value) for m in ours] == [(m.name, m.value) for m in theirs]
    for a, b in zip(ours, theirs):
        assert str(a) == str(b) and repr(a) == repr(b)
    assert issubclass(ours, int) == issubclass(theirs, int)


def _dtype_names(types_: Any) -> Any:
    return None if types_ is None else tuple(np.dtype(t).name for t in types_)


@pytest.mark.parametrize("member", [m.name for m in jax.lax.DotAlgorithmPreset])
def test_dot_algorithm_preset_types(member):
    ours, theirs = MLAX.DotAlgorithmPreset[member], jax.lax.DotAlgorithmPreset[member]
    assert _dtype_names(ours.supported_lhs_types) == _dtype_names(theirs.supported_lhs_types)
    assert _dtype_names(ours.supported_rhs_types) == _dtype_names(theirs.supported_rhs_types)
    accumulation = [None if p.accumulation_type is None else np.dtype(p.accumulation_type) for p in (ours, theirs)]
    assert accumulation[0] == accumulation[1]
    outputs = [p.supported_output_types(np.float32, np.float32) for p in (ours, theirs)]
    assert _dtype_names(outputs[0]) == _dtype_names(outputs[1])


@pytest.mark.parametrize("kwargs", [{}, {"lhs_component_count": 3}, {"allow_imprecise_accumulation": True},
                                    {"num_primitive_operations": 6, "rhs_component_count": 2}])
def test_dot_algorithm(kwargs):
    ours = MLAX.DotAlgorithm(np.float32, np.float32, np.float32, **kwargs)
    theirs = jax.lax.DotAlgorithm(np.float32, np.float32, np.float32, **kwargs)
    assert ours._fields == theirs._fields and tuple(ours) == tuple(theirs)
    assert ours == MLAX.DotAlgorithm(np.float32, np.float32, np.float32, **kwargs)


@pytest.mark.parametrize("kwargs", [{"atol": 1e-3}, {"rtol": 0.5, "ulps": 2}, {"atol": 1.0, "rtol": 1.0,
                                                                                 "ulps": 1}])
def test_tolerance(kwargs):
    ours, theirs = MLAX.Tolerance(**kwargs), jax.lax.Tolerance(**kwargs)
    assert (ours.atol, ours.rtol, ours.ulps) == (theirs.atol, theirs.rtol, theirs.ulps)


@pytest.mark.parametrize("kwargs", [{"atol": -1.0}, {"rtol": -0.1}, {"ulps": -1}, {}])
def test_tolerance_refuses(kwargs):
    for L in (MLAX, jax.lax):
        with pytest.raises(ValueError):
            L.Tolerance(**kwargs)


@pytest.mark.parametrize("numbers", [((([1], [1]), ([], [])), [0], [0]), ((([2], [1]), ([0], [0])), (1,), (1,)),
                                     ((((1,), [0]), ([], [])), [1], [])])
def test_ragged_dot_dimension_numbers(numbers):
    ours, theirs = MLAX.RaggedDotDimensionNumbers(*numbers), jax.lax.RaggedDotDimensionNumbers(*numbers)
    fields = [f.name for f in dataclasses.fields(theirs)]
    assert [f.name for f in dataclasses.fields(ours)] == fields
    assert [getattr(ours, f) for f in fields] == [getattr(theirs, f) for f in fields]
    assert ours == MLAX.RaggedDotDimensionNumbers(*numbers) and hash(ours) == hash(MLAX.RaggedDotDimensionNumbers(
        *numbers))


# ---- elementwise -------------------------------------------------------------------------------------------------

FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
SHAPES = [(), (3,), (2, 3)]


def _values(shape: tuple, dtype: Any, low: float = 0.1, high: float = 3.0) -> np.ndarray:
    return _rng.uniform(low, high, size=shape).astype(dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS + [np.complex64])
def test_log2(dtype, shape, mode):
    same(lambda L, x: L.lax.log2(x), _values(shape, dtype), mode=mode, rtol=1e-2 if dtype != np.float32 else 2e-6)


@pytest.mark.parametrize("value", [3.0, 0.5, 1])
def test_log2_scalars_and_accuracy(value):
    if isinstance(value, int):
        raises_alike(lambda L, v: L.lax.log2(v), TypeError, value)
        return
    same(lambda L, v: L.lax.log2(v), value)
    same(lambda L, v: L.lax.log2(v, accuracy=L.lax.AccuracyMode.HIGHEST), value)
    same(lambda L, v: L.grad(L.lax.log2)(v), value)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS + [np.complex64, np.int32])
def test_one_minus_square(dtype, shape, mode):
    x = (_rng.integers(-5, 5, size=shape) if dtype == np.int32 else _values(shape, dtype, -2, 2)).astype(dtype)
    same(lambda L, v: L.lax.one_minus_square(v), x, mode=mode, rtol=1e-2)


@pytest.mark.parametrize("value", [0.5, -1.5, np.float32(2.0)])
def test_one_minus_square_derivatives(value):
    same(lambda L, v: L.grad(L.lax.one_minus_square)(v), value)
    same(lambda L, v: L.vmap(L.grad(L.lax.one_minus_square))(v), np.array([0.5, -2.0, 3.0], np.float32))


COEFFS = {
    "ints": [1, 2, 3],
    "floats": [0.5, -1.0, 2.0, 0.25],
    "one": [3.0],
    "empty": [],
    "arrays": [np.float32(1.0), np.arange(3, dtype=np.float32)],
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("coeffs", sorted(COEFFS))
@pytest.mark.parametrize("x", [np.float32(2.0), 2.0, np.array([0.5, -1.0, 2.0], np.float32), 3])
def test_polynomial(x, coeffs, mode):
    if isinstance(x, int) and coeffs not in ("ints", "empty"):
        return  # float coefficients converted to an integer x's dtype: JAX warns or refuses alike
    if isinstance(x, (int, float)) and coeffs == "one":
        return  # JAX returns the Python scalar coefficient itself; meshax a weakly typed scalar array
    same(lambda L, v: L.lax.polynomial(v, COEFFS[coeffs]), x, mode=mode, rtol=1e-6)  # coefficients not traced


@pytest.mark.parametrize("coeffs", ["floats", "one", "arrays"])
def test_polynomial_derivatives(coeffs):
    c = [np.asarray(v, np.float32) for v in COEFFS[coeffs]]
    x = np.float32(1.5)
    same(lambda L, v, *cs: L.grad(lambda a, *b: L.numpy.sum(L.lax.polynomial(a, list(b))), argnums=tuple(
        range(len(cs) + 1)))(v, *cs), x, *c, rtol=1e-6)
    same(lambda L, v, *cs: L.vmap(lambda a: L.lax.polynomial(a, list(cs)))(v), np.array([0.5, 1.0], np.float32),
         *c, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("a", [0.3, 1.0, 2.5, 10.0])
def test_igamma_grad_a(a, dtype, mode):
    x = np.array([0.1, 0.7, 1.5, 4.0, 12.0], dtype)
    same(lambda L, a_, x_: L.lax.igamma_grad_a(a_, x_), np.full(5, a, dtype), x, mode=mode,
         rtol=1e-3 if dtype == np.float16 else 5e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("a", [0.5, 3.0, 20.0])
def test_random_gamma_grad(a, mode):
    x = np.array([0.2, 0.9, 2.0, 5.0], np.float32)
    same(lambda L, a_, x_: L.lax.random_gamma_grad(a_, x_), np.full(4, a, np.float32), x, mode=mode, rtol=5e-5)


@pytest.mark.parametrize("name", ["igamma_grad_a", "random_gamma_grad"])
def test_gamma_grads_refuse(name):
    one = np.array([2.0], np.float32)
    raises_alike(lambda L: getattr(L.lax, name)(np.array([2], np.int32), np.array([1], np.int32)), TypeError)
    raises_alike(lambda L: getattr(L.lax, name)(one, one.astype(np.float16)), TypeError)
    if name == "igamma_grad_a":  # JAX's random_gamma_grad is a while loop: reverse mode refuses with ValueError
        raises_alike(lambda L: L.grad(lambda a: getattr(L.lax, name)(a, one).sum())(one), NotImplementedError)


@pytest.mark.parametrize("value", [2.0, 3, True, np.float32(1.5), np.arange(3), np.ones((2, 2), np.float16)])
def test_stage(value):
    same(lambda L, v: L.lax.stage(v), value)
    same(lambda L, v: L.jit(lambda: L.lax.stage(v))(), value)


# ---- rng_bit_generator, rng_uniform ------------------------------------------------------------------------------

KEYS = [[1, 2, 3, 4], [0xDEADBEEF, 7, 0xFFFFFFFE, 0xFFFFFFFF]]  # the second's counter carries into its high word
BIT_SHAPES = [(), (5,), (2, 3), (3, 7), (4, 5, 3)]
BIT_CASES = [(np.uint32, "eager", "RNG_DEFAULT"), (np.uint8, "jit", "RNG_THREE_FRY"),
             (np.uint16, "eager", "RNG_THREE_FRY"), (np.uint32, "jit", "RNG_PHILOX")]


@pytest.mark.parametrize("dtype,mode,algorithm", BIT_CASES)
@pytest.mark.parametrize("shape", BIT_SHAPES)
@pytest.mark.parametrize("key", range(len(KEYS)))
def test_rng_bit_generator_bits(key, shape, dtype, mode, algorithm):
    same(lambda L, k: L.lax.rng_bit_generator(k, shape, dtype, getattr(L.lax.RandomAlgorithm, algorithm)),
         np.array(KEYS[key], np.uint32), mode=mode, rtol=0, atol=0)


def test_rng_bit_generator_keywords_and_errors():
    key = np.array(KEYS[0], np.uint32)
    same(lambda L, k: L.lax.rng_bit_generator(k, shape=(3,), algorithm=L.lax.RandomAlgorithm.RNG_THREE_FRY), key)
    for shape in [(0,), (2, 0)]:
        same(lambda L, k: L.lax.rng_bit_generator(k, shape), key)
    with pytest.warns(UserWarning):
        ours = MLAX.rng_bit_generator(key, (2,), np.uint64)
    assert ours[1].dtype == np.uint32
    for dtype in (np.int32, np.float32):
        raises_alike(lambda L: L.lax.rng_bit_generator(key, (2,), dtype), TypeError)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bounds", [(np.float32(0), np.float32(1)), (np.float32(-2), np.float32(3)),
                                    (np.float16(1), np.float16(2)), (np.int32(0), np.int32(10))])
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_rng_uniform(shape, bounds, mode):
    a, b = bounds
    run = (lambda f: f()) if mode == "eager" else (lambda f: meshax.jit(f)())
    ours, theirs = run(lambda: MLAX.rng_uniform(a, b, shape)), jax.lax.rng_uniform(a, b, shape)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype and ours.weak_type == theirs.weak_type
    values = np.asarray(ours)
    assert ((values >= a) & (values < b)).all()


def test_rng_uniform_refuses():
    raises_alike(lambda L: L.lax.rng_uniform(np.float32(0), np.int32(1), (2,)), ValueError)
    raises_alike(lambda L: L.grad(lambda a: L.lax.rng_uniform(a, np.float32(1), ()))(np.float32(0)),
                 NotImplementedError)


# ---- tokens ----------------------------------------------------------------------------------------------------------


def test_tokens():
    for L in (M, J):
        token = L.lax.create_token()
        assert type(L.lax.after_all(token, token)) is type(token)
        assert type(L.lax.after_all()) is type(token)
        assert type(L.jit(lambda: L.lax.create_token())()) is type(token)
        assert type(L.lax.create_token(1.0)) is type(token)
        with pytest.raises(TypeError):
            L.lax.after_all(1.0)


# ---- convolutions, scaled_dot, fft ------------------------------------------------------------------------------

TRANSPOSE_SHAPES = [
    ((1, 8, 8, 3), (3, 3, 3, 5), (2, 2), "SAME", ("NHWC", "HWIO", "NHWC")),
    ((1, 8, 8, 3), (3, 3, 3, 5), (2, 2), "VALID", ("NHWC", "HWIO", "NHWC")),
    ((1, 3, 8, 9), (5, 3, 3, 2), (2, 1), [(1, 2), (0, 0)], ("NCHW", "OIHW", "NCHW")),
    ((2, 4, 7), (6, 4, 3), (3,), "SAME", ("NCH", "OIH", "NCH")),
    ((2, 7, 4), (3, 4, 6), (1,), [(2, 2)], ("NHC", "HIO", "NCH")),
]


@pytest.mark.parametrize("case", range(len(TRANSPOSE_SHAPES)))
def test_conv_transpose_shape_tuple(case):
    assert MLAX.conv_transpose_shape_tuple(*TRANSPOSE_SHAPES[case]) == tuple(
        int(n) for n in jax.lax.conv_transpose_shape_tuple(*TRANSPOSE_SHAPES[case]))


LOCAL = [  # (lhs shape, rhs shape, strides, padding, filter shape, lhs dilation, rhs dilation, dimension numbers)
    ((2, 3, 6, 5), (4, 18, 4, 4), (1, 1), "VALID", (3, 2), None, None, None),
    ((2, 6, 5, 3), (4, 4, 18, 4), (1, 1), "VALID", (3, 2), None, None, ("NHWC", "HWIO", "NHWC")),
    ((1, 2, 7, 6), (3, 8, 4, 3), (2, 2), "SAME", (2, 2), None, None, None),
    ((1, 2, 5, 5), (3, 8, 3, 5), (1, 1), [(0, 0), (1, 0)], (2, 2), None, (2, 1), None),
    ((2, 3, 9), (5, 9, 7), (1,), "VALID", (3,), None, None, None),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", range(len(LOCAL)))
def test_conv_general_dilated_local(case, mode):
    lhs_shape, rhs_shape, strides, padding, filt, lhs_dil, rhs_dil, dn = LOCAL[case]
    lhs, rhs = _rng.normal(size=lhs_shape).astype(np.float32), _rng.normal(size=rhs_shape).astype(np.float32)

    def case_(L, x, w):
        return L.lax.conv_general_dilated_local(x, w, strides, padding, filt, lhs_dil, rhs_dil, dn)

    same(case_, lhs, rhs, mode=mode, rtol=1e-5, atol=1e-5)
    if mode == "eager" and case in (1, 3):
        same(lambda L, x, w: L.grad(lambda a, b: (case_(L, a, b) ** 2).sum(), (0, 1))(x, w), lhs, rhs, rtol=1e-4,
             atol=1e-4)


SCALED = [  # lhs shape, rhs shape, lhs scale shape, rhs scale shape, dimension numbers
    ((4, 8), (8, 3), (4, 2), (2, 3), None),
    ((2, 4, 16), (2, 16, 3), (2, 4, 4), (2, 4, 3), None),
    ((4, 8), (3, 8), (4, 1), (3, 2), (((1,), (1,)), ((), ()))),
]


@pytest.mark.parametrize("preferred,scales,mode", [(None, False, "eager"), (None, True, "jit"),
                                                   (np.float32, True, "eager")])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.float8_e4m3fn])
@pytest.mark.parametrize("case", range(len(SCALED)))
def test_scaled_dot(case, dtype, preferred, scales, mode):
    ls, rs, lss, rss, dn = SCALED[case]
    lhs, rhs = _rng.normal(size=ls).astype(dtype), _rng.normal(size=rs).astype(dtype)
    lsc, rsc = _rng.uniform(0.5, 2, size=lss).astype(np.float32), _rng.uniform(0.5, 2, size=rss).astype(np.float32)
    if not scales:
        lsc = rsc = None
    same(lambda L, a, b: L.lax.scaled_dot(a, b, lhs_scale=lsc, rhs_scale=rsc, dimension_numbers=dn,
                                          preferred_element_type=preferred), lhs, rhs, mode=mode, rtol=1e-5,
         atol=1e-5)


FFTS = [("FFT", (2, 8), np.complex64, (8,)), ("IFFT", (3, 4, 6), np.complex64, (4, 6)),
        ("RFFT", (2, 8), np.float32, (8,)), ("IRFFT", (2, 5), np.complex64, (8,))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spelling", ["enum", "string"])
@pytest.mark.parametrize("case", range(len(FFTS)))
def test_fft(case, spelling, mode):
    kind, shape, dtype, lengths = FFTS[case]
    x = (_rng.normal(size=shape) + (1j * _rng.normal(size=shape) if dtype == np.complex64 else 0)).astype(dtype)
    same(lambda L, v: L.lax.fft(v, getattr(L.lax.FftType, kind) if spelling == "enum" else kind, lengths), x,
         mode=mode, rtol=1e-5, atol=1e-5)
