"""meshax._src.core.dtypes checked against real JAX (used only as a test oracle)."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from hypothesis import given, settings, strategies as st  # noqa: E402

from meshax._src.core import dtypes  # noqa: E402
from meshax._src.config import config  # noqa: E402

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

STANDARD_DTYPES = [
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64, np.complex64, np.complex128,
    )
]
PYTHON_TYPES = [bool, int, float, complex]
PYTHON_VALUES = [True, 1, 1.0, 1j]

EXTENDED_NAMES = [
    "bfloat16", "int1", "uint1", "int2", "uint2", "int4", "uint4", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3b11fnuz", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e3m4", "float8_e4m3",
    "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
]
EXTENDED_DTYPES = [
    np.dtype(getattr(ml_dtypes, n)) for n in EXTENDED_NAMES if ml_dtypes is not None and hasattr(ml_dtypes, n)
]


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request):
    """Set x64 in both meshax and jax, restoring both afterwards."""
    old_meshax = config.read("jax_enable_x64")
    old_jax = jax.config.read("jax_enable_x64")
    config.update("jax_enable_x64", request.param)
    jax.config.update("jax_enable_x64", request.param)
    try:
        yield request.param
    finally:
        config.update("jax_enable_x64", old_meshax)
        jax.config.update("jax_enable_x64", old_jax)


def _outcome(fn, *args):
    """fn(*args) or the kind of error it raised (promotion errors are ValueErrors in both)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args)
        except ValueError:
            return "ValueError"
        except TypeError:
            return "TypeError"


def jax_result_type(*args):
    from jax._src import dtypes as jax_dtypes

    dt, weak = jax_dtypes.result_type(*args, return_weak_type_flag=True)
    return np.dtype(dt), bool(weak)


def jax_asarray(x):
    a = jnp.asarray(x)
    return np.dtype(a.dtype), bool(a.weak_type)


def _jax_weak_array(kind):
    return {"i": jnp.asarray(1), "f": jnp.asarray(1.0), "c": jnp.asarray(1j)}[kind]


def result_type_args():
    """Arguments for result_type in every representation: dtypes, arrays, scalars, types, weak arrays."""
    args = []
    for dt in STANDARD_DTYPES:
        args.append(dt)
        args.append(np.zeros((2,), dt))
        args.append(dt.type(1))
    args += PYTHON_TYPES + PYTHON_VALUES + [None, "int16", "float32"]
    return args


# ---------------------------------------------------------------------------
# canonicalize_dtype and defaults


def test_canonicalize_dtype_matches_jax(x64):
    for dt in STANDARD_DTYPES + EXTENDED_DTYPES + PYTHON_TYPES + ["int64", "f8", "c16", np.float64]:
        expected = np.dtype(jax.dtypes.canonicalize_dtype(dt))
        assert dtypes.canonicalize_dtype(dt) == expected, dt


def test_canonicalize_dtype_explicit(x64):
    wide = {np.int64: np.int32, np.uint64: np.uint32, np.float64: np.float32, np.complex128: np.complex64}
    for big, small in wide.items():
        assert dtypes.canonicalize_dtype(big) == np.dtype(big if x64 else small)
    for narrow in (np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
                   np.float16, np.float32, np.complex64):
        assert dtypes.canonicalize_dtype(narrow) == np.dtype(narrow)
    assert dtypes.canonicalize_dtype(int) == np.dtype(np.int64 if x64 else np.int32)
    assert dtypes.canonicalize_dtype(float) == np.dtype(np.float64 if x64 else np.float32)
    assert dtypes.canonicalize_dtype(complex) == np.dtype(np.complex128 if x64 else np.complex64)
    assert dtypes.canonicalize_dtype(bool) == np.dtype(bool)
    assert isinstance(dtypes.canonicalize_dtype("int64"), np.dtype)


def test_defaults(x64):
    assert dtypes.default_int_dtype() == np.dtype("int64" if x64 else "int32")
    assert dtypes.default_uint_dtype() == np.dtype("uint64" if x64 else "uint32")
    assert dtypes.default_float_dtype() == np.dtype("float64" if x64 else "float32")
    assert dtypes.default_complex_dtype() == np.dtype("complex128" if x64 else "complex64")
    assert dtypes.x64_enabled() is x64


def test_flag_is_read_at_call_time():
    old = config.read("jax_enable_x64")
    try:
        config.update("jax_enable_x64", False)
        assert dtypes.canonicalize_dtype(np.float64) == np.float32
        assert dtypes.result_type(1.0) == (np.float32, True)
        config.update("jax_enable_x64", True)
        assert dtypes.canonicalize_dtype(np.float64) == np.float64
        assert dtypes.result_type(1.0) == (np.float64, True)
    finally:
        config.update("jax_enable_x64", old)


