"""Float32 transcendentals computed in float32 (primitives/float32_math.py) against real JAX 0.12 and against
float64 rounded to float32: values over every binade, the edges where methods change, infinities and NaNs, eagerly
and under jit; float16 and bfloat16; logaddexp and the activations built on these (gelu, sigmoid, softplus,
log_softmax) with their gradients; and each element's value the same whatever the array's size or sharding."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax._src.core.core import impl_rules
from meshax._src.primitives import array_primitives as P

RNG = np.random.default_rng(41)
TINY = np.float32(np.finfo(np.float32).tiny)
# meshax name -> (the name in jax.numpy / jax.nn / jax.scipy.special, the float64 reference, the input domain)
FUNCTIONS = {
    "sin": ("sin", np.sin, "all"), "cos": ("cos", np.cos, "all"), "tan": ("tan", np.tan, "all"),
    "asin": ("arcsin", np.arcsin, "unit"), "acos": ("arccos", np.arccos, "unit"), "atan": ("arctan", np.arctan, "all"),
    "sinh": ("sinh", np.sinh, "all"), "cosh": ("cosh", np.cosh, "all"), "tanh": ("tanh", np.tanh, "all"),
    "asinh": ("arcsinh", np.arcsinh, "all"), "acosh": ("arccosh", np.arccosh, "positive"),
    "atanh": ("arctanh", np.arctanh, "unit"), "exp": ("exp", np.exp, "all"), "exp2": ("exp2", np.exp2, "all"),
    "expm1": ("expm1", np.expm1, "all"), "log": ("log", np.log, "positive"), "log1p": ("log1p", np.log1p, "all"),
    "log2": ("log2", np.log2, "positive"), "log10": ("log10", np.log10, "positive"), "cbrt": ("cbrt", np.cbrt, "all"),
    "logistic": ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), "all"), "erf": ("erf", None, "all"),
}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 0.875, -0.875, 88.72, 88.73, -87.3,
                    -88.8, -103.0, 9.0, -9.0, 3.9, 1e-4, -1e-4, 1e-7, 3e-8, 2.0 ** 24, 1e5, 1e6, 3.4e38, -3.4e38,
                    np.float32(np.pi), np.float32(np.pi / 2), 0.99999994, 1.0000001, -0.99999994], np.float32)


def _neighbours(centres, count: int) -> np.ndarray:
    """The `count` float32 values on either side of each centre (and the centres)."""
    bits = np.asarray(centres, np.float32).view(np.int32).astype(np.int64)[:, None] + np.arange(-count, count + 1)
    return bits.astype(np.int32).view(np.float32).ravel()


def _inputs(domain: str) -> np.ndarray:
    """~30000 float32 inputs: every binade from 2**-40 to 2**40 of both signs, random bit patterns, the special
    values, and runs of neighbours around 0.875 (erf's split), 1, pi/2 and pi."""
    magnitudes = RNG.uniform(1, 2, 16000) * 2.0 ** RNG.integers(-40, 40, 16000) * RNG.choice([-1, 1], 16000)
    bits = RNG.integers(0, 2 ** 32, 6000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = _neighbours([0.875, 1.0, np.pi / 2, np.pi, 1e-3], 300)
    dense = np.linspace(-12, 12, 4001, dtype=np.float32)
    x = np.concatenate([magnitudes.astype(np.float32), bits, SPECIAL, edges, dense])
    x = x[(np.abs(x) >= TINY) | (x == 0) | ~np.isfinite(x)]  # subnormal inputs read as 0 (XLA, meshax)
    if domain == "unit":
        x = np.concatenate([x[np.abs(x) <= 1], _neighbours([1.0, -1.0, 0.5], 300)])
    elif domain == "positive":
        x = np.concatenate([np.abs(x), _neighbours([1.0, 2.0], 300)])
    return x


def _jax_function(name: str):
    jax_name = FUNCTIONS[name][0]
    if name == "logistic":
        return jax.nn.sigmoid
    if name == "erf":
        return jax.scipy.special.erf
    return getattr(jjnp, jax_name)


def _reference(name: str, x: np.ndarray) -> np.ndarray:
    import scipy.special

    function = FUNCTIONS[name][1] or scipy.special.erf
    with np.errstate(all="ignore"):
        return function(x.astype(np.float64)).astype(np.float32)


def _normal(values: np.ndarray) -> np.ndarray:
    return (np.abs(values) >= TINY) | (values == 0) | ~np.isfinite(values)


def _ulps(ours: np.ndarray, reference: np.ndarray) -> int:
    """The largest distance in float32 ulps between two float32 arrays (the largest finite number and infinity one
    apart); NaNs must coincide."""
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(reference))
    bits = [v.view(np.int32).astype(np.int64) for v in (ours, reference)]
    ordered = [np.where(i < 0, -(i & 0x7FFFFFFF), i) for i in bits]
    return int(np.abs(ordered[0] - ordered[1])[~np.isnan(ours)].max(initial=0))


def _bind(name: str):
    return lambda a: P.UNARY[name].bind(a)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float32_matches_jax_eagerly_and_under_jit(name):
    """Values equal to JAX's within the differential tests' tolerances (2e-6 relative, 1e-6 absolute; exp2 1e-5:
    XLA's own loses up to 4e-6 near overflow, 2 ** 120, where meshax's is within 3 ulps), NaNs and infinities where
    JAX has them, and the result float32."""
    x = _inputs(FUNCTIONS[name][2])
    with np.errstate(all="ignore"):
        theirs = np.asarray(jax.jit(_jax_function(name))(x))
    for ours in (P.UNARY[name].bind(mnp.asarray(x)), meshax.jit(_bind(name))(mnp.asarray(x))):
        ours = np.asarray(ours)
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, rtol=1e-5 if name == "exp2" else 2e-6, atol=1e-6, equal_nan=True,
                                   err_msg=name)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_float32_within_a_few_ulps_of_the_correctly_rounded_value(name):
    """At most 4 ulps (tan, computed in float64: 0) from float64 rounded to float32 where that is a normal number
    or infinite, and the same zeros' signs and NaNs everywhere."""
    x = _inputs(FUNCTIONS[name][2])
    x = np.concatenate([x, RNG.standard_normal(20000).astype(np.float32) * 3])
    with np.errstate(all="ignore"):
        ours = np.asarray(P.UNARY[name].bind(mnp.asarray(x)))
    reference = _reference(name, x)
    normal = _normal(reference)
    assert _ulps(ours[normal], reference[normal]) <= (0 if name in ("sin", "cos", "tan") else 4), name
    zeros = reference == 0
    np.testing.assert_array_equal(np.signbit(ours[zeros]), np.signbit(reference[zeros]))


