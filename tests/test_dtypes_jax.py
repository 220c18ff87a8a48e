"""Dtypes as JAX has them, against real JAX: scalar types (jnp.float32 ...), bfloat16 and the float8 types as
floating types, float -> int conversion (saturating, as XLA on CPU), weak types of results, NumPy inputs,
precision= / preferred_element_type= of the contractions, devices('cpu') and jit with unhashable pytree aux data.
Each value case runs eagerly, under jit and inside shard_map (see differential.py)."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from differential import MODES, assert_matches, check_case

# ---- scalar types -----------------------------------------------------------------------------------------------

SCALAR_NAMES = sorted(n for n in dir(jjnp) if isinstance(getattr(jjnp, n), type(jjnp.float32)))


def test_meshax_has_every_scalar_type_of_jax() -> None:
    ours = sorted(n for n in dir(mnp) if isinstance(getattr(mnp, n), type(mnp.float32)))
    assert ours == SCALAR_NAMES


@pytest.mark.parametrize("name", SCALAR_NAMES)
def test_scalar_type_stands_for_its_dtype(name: str) -> None:
    ours, theirs = getattr(mnp, name), getattr(jjnp, name)
    assert ours.dtype == theirs.dtype
    assert np.dtype(ours) == np.dtype(theirs)
    assert ours == theirs.dtype.type and hash(ours) == hash(theirs.dtype.type)
    if not name.startswith(("float4", "float6", "int1", "uint1")):  # JAX's own zeros fail or change these
        assert mnp.zeros(2, ours).dtype == jjnp.zeros(2, theirs).dtype
    assert isinstance(np.zeros((), theirs.dtype)[()], ours)
    for kind in (np.floating, np.integer, np.complexfloating, np.inexact, np.bool_, np.number):
        assert mnp.issubdtype(ours, kind) == jjnp.issubdtype(theirs, kind), kind
    assert mnp.iscomplexobj(ours) == jjnp.iscomplexobj(theirs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16", "int8", "uint8", "int32", "bool_", "complex64",
                                  "float8_e4m3fn", "int4"])
def test_calling_a_scalar_type_makes_an_array(name: str, mode: str) -> None:
    x = np.array([0.0, 1.5, -2.0, 3.25], np.float32)
    check_case(lambda L, a: getattr(L.numpy, name)(a), (x,), mode)
    check_case(lambda L, a: getattr(L.numpy, name)(a[1]) * 3, (x,), mode)


def test_scalar_type_call_returns_an_array_not_a_numpy_scalar() -> None:
    for value in (3, 3.5, 1e-45, np.float32(2), [1, 2]):
        ours, theirs = mnp.float32(value), jjnp.float32(value)
        assert isinstance(ours, meshax.Array)
        assert_matches(ours, theirs, rtol=0, atol=0)


def test_scalar_type_pickles_to_itself() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(mnp.float32)) is mnp.float32


# ---- bfloat16 and the narrow floats are floating types ---------------------------------------------------------

EXTENDED_FLOATS = ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"]


@pytest.mark.parametrize("name", EXTENDED_FLOATS + ["int4", "uint4"])
def test_extended_types_in_numpys_hierarchy(name: str) -> None:
    for kind in (np.floating, np.inexact, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.generic):
        assert mnp.issubdtype(getattr(mnp, name), kind) == jjnp.issubdtype(getattr(jjnp, name), kind), kind
        assert meshax.dtypes.issubdtype(np.dtype(getattr(jjnp, name)), kind) == \
            jax.dtypes.issubdtype(np.dtype(getattr(jjnp, name)), kind), kind


@pytest.mark.parametrize("name", EXTENDED_FLOATS)
def test_finfo_of_extended_floats(name: str) -> None:
    ours, theirs = mnp.finfo(getattr(mnp, name)), jjnp.finfo(getattr(jjnp, name))
    for field in ("eps", "max", "min", "tiny", "bits", "nmant", "nexp"):
        assert getattr(ours, field) == getattr(theirs, field), field


BF16_CASES = {
    "divide": lambda L, x: x / 3,
    "sqrt": lambda L, x: L.numpy.sqrt(x),
    "exp_mean": lambda L, x: L.numpy.mean(L.numpy.exp(x)),
    "plus_python_float": lambda L, x: x + 1.5,
    "plus_float32": lambda L, x: x + L.numpy.ones(3, L.numpy.float32),
    "sigmoid": lambda L, x: L.nn.sigmoid(x),
    "grad": lambda L, x: L.grad(lambda v: (v * v).sum())(x),
    "value_and_grad_tanh": lambda L, x: L.value_and_grad(lambda v: L.numpy.tanh(v).sum())(x),
    "promote_f16": lambda L, x: x + L.numpy.ones(3, L.numpy.float16),
    "isfinite": lambda L, x: L.numpy.isfinite(x),
    "softmax": lambda L, x: L.nn.softmax(x),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(BF16_CASES))
def test_bfloat16_computes_as_in_jax(name: str, mode: str) -> None:
    x = np.array([0.5, 1.25, -2.0], jjnp.bfloat16)
    check_case(BF16_CASES[name], (x,), mode, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", EXTENDED_FLOATS)
def test_narrow_floats_do_not_promote_implicitly(name: str) -> None:
    a = getattr(mnp, name)
    if name == "bfloat16":
        assert mnp.promote_types(a, mnp.float32) == jjnp.promote_types(getattr(jjnp, name), jjnp.float32)
        return
    with pytest.raises(meshax.dtypes.TypePromotionError):
        mnp.promote_types(a, mnp.float32)
    with pytest.raises(jax.dtypes.TypePromotionError):
        jjnp.promote_types(getattr(jjnp, name), jjnp.float32)


@pytest.mark.parametrize("name", ["float4_e2m1fn", "float6_e2m3fn", "float8_e4m3fn", "bfloat16", "int4", "uint1",
                                  "int2", "float32", "bool", "complex64"])
def test_itemsize_bits(name: str) -> None:
    assert meshax.dtypes.itemsize_bits(name) == jax.dtypes.itemsize_bits(name)


# ---- float -> integer conversion -------------------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, -1.0, -3.7, 3.7, 1e10, -1e10, 255.5, 256.0, 300.0, 40000.0, 3e9,
                    254.0, 257.0, -0.5], np.float32)
TARGETS = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "bool", "int4", "uint4"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("target", TARGETS)
def test_float_to_int_saturates_as_jax(target: str, mode: str) -> None:
    dtype = getattr(jjnp, target) if target in ("int4", "uint4") else target
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_case(lambda L, x: x.astype(dtype), (SPECIAL,), mode, rtol=0, atol=0)
        check_case(lambda L, x: L.lax.convert_element_type(x, dtype), (SPECIAL,), mode, rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_complex_and_int_conversions(mode: str) -> None:
    z = np.array([1 + 2j, -3.5 + 1j, 0 + 2j, 0j], np.complex64)
    i = np.array([300, -5, 70000, 255], np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_case(lambda L, x: (x.astype("int32"), x.astype("float32"), x.astype("bool")), (z,), mode)
        check_case(lambda L, x: (x.astype("uint8"), x.astype("int8"), x.astype("float16")), (i,), mode)


def test_issue_25_arange_astype_uint8() -> None:
    assert_matches(mnp.arange(254.0, 258.0).astype("uint8"), jjnp.arange(254.0, 258.0).astype("uint8"))
    assert_matches(mnp.astype(np.array([300.0, -1.0]), "uint8"), jjnp.astype(np.array([300.0, -1.0]), "uint8"))
    assert_matches(mnp.full(2, 300.0, dtype="uint8"), jjnp.full(2, 300.0, dtype="uint8"))


# ---- weak types --------------------------------------------------------------------------------------------------

WEAK_EXPRESSIONS = """np_.float32(2) * 3
np_.float32(2) * 3.0
np_.asarray(3.0)
np_.asarray(3)
np_.asarray(True)
np_.asarray(np.float32(3))
np_.array([3.0])
np_.arange(3)
np_.arange(3.0)
np_.arange(1, 4, 0.5)
np_.linspace(0, 1, 3)
np_.zeros(3, int) + 2
np_.full((2,), 3.0)
np_.full_like(np_.ones(2), 3.0)
np_.zeros_like(3.0)
np_.sum(3.0)
np_.exp(2.0)
np_.sqrt(2)
np_.where(True, 1.0, 2.0)
np_.clip(3.0, 0, 1)
np_.maximum(1.0, 2)
np_.array(2.0) + 1
np_.float32(1.5) + np_.int32(1)
np_.int32(3) // 2
np_.bool_(True) + 1
np_.mean(np_.asarray(2.0))
np_.round(2.5)
np_.asarray(2.0).astype(float)
L.nn.relu(3.0)
L.nn.sigmoid(0.0)
L.lax.add(1.0, 2.0)
L.lax.full((2,), 1.0)
L.numpy.true_divide(1, 2)
L.grad(lambda x: x * 2.0)(1.0)
L.jit(lambda x: x * 2)(3.0)
L.jit(lambda: 3.0)()
L.random.uniform(L.random.PRNGKey(0))
L.numpy.asarray([1.0, 2])
L.numpy.int32(2) * 2.5
L.lax.exp(2.0)
L.lax.sin(2.0)
L.lax.neg(2)
L.lax.square(3)
L.lax.is_finite(2.0)
L.lax.integer_pow(2.0, 3)
L.lax.conj(2.0)
L.lax.conj(L.numpy.ones(2))
L.lax.full(2, 3)
L.numpy.round(L.numpy.int8(17))
L.numpy.round(17, 1)
L.numpy.round(L.numpy.float16(2.25), 1)
L.numpy.rint(L.numpy.int32(3))
L.numpy.rint(2.5)
L.numpy.log2(2.0)
L.numpy.log10(2.0)
L.numpy.log(2.0)
L.numpy.isinf(2.0)
L.numpy.isnan(2.0)
L.numpy.signbit(2.0)""".split("\n")


@pytest.mark.parametrize("expression", WEAK_EXPRESSIONS)
def test_weak_types_as_jax(expression: str) -> None:
    def evaluate(L):
        np_ = L.numpy  # noqa: F841  (used by the expression)
        return eval(expression)

    assert_matches(evaluate(meshax), evaluate(jax), rtol=1e-6)


# ---- NumPy inputs are accepted wherever arrays are ---------------------------------------------------------------

X = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0], [2.0, 1.0, 0.25]], np.float32)
NUMPY_INPUT_CASES = {
    "sum": lambda L, x: L.numpy.sum(x), "max": lambda L, x: L.numpy.max(x, axis=0), "mean": lambda L, x: L.numpy.mean(x),
    "var": lambda L, x: L.numpy.var(x), "cumsum": lambda L, x: L.numpy.cumsum(x), "prod": lambda L, x: L.numpy.prod(x),
    "log_softmax": lambda L, x: L.nn.log_softmax(x), "softmax": lambda L, x: L.nn.softmax(x),
    "logsumexp": lambda L, x: L.nn.logsumexp(x), "standardize": lambda L, x: L.nn.standardize(x),
    "concatenate_one": lambda L, x: L.numpy.concatenate([x]), "squeeze": lambda L, x: L.numpy.squeeze(x),
    "clip": lambda L, x: L.numpy.clip(x), "atleast_2d": lambda L, x: L.numpy.atleast_2d(x),
    "diagonal": lambda L, x: L.numpy.diagonal(x), "tril": lambda L, x: L.numpy.tril(x),
    "sinc": lambda L, x: L.numpy.sinc(x), "deg2rad": lambda L, x: L.numpy.deg2rad(x),
    "positive": lambda L, x: L.numpy.positive(x), "unstack": lambda L, x: L.numpy.unstack(x),
    "broadcast_to_same": lambda L, x: L.numpy.broadcast_to(x, (3, 3)), "ptp": lambda L, x: L.numpy.ptp(x),
    "lax_concatenate_one": lambda L, x: L.lax.concatenate([x], 0),
    "optimization_barrier": lambda L, x: L.lax.optimization_barrier(x),
    "logaddexp2": lambda L, x: L.numpy.logaddexp2(x, x),
}


@pytest.mark.parametrize("name", sorted(NUMPY_INPUT_CASES))
def test_numpy_inputs_give_arrays(name: str) -> None:
    case = NUMPY_INPUT_CASES[name]
    ours, theirs = case(meshax, X), case(jax, X)
    for leaf in jax.tree_util.tree_leaves(ours):
        assert isinstance(leaf, meshax.Array), type(leaf)
    assert_matches(ours, theirs, rtol=1e-6)
    assert_matches(meshax.jit(lambda: case(meshax, X))(), theirs, rtol=1e-6)


def test_concatenate_of_numpy_arrays_is_an_array() -> None:
    out = mnp.concatenate([np.ones(3, np.float32)])
    assert isinstance(out, meshax.Array)


# ---- precision= and preferred_element_type= ----------------------------------------------------------------------

I8 = np.full(300, 100, np.int8)
BF = np.array([[0.5, 1.25, 3.0], [2.0, -1.0, 0.125]], jjnp.bfloat16)
CONTRACTIONS = {
    "vdot_precision": (lambda L, a: L.numpy.vdot(a, a, precision="highest"), (X,)),
    "vdot_preferred": (lambda L, a: L.numpy.vdot(a, a, precision=L.lax.Precision.HIGHEST,
                                                 preferred_element_type=L.numpy.float32), (BF,)),
    "dot_int8_int32": (lambda L, a: L.numpy.dot(a, a, preferred_element_type=L.numpy.int32), (I8,)),
    "matmul_preferred": (lambda L, a: L.numpy.matmul(a, a.T, precision="high", preferred_element_type=L.numpy.float32),
                         (BF,)),
    "inner": (lambda L, a: L.numpy.inner(a, a, precision="highest", preferred_element_type=L.numpy.float32), (BF,)),
    "tensordot": (lambda L, a: L.numpy.tensordot(a, a, 1, precision="default"), (X,)),
    "vecdot": (lambda L, a: L.numpy.vecdot(a, a, precision="highest", preferred_element_type=L.numpy.float32), (BF,)),
    "einsum_int8": (lambda L, a: L.numpy.einsum("i,i->", a, a, preferred_element_type=L.numpy.int32), (I8,)),
    "linalg_matmul": (lambda L, a: L.numpy.linalg.matmul(a, a, precision="highest"), (X,)),
    "lax_dot_int8": (lambda L, a: L.lax.dot(a, a, preferred_element_type=L.numpy.int32), (I8,)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CONTRACTIONS))
def test_contractions_accept_precision_and_preferred_type(name: str, mode: str) -> None:
    case, args = CONTRACTIONS[name]
    check_case(case, args, mode, rtol=1e-2)


# ---- meshax.Array covers traced values ----------------------------------------------------------------------------


def test_isinstance_array_inside_transformations() -> None:
    seen = []
    probe = lambda x: seen.append(isinstance(x, meshax.Array) and isinstance(x, mnp.ndarray)) or x.sum()  # noqa: E731
    meshax.jit(probe)(mnp.ones(2))
    meshax.grad(probe)(mnp.ones(2))
    meshax.vmap(probe)(mnp.ones((2, 2)))
    assert seen == [True, True, True]
    assert not isinstance(np.ones(2), meshax.Array)


# ---- devices('cpu'), pytree aux data under jit --------------------------------------------------------------------


def test_devices_of_backend_cpu() -> None:
    assert meshax.devices("cpu") == meshax.devices()
    assert meshax.local_devices(backend="cpu") == meshax.local_devices()
    assert meshax.device_count("cpu") == meshax.device_count()
    assert meshax.local_device_count("cpu") == meshax.local_device_count()
    with pytest.raises(RuntimeError, match="gpu"):
        meshax.devices("gpu")
    with pytest.raises(RuntimeError):
        jax.devices("gpu")


class Box:
    def __init__(self, x, meta):
        self.x, self.meta = x, meta


for _tree_util in (jax.tree_util, meshax.tree_util):
    _tree_util.register_pytree_node(Box, lambda b: ((b.x,), b.meta), lambda meta, children: Box(children[0], meta))


def test_jit_accepts_unhashable_aux_data() -> None:
    traces = []

    def scaled(box):
        traces.append(1)
        return box.x * box.meta["s"]

    f = meshax.jit(scaled)
    ones = mnp.ones(2)
    assert_matches(f(Box(ones, {"s": 2.0})), jax.jit(scaled)(Box(jjnp.ones(2), {"s": 2.0})))
    assert len(traces) == 2  # one trace each
    f(Box(ones, {"s": 2.0}))
    assert len(traces) == 2  # equal aux data: the cached trace
    np.testing.assert_array_equal(f(Box(ones, {"s": 3.0})), [3.0, 3.0])
    assert len(traces) == 3
    listed = meshax.jit(lambda box: box.x * box.meta[0])  # a list as aux data
    np.testing.assert_array_equal(listed(Box(ones, [4.0])), [4.0, 4.0])
    np.testing.assert_array_equal(listed(Box(ones, [5.0])), [5.0, 5.0])


# ---- explicit dtypes at creation; broadcasting errors as JAX words them ------------------------------------------


@pytest.mark.parametrize("value, dtype", [(4294967295, "uint32"), ([1, 2.5], "int32"), ([True, False], "float32"),
                                          (np.float32(2.5), "bfloat16"), (np.arange(3.0), "float16"), (1.5, "float64")])
def test_array_with_dtype_converts_straight_to_it(value, dtype) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches(mnp.array(value, dtype), jjnp.array(value, dtype), rtol=0)
        assert_matches(mnp.asarray(value, dtype=dtype), jjnp.asarray(value, dtype=dtype), rtol=0)


def test_array_with_a_dtype_too_small_raises_as_jax() -> None:
    with pytest.raises(OverflowError):
        mnp.array(300, "uint8")
    with pytest.raises(OverflowError):
        jjnp.array(300, "uint8")


@pytest.mark.parametrize("call", [lambda L: L.numpy.broadcast_shapes((2,), (3,)),
                                  lambda L: L.numpy.broadcast_arrays(L.numpy.ones(2), L.numpy.ones(3)),
                                  lambda L: L.lax.broadcast_shapes((2, 4), (3, 4))])
def test_broadcast_shape_errors_as_jax(call) -> None:
    with pytest.raises(ValueError) as theirs:
        call(jax)
    with pytest.raises(ValueError) as ours:
        call(meshax)
    assert str(ours.value) == str(theirs.value)


VIEWS = {"same_size": "uint32", "narrower": "uint8", "half": "float16", "wider": "int64"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_reads_the_bits_as_jax(name: str, mode: str) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4) * 1.5
    target = VIEWS[name]
    if target == "int64":  # without x64 the widest view is of int16 data as int32
        check_case(lambda L, a: a.astype(L.numpy.int16).view(L.numpy.int32), (x,), mode, rtol=0, atol=0)
    else:
        check_case(lambda L, a: a.view(target), (x,), mode, rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_limits_of_bfloat16_in_computations(mode: str) -> None:
    x = np.array([np.nan, np.inf, -np.inf, 1.0, 3e38], jjnp.bfloat16)
    check_case(lambda L, a: (L.numpy.nan_to_num(a), L.lax.reduce_precision(a, exponent_bits=5, mantissa_bits=3),
                             L.numpy.max(a[3:]), L.numpy.argmax(a[3:])), (x,), mode, rtol=0, atol=0)


@pytest.mark.parametrize("mode", MODES)
def test_max_and_min_of_complex_values_compare_lexicographically(mode: str) -> None:
    z = np.array([[1 + 2j, 2 + 0j, 2 - 1j], [2 + 1j, 0j, -1 + 5j]], np.complex64)
    check_case(lambda L, a: (L.numpy.max(a), L.numpy.min(a), L.numpy.max(a, axis=0), L.numpy.min(a, axis=1)),
               (z,), mode, rtol=0, atol=0)