# ---------------------------------------------------------------------------
# promote_types


def test_promote_types_all_pairs_match_jax(x64):
    specs = STANDARD_DTYPES + PYTHON_TYPES
    mismatches = []
    for a, b in itertools.product(specs, repeat=2):
        got = _outcome(dtypes.promote_types, a, b)
        want = _outcome(lambda a, b: np.dtype(jnp.promote_types(a, b)), a, b)
        if got != want:
            mismatches.append((a, b, got, want))
    assert not mismatches, mismatches[:20]


@pytest.mark.skipif(not EXTENDED_DTYPES, reason="ml_dtypes not installed")
def test_promote_types_extended_dtypes_match_jax(x64):
    specs = STANDARD_DTYPES + PYTHON_TYPES + EXTENDED_DTYPES
    mismatches = []
    for a, b in itertools.product(specs, repeat=2):
        if a not in EXTENDED_DTYPES and b not in EXTENDED_DTYPES:
            continue
        got = _outcome(dtypes.promote_types, a, b)
        want = _outcome(lambda a, b: np.dtype(jnp.promote_types(a, b)), a, b)
        if got != want:
            mismatches.append((a, b, got, want))
    assert not mismatches, mismatches[:20]


def test_promote_types_examples(x64):
    assert dtypes.promote_types(np.uint8, np.int8) == np.int16
    # JAX's one x64-dependent lattice edge; otherwise promote_types ignores the flag.
    assert dtypes.promote_types(np.uint32, np.int32) == (np.int64 if x64 else np.int32)
    assert dtypes.promote_types(np.uint32, np.int64) == np.int64
    assert dtypes.promote_types(np.uint64, np.int64) == np.float64
    assert dtypes.promote_types(np.int32, np.float16) == np.float16
    assert dtypes.promote_types(np.float32, np.complex64) == np.complex64
    assert dtypes.promote_types(np.float64, np.complex64) == np.complex128
    assert dtypes.promote_types(int, np.int8) == np.int8
    assert dtypes.promote_types(float, np.float16) == np.float16
    assert dtypes.promote_types(int, float) == np.float64


def test_promote_types_errors():
    with pytest.raises(ValueError):
        dtypes.promote_types(np.longdouble, np.float32)
    with pytest.raises(ValueError):
        dtypes.promote_types(np.object_, np.int32)
    if "int4" in dtypes._DTYPES:
        with pytest.raises(dtypes.TypePromotionError, match="no implicit type promotion path"):
            dtypes.promote_types(ml_dtypes.int4, np.int8)
    if "float8_e4m3fn" in dtypes._DTYPES:
        with pytest.raises(dtypes.TypePromotionError):
            dtypes.promote_types(ml_dtypes.float8_e4m3fn, np.float16)


# ---------------------------------------------------------------------------
# result_type


def test_result_type_single_and_pairs_match_jax(x64):
    args = result_type_args() + [_jax_weak_array(k) for k in "ifc"]
    mismatches = []
    for a in args:
        if _outcome(dtypes.result_type, a) != _outcome(jax_result_type, a):
            mismatches.append((a, _outcome(dtypes.result_type, a), _outcome(jax_result_type, a)))
    for a, b in itertools.product(args, repeat=2):
        got = _outcome(dtypes.result_type, a, b)
        want = _outcome(jax_result_type, a, b)
        if got != want:
            mismatches.append((a, b, got, want))
    assert not mismatches, mismatches[:20]


def test_result_type_triples_match_jax(x64):
    # Every triple of standard dtypes (as arrays) and Python scalars.
    args = [np.zeros((), dt) for dt in STANDARD_DTYPES] + PYTHON_VALUES
    mismatches = []
    for triple in itertools.product(args, repeat=3):
        got = _outcome(dtypes.result_type, *triple)
        want = _outcome(jax_result_type, *triple)
        if got != want:
            mismatches.append((triple, got, want))
    assert not mismatches, mismatches[:20]


@pytest.mark.skipif(not EXTENDED_DTYPES, reason="ml_dtypes not installed")
def test_result_type_extended_dtypes_match_jax(x64):
    args = EXTENDED_DTYPES + [np.dtype(np.int8), np.dtype(np.float16), np.dtype(np.float32)] + PYTHON_VALUES
    mismatches = []
    for a, b in itertools.product(args, repeat=2):
        got = _outcome(dtypes.result_type, a, b)
        want = _outcome(jax_result_type, a, b)
        if got != want:
            mismatches.append((a, b, got, want))
    assert not mismatches, mismatches[:20]