@pytest.mark.parametrize("name", ["exp", "tanh", "log1p"])
def test_a_small_float32_array_takes_numpys_float32_kernel(name):
    """Arrays of any size (these: 16 elements, once computed in float64) give NumPy's float32 kernel's bits."""
    x = (RNG.standard_normal(16) * 4).astype(np.float32)
    if name == "log1p":
        x = np.abs(x)
    want = getattr(np, FUNCTIONS[name][0])(x)
    np.testing.assert_array_equal(np.asarray(P.UNARY[name].bind(mnp.asarray(x))), want)


def test_sin_of_the_seeds_toy_data_has_xlas_bits():
    """sin over 0..31 (the seeds' toy program) gives XLA's bits: the float64 values rounded."""
    x = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(P.UNARY["sin"].bind(mnp.asarray(x))), np.asarray(jax.numpy.sin(x)))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("name", ["exp", "tanh", "logistic", "erf", "log1p", "sin", "tan"])
def test_half_precision_is_float32_rounded_and_matches_jax(name, dtype):
    """float16 and bfloat16, computed in float32 and rounded: within one ulp of the type of float64 rounded, and
    JAX's values to 2 ulps of the type (XLA rounds bfloat16 sigmoid's every step to bfloat16)."""
    x = np.concatenate([np.linspace(-8, 8, 801), [0.0, np.inf, -np.inf, np.nan]]).astype(dtype)
    if name == "log1p":
        x = np.abs(x)
    ours = np.asarray(P.UNARY[name].bind(mnp.asarray(x)))
    theirs = np.asarray(jax.jit(_jax_function(name))(x))
    assert ours.dtype == theirs.dtype == np.dtype(dtype)
    ulp = 2.0 ** -(10 if dtype == np.float16 else 7)
    reference = _reference(name, x.astype(np.float32)).astype(np.float64)
    np.testing.assert_allclose(ours.astype(np.float64), reference, rtol=ulp, atol=1e-4, equal_nan=True)
    np.testing.assert_allclose(ours.astype(np.float32), theirs.astype(np.float32), rtol=2 * ulp, atol=1e-3,
                               equal_nan=True)