ARG_POOL = result_type_args()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(range(len(ARG_POOL))), min_size=1, max_size=5), st.booleans())
def test_result_type_random_mixtures_match_jax(indices, flag):
    old_meshax, old_jax = config.read("jax_enable_x64"), jax.config.read("jax_enable_x64")
    config.update("jax_enable_x64", flag)
    jax.config.update("jax_enable_x64", flag)
    try:
        args = [ARG_POOL[i] for i in indices]
        assert _outcome(dtypes.result_type, *args) == _outcome(jax_result_type, *args)
    finally:
        config.update("jax_enable_x64", old_meshax)
        jax.config.update("jax_enable_x64", old_jax)


def test_result_type_weak_semantics(x64):
    f_default = np.dtype("float64" if x64 else "float32")
    i_default = np.dtype("int64" if x64 else "int32")
    assert dtypes.result_type(np.zeros(2, np.int32), 2.0) == (f_default, True)
    assert dtypes.result_type(np.zeros(2, np.int8), 3) == (np.int8, False)
    assert dtypes.result_type(np.zeros(2, np.float16), 1.0) == (np.float16, False)
    assert dtypes.result_type(np.zeros(2, np.uint8), 300) == (np.uint8, False)
    assert dtypes.result_type(np.zeros(2, bool), 1) == (i_default, True)
    assert dtypes.result_type(1, 2.0) == (f_default, True)
    assert dtypes.result_type(True, True) == (np.bool_, False)
    assert dtypes.result_type(np.zeros(2, np.float16), 1j) == (np.complex64, False)
    assert dtypes.result_type(None) == (f_default, False)


def test_result_type_rejects():
    with pytest.raises(ValueError):
        dtypes.result_type()
    with pytest.raises(TypeError):
        dtypes.result_type([1, 2])
    with pytest.raises(TypeError):
        dtypes.result_type(np.longdouble(1.0), np.float32)
    with pytest.raises(TypeError):
        dtypes.result_type(np.array(["a"]))


class _FakeArray:
    def __init__(self, dtype, weak_type=False):
        self.dtype = np.dtype(dtype)
        self.weak_type = weak_type


def test_result_type_duck_typed_arrays(x64):
    i_default = np.dtype("int64" if x64 else "int32")
    assert dtypes.result_type(_FakeArray(np.int32, weak_type=True), np.int8) == (np.int8, False)
    assert dtypes.result_type(_FakeArray(np.int32, weak_type=True)) == (i_default, True)
    assert dtypes.result_type(_FakeArray(np.float16)) == (np.float16, False)


# ---------------------------------------------------------------------------
# dtype_of and is_weakly_typed


def _asarray_cases():
    cases = [True, False, 0, 1, -3, 1.5, 2j]
    for dt in STANDARD_DTYPES:
        cases.append(dt.type(1))
        cases.append(np.zeros((2, 3), dt))
        cases.append(np.zeros((), dt))
    cases += [
        [1, 2], [1, 2.0], [True, 1], [True, False], [], (), [[1], [2.0]], (1, 1j), [np.int8(1), 2],
        [np.uint8(1), np.int8(1)], [np.float16(1), 2.0], [np.uint64(1), np.int64(1)], [np.float64(1)],
        [np.zeros(2, np.float16), np.zeros(2, np.float16)], [[np.int8(1), np.uint8(1)], [2, 3]],
        jnp.asarray(1.0), jnp.asarray(1), jnp.asarray(1j), jnp.zeros(2, jnp.bfloat16), [jnp.asarray(1.0), 2],
    ]
    return cases


def test_dtype_of_matches_jax_asarray(x64):
    mismatches = []
    for x in _asarray_cases():
        got = _outcome(dtypes.dtype_of, x)
        want = _outcome(jax_asarray, x)
        if got != want:
            mismatches.append((x, got, want))
    assert not mismatches, mismatches[:20]