@pytest.mark.parametrize("name", ["tanh", "exp", "log1p", "logistic", "erf", "sin", "tan"])
def test_an_elements_value_does_not_depend_on_the_arrays_size(name):
    """The same element gives the same bits alone, in blocks of 7 or 1000, in the whole array (above the old
    65536-element switch of method) and as a transposed view."""
    x = (RNG.standard_normal(80000) * 3).astype(np.float32)
    x[:200] = _inputs("all")[:200]
    if name == "log1p":
        x = np.abs(x)
    impl = impl_rules[P.UNARY[name]]
    whole = impl(x)
    assert whole.dtype == np.float32
    for size in (1, 7, 1000):
        pieces = np.concatenate([impl(x[i:i + size]) for i in range(0, 3000, size)])
        np.testing.assert_array_equal(pieces[:3000].view(np.int32), whole[:3000].view(np.int32))
    transposed = impl(x.reshape(400, 200).T).T.reshape(-1)
    np.testing.assert_array_equal(transposed.view(np.int32), whole.view(np.int32))


@pytest.mark.parametrize("name", ["tanh", "erf", "logistic", "exp"])
def test_an_elements_value_does_not_depend_on_the_sharding(name):
    """Split over 8 or 2 devices under jit (each device's block far below the old switch), the values are the
    unsharded array's bit for bit."""
    x = (RNG.standard_normal((512, 160)) * 3).astype(np.float32)
    whole = np.asarray(meshax.jit(_bind(name))(mnp.asarray(x)))
    for count in (8, 2):
        mesh = meshax.make_mesh((count,), ("data",), devices=meshax.devices()[:count])
        sharded = meshax.device_put(x, meshax.NamedSharding(mesh, meshax.P("data")))
        np.testing.assert_array_equal(np.asarray(meshax.jit(_bind(name))(sharded)).view(np.int32), whole.view(np.int32))