SCALAR_LEAVES = [True, 0, 1, 1.0, 1j] + [dt.type(1) for dt in STANDARD_DTYPES]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(range(len(SCALAR_LEAVES))), min_size=2, max_size=2), min_size=0, max_size=3),
    st.booleans(),
    st.booleans(),
)
def test_dtype_of_random_lists_match_jax(rows, nested, flag):
    old_meshax, old_jax = config.read("jax_enable_x64"), jax.config.read("jax_enable_x64")
    config.update("jax_enable_x64", flag)
    jax.config.update("jax_enable_x64", flag)
    try:
        if nested:
            x = [[SCALAR_LEAVES[i] for i in row] for row in rows]
        else:
            x = [SCALAR_LEAVES[i] for row in rows for i in row]
        assert _outcome(dtypes.dtype_of, x) == _outcome(jax_asarray, x)
    finally:
        config.update("jax_enable_x64", old_meshax)
        jax.config.update("jax_enable_x64", old_jax)


def test_is_weakly_typed():
    from jax._src import dtypes as jax_dtypes

    values = [True, 1, 1.0, 1j, np.float64(1.0), np.int32(1), np.zeros(2), jnp.asarray(1.0),
              jnp.asarray(np.float32(1.0)), jnp.asarray(True), int, float, [1]]
    for v in values:
        assert dtypes.is_weakly_typed(v) == bool(jax_dtypes.is_weakly_typed(v)), v
    assert dtypes.is_weakly_typed(_FakeArray(np.float32, weak_type=True))
    assert not dtypes.is_weakly_typed(_FakeArray(np.float32))
    assert not dtypes.is_weakly_typed(_FakeArray)


def test_dtype_of_rejects():
    with pytest.raises(TypeError):
        dtypes.dtype_of(None)
    with pytest.raises(TypeError):
        dtypes.dtype_of(np.float32)
    with pytest.raises(TypeError):
        dtypes.dtype_of("abc")
    with pytest.raises(TypeError):
        dtypes.dtype_of(object())


# ---------------------------------------------------------------------------
# predicates and limits


def test_predicates_match_jnp_issubdtype():
    for dt in STANDARD_DTYPES + EXTENDED_DTYPES:
        assert dtypes.is_bool(dt) == jnp.issubdtype(dt, jnp.bool_), dt
        assert dtypes.is_integer(dt) == jnp.issubdtype(dt, jnp.integer), dt
        assert dtypes.is_signed_integer(dt) == jnp.issubdtype(dt, jnp.signedinteger), dt
        assert dtypes.is_unsigned_integer(dt) == jnp.issubdtype(dt, jnp.unsignedinteger), dt
        assert dtypes.is_floating(dt) == jnp.issubdtype(dt, jnp.floating), dt
        assert dtypes.is_complex(dt) == jnp.issubdtype(dt, jnp.complexfloating), dt
    # Values and Python types work too.
    assert dtypes.is_integer(3) and dtypes.is_integer(int) and dtypes.is_integer(np.zeros(2, np.uint8))
    assert dtypes.is_floating(1.0) and dtypes.is_complex(1j) and dtypes.is_bool(True)
    assert not dtypes.is_integer(True) and not dtypes.is_floating(np.zeros(2, np.int32))


def test_iinfo_finfo():
    for dt in STANDARD_DTYPES + EXTENDED_DTYPES:
        if jnp.issubdtype(dt, jnp.integer):
            got, want = dtypes.iinfo(dt), jnp.iinfo(dt)
            assert (got.min, got.max, got.bits) == (want.min, want.max, want.bits), dt
        elif jnp.issubdtype(dt, jnp.inexact):
            got, want = dtypes.finfo(dt), jnp.finfo(dt)
            assert (float(got.eps), float(got.max), got.bits) == (float(want.eps), float(want.max), want.bits), dt
    assert dtypes.iinfo(int).bits == jnp.iinfo(int).bits
    assert dtypes.finfo(float).bits == jnp.finfo(float).bits
    assert dtypes.iinfo(np.zeros(2, np.int8)).max == 127


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.float32, np.int32, np.uint8, np.bool_, np.complex128])
def test_a_jitted_calls_numpy_constants_keep_jaxs_types_call_after_call(dtype, x64):
    """NumPy arrays a jitted function closes over (its constants) or is given: on every call (the first traces, the
    later ones take the one-device fast path) they reach the program in JAX's type for them under the x64
    setting."""
    import meshax

    constant = (np.arange(6).reshape(2, 3) % 3).astype(dtype)

    def f(lib):
        return lib.jit(lambda x: (x * 2 + constant, constant, x))

    x = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    theirs = f(jax)(x)
    ours_jitted = f(meshax)
    for _ in range(3):
        ours = ours_jitted(x)
        for a, b in zip(ours, theirs):
            assert np.asarray(a).dtype == np.asarray(b).dtype, (np.asarray(a).dtype, np.asarray(b).dtype)
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