def test_logaddexp_matches_jax_and_numpy_on_every_pair_of_special_values():
    """float32 logaddexp (softplus's primitive): JAX's values within tolerance over wide random pairs, NumPy's
    infinities and NaNs on every pair of special values, and within 2 ulps of the reference away from
    cancellation."""
    wide = RNG.uniform(1, 2, 10000) * 2.0 ** RNG.integers(-20, 20, 10000)
    x = np.concatenate([RNG.standard_normal(20000) * 30, wide])
    y = np.concatenate([RNG.standard_normal(20000) * 30, np.zeros(10000)])
    special = np.array([np.inf, -np.inf, np.nan, 0.0, 1e30, -1e30, 3.4e38, -3.4e38, 1.0], np.float32)
    sx, sy = np.meshgrid(special, special)
    x, y = np.concatenate([x.astype(np.float32), sx.ravel()]), np.concatenate([y.astype(np.float32), sy.ravel()])
    theirs = np.asarray(jax.jit(jjnp.logaddexp)(x, y))
    for ours in (mnp.logaddexp(x, y), meshax.jit(mnp.logaddexp)(x, y)):
        ours = np.asarray(ours)
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-6, equal_nan=True)
        with np.errstate(all="ignore"):
            want = np.logaddexp(x, y)
        inexact = ~np.isfinite(want)
        np.testing.assert_array_equal(ours[inexact], want[inexact])
        reference = np.logaddexp(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
        away = np.abs(reference) >= np.maximum(np.abs(x), np.abs(y)) / 2  # no cancellation of max(x, y)
        assert _ulps(ours[away], reference[away]) <= 2
    half = np.linspace(-20, 20, 401).astype(np.float16)
    np.testing.assert_allclose(np.asarray(mnp.logaddexp(half, half[::-1])).astype(np.float32),
                               np.asarray(jjnp.logaddexp(half, half[::-1])).astype(np.float32), rtol=2 ** -10)


@pytest.mark.parametrize("value", [0.3, -2.5, np.inf, -np.inf, np.nan])
def test_scalars(value):
    """0-d operands (which NumPy's ufuncs turn into scalars): the same values as JAX's."""
    x = np.float32(value)
    pairs = [(P.UNARY["logistic"].bind(mnp.asarray(x)), jax.nn.sigmoid(x)),
             (P.UNARY["erf"].bind(mnp.asarray(x)), jax.scipy.special.erf(x)),
             (P.UNARY["tan"].bind(mnp.asarray(x)), jjnp.tan(x)),
             (mnp.logaddexp(x, x), jjnp.logaddexp(x, x)), (mnp.logaddexp(x, np.float32(1)), jjnp.logaddexp(x, 1.0)),
             (meshax.jit(meshax.nn.softplus)(x), jax.nn.softplus(x))]
    for ours, theirs in pairs:
        assert np.asarray(ours).dtype == np.float32
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-6, atol=1e-6, equal_nan=True)


ACTIVATIONS = {
    "gelu_tanh": lambda nn, x: nn.gelu(x, approximate=True), "gelu_erf": lambda nn, x: nn.gelu(x, approximate=False),
    "sigmoid": lambda nn, x: nn.sigmoid(x), "silu": lambda nn, x: nn.silu(x), "softplus": lambda nn, x: nn.softplus(x),
    "log_softmax": lambda nn, x: nn.log_softmax(x), "tanh": lambda nn, x: nn.tanh(x),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_and_their_gradients_match_jax(name):
    """The models' activations over (4, 8, 64) float32 values, eagerly, under jit and vmap, and their gradients
    (to 3e-5: XLA's tanh is +-1 from |x| = 7.9 on, the correctly rounded one from 9.01, so tanh's derivative
    1 - tanh**2 differs there by up to 5e-7 before gelu's chain rule multiplies it by x**2)."""
    x = (RNG.standard_normal((4, 8, 64)) * 4).astype(np.float32)
    f = ACTIVATIONS[name]
    theirs = np.asarray(jax.jit(lambda a: f(jax.nn, a))(x))
    np.testing.assert_allclose(np.asarray(f(meshax.nn, mnp.asarray(x))), theirs, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(meshax.jit(lambda a: f(meshax.nn, a))(x)), theirs, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(meshax.vmap(lambda a: f(meshax.nn, a))(x)), theirs, rtol=2e-6, atol=1e-6)
    grad = np.asarray(meshax.jit(meshax.grad(lambda a: mnp.sum(f(meshax.nn, a) * a)))(x))
    want = np.asarray(jax.jit(jax.grad(lambda a: jjnp.sum(f(jax.nn, a) * a)))(x))
    np.testing.assert_allclose(grad, want, rtol=2e-5, atol=3e-5)
