"""meshax.nn.initializers against jax.nn.initializers (JAX 0.10, default threefry PRNG, x64 off).

Constant initializers and the uniform ones must be bit-identical (uniform given XLA's fused multiply-add, as
in test_random); the normal ones agree to a few float32 ulps and the truncated-normal ones to 1e-6 of their
scale (meshax.random's normal and truncated_normal follow XLA's erfinv/erf to rounding). `orthogonal` takes
its QR factor by Gram-Schmidt, not LAPACK, so it agrees to 1e-6 and is checked for orthonormality. Several
keys, shapes (dense and convolution kernels, custom fan axes) and dtypes; jit equals eager; out_sharding.
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.nn.initializers as jinit  # noqa: E402

import meshax  # noqa: E402
import meshax.nn.initializers as minit  # noqa: E402
import meshax.numpy as mnp  # noqa: E402
import meshax.random as mr  # noqa: E402
from meshax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from test_random import _JAX_FUSES_FMA, BFLOAT16, ulp_distance  # noqa: E402

SEEDS = [0, 7, 2**31 - 1]
SHAPES = [(4, 5), (20, 7), (3, 3, 4, 6), (2, 3, 5)]
KEYED_SHAPES = [(SEEDS[i % len(SEEDS)], shape) for i, shape in enumerate(SHAPES)]  # every seed, every shape
FLOATS = [np.dtype(np.float32), np.dtype(np.float16)] + ([BFLOAT16] if BFLOAT16 is not None else [])

# (name, builder of the initializer from a module of initializers, how its values are compared)
CASES = [
    ("zeros", lambda m: m.zeros, "exact"),
    ("ones", lambda m: m.ones, "exact"),
    ("constant", lambda m: m.constant(-0.75), "exact"),
    ("uniform", lambda m: m.uniform(), "uniform"),
    ("uniform_scale", lambda m: m.uniform(3.5), "uniform"),
    ("glorot_uniform", lambda m: m.glorot_uniform(), "uniform"),
    ("lecun_uniform", lambda m: m.lecun_uniform(), "uniform"),
    ("he_uniform", lambda m: m.he_uniform(), "uniform"),
    ("scaling_fan_out_uniform", lambda m: m.variance_scaling(0.3, "fan_out", "uniform"), "uniform"),
    ("scaling_axes_uniform", lambda m: m.variance_scaling(2.0, "fan_avg", "uniform", in_axis=(0,), out_axis=(-1,)),
     "uniform"),
    ("normal", lambda m: m.normal(), "normal"),
    ("normal_stddev", lambda m: m.normal(2.5), "normal"),
    ("scaling_normal", lambda m: m.variance_scaling(1.7, "fan_geo_avg", "normal"), "normal"),
    ("scaling_batch_normal", lambda m: m.variance_scaling(1.0, "fan_in", "normal", batch_axis=0), "normal"),
    ("truncated_normal", lambda m: m.truncated_normal(), "truncated"),
    ("truncated_normal_bounds", lambda m: m.truncated_normal(0.5, lower=-1.0, upper=3.0), "truncated"),
    ("glorot_normal", lambda m: m.glorot_normal(), "truncated"),
    ("lecun_normal", lambda m: m.lecun_normal(), "truncated"),
    ("he_normal", lambda m: m.he_normal(), "truncated"),
    ("he_normal_axes", lambda m: m.he_normal(in_axis=-1, out_axis=-2), "truncated"),
    ("orthogonal", lambda m: m.orthogonal(), "orthogonal"),
    ("orthogonal_axis0", lambda m: m.orthogonal(scale=2.0, column_axis=0), "orthogonal"),
]


def assert_matches(ours, theirs, how: str) -> None:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours.shape, ours.dtype, theirs.shape,
                                                                       theirs.dtype)
    if how == "exact" or (how == "uniform" and _JAX_FUSES_FMA):
        np.testing.assert_array_equal(ours, theirs)
    elif how in ("uniform", "normal"):
        assert ulp_distance(ours, theirs) <= (4 if ours.dtype == np.float32 else 1)
    else:  # truncated normal and orthogonal: to 1e-6 of the values' scale (half floats: to their rounding)
        a, b = ours.astype(np.float32), theirs.astype(np.float32)
        scale = float(np.max(np.abs(b), initial=0.0))
        tolerance = 1e-6 if ours.dtype == np.float32 else 4 * float(mnp.finfo(ours.dtype).eps)
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance * scale)


# JAX's QR (LAPACK) takes no half floats, so orthogonal is compared in float32 only.
DTYPE_CASES = [pytest.param(*case, dtype, id=f"{case[0]}-{dtype}") for case in CASES for dtype in FLOATS
               if case[2] != "orthogonal" or dtype == np.float32]


def keyed_shapes(dtype) -> list[tuple[int, tuple[int, ...]]]:
    """The (seed, shape) pairs a dtype is drawn with: float32 all of them; each half float two, float16 the even
    ones and bfloat16 the odd ones (float16 a dense and a convolution kernel, bfloat16 a dense and a rank-3 one). An
    initializer's fans depend on the shape alone and its conversion to a dtype (16-bit draws: 32 bits cast, as
    JAX) on the dtype alone, and each (shape, dtype) costs a compilation of JAX's sampler (~1 s)."""
    if dtype == np.float32:
        return KEYED_SHAPES
    return KEYED_SHAPES[0 if dtype == np.float16 else 1::2]


@pytest.mark.parametrize("name,build,how,dtype", DTYPE_CASES)
def test_initializer_matches_jax(name, build, how, dtype):
    ours_init, theirs_init = build(minit), build(jinit)
    for seed, shape in keyed_shapes(dtype):
        ours = ours_init(mr.PRNGKey(seed), shape, dtype)
        theirs = theirs_init(jax.random.PRNGKey(seed), shape, dtype)
        assert_matches(ours, theirs, how)


@pytest.mark.parametrize("name,build,how", CASES, ids=[c[0] for c in CASES])
def test_default_dtype_and_jit(name, build, how):
    """Without a dtype the result is float32 (float64 asked for with x64 off is float32 too); jit equals eager."""
    ours_init, theirs_init = build(minit), build(jinit)
    eager = ours_init(mr.PRNGKey(3), (6, 4))
    assert_matches(eager, theirs_init(jax.random.PRNGKey(3), (6, 4)), how)
    assert np.asarray(ours_init(mr.PRNGKey(3), (6, 4), np.float64)).dtype == np.float32
    jitted = meshax.jit(lambda key: ours_init(key, (6, 4)))(mr.PRNGKey(3))
    assert_matches(jitted, eager, "exact" if how != "orthogonal" else how)


@pytest.mark.parametrize("name", ["glorot_uniform", "lecun_normal", "he_normal"])
def test_dtype_given_to_the_builder_is_the_default(name):
    ours = getattr(minit, name)(dtype=np.float16)(mr.PRNGKey(1), (5, 3))
    theirs = getattr(jinit, name)(dtype=np.float16)(jax.random.PRNGKey(1), (5, 3))
    assert np.asarray(ours).dtype == np.float16
    assert_matches(ours, theirs, "uniform" if name.endswith("uniform") else "truncated")


@pytest.mark.parametrize("distribution", ["uniform", "normal", "truncated_normal"])
def test_variance_scaling_on_complex_dtypes(distribution):
    init = lambda m: m.variance_scaling(1.3, "fan_avg", distribution)  # noqa: E731
    for seed in SEEDS:
        ours = np.asarray(init(minit)(mr.PRNGKey(seed), (7, 5), np.complex64))
        theirs = np.asarray(init(jinit)(jax.random.PRNGKey(seed), (7, 5), np.complex64))
        assert ours.dtype == theirs.dtype == np.complex64
        np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("shape,column_axis", [((30, 6), -1), ((6, 30), -1), ((4, 3, 12), -1), ((5, 2, 3), 0),
                                               ((16, 16), -1)])
def test_orthogonal_is_orthonormal_and_matches_jax(shape, column_axis):
    ours = np.asarray(minit.orthogonal(column_axis=column_axis)(mr.PRNGKey(5), shape))
    theirs = np.asarray(jinit.orthogonal(column_axis=column_axis)(jax.random.PRNGKey(5), shape))
    assert_matches(ours, theirs, "orthogonal")
    matrix = np.moveaxis(ours, column_axis, -1).reshape(-1, shape[column_axis]).astype(np.float64)
    gram = matrix.T @ matrix if matrix.shape[0] >= matrix.shape[1] else matrix @ matrix.T
    np.testing.assert_allclose(gram, np.eye(len(gram)), atol=1e-5)


def test_orthogonal_of_an_empty_shape_is_zeros():
    assert np.asarray(minit.orthogonal()(mr.PRNGKey(0), (0, 3))).shape == (0, 3)


@pytest.mark.parametrize("shape", [(3, 4, 4), (3, 3, 2, 5), (1, 3, 3, 4, 4)])
def test_delta_orthogonal_matches_jax(shape):
    ours = minit.delta_orthogonal(scale=1.5)(mr.PRNGKey(2), shape)
    theirs = jinit.delta_orthogonal(scale=1.5)(jax.random.PRNGKey(2), shape)
    assert_matches(ours, theirs, "orthogonal")


def test_errors_name_the_bad_value():
    key = mr.PRNGKey(0)
    with pytest.raises(ValueError, match=r"rank 1 .* give in_axis"):
        minit.glorot_normal()(key, (5,))
    with pytest.raises(ValueError, match="'fan_max' is unknown"):
        minit.variance_scaling(1.0, "fan_max", "normal")
    with pytest.raises(ValueError, match="'gamma' is unknown"):
        minit.variance_scaling(1.0, "fan_in", "gamma")
    with pytest.raises(ValueError, match=r"rank 2 or more, got \(4,\)"):
        minit.orthogonal()(key, (4,))
    with pytest.raises(ValueError, match=r"rank 3, 4 or 5"):
        minit.delta_orthogonal()(key, (4, 4))
    with pytest.raises(ValueError, match=r"shape\[-1\] >= shape\[-2\]"):
        minit.delta_orthogonal()(key, (3, 5, 4))
    with pytest.raises(TypeError, match="sequence of integers"):
        minit.zeros(key, (2.5, 3))
    with pytest.raises(TypeError, match="bare PartitionSpec"):
        minit.normal()(key, (8, 4), out_sharding=PartitionSpec("x"))


def test_out_sharding_places_the_result():
    sharding = NamedSharding(Mesh(np.array(meshax.devices()).reshape(4, 2), ("x", "y")), PartitionSpec("x", "y"))
    for init in (minit.zeros, minit.constant(2.0), minit.glorot_uniform(), minit.he_normal()):
        eager = init(mr.PRNGKey(4), (8, 6), out_sharding=sharding)
        assert eager.sharding == sharding
        np.testing.assert_array_equal(np.asarray(eager), np.asarray(init(mr.PRNGKey(4), (8, 6))))
        jitted = meshax.jit(lambda key, init=init: init(key, (8, 6), out_sharding=sharding))(mr.PRNGKey(4))
        assert jitted.sharding == sharding


def test_nn_is_a_package_with_the_initializers():
    import meshax.nn

    assert meshax.nn.initializers is minit
    assert minit.xavier_normal is minit.glorot_normal and minit.kaiming_uniform is minit.he_uniform
    assert isinstance(minit.lecun_normal(), minit.Initializer)
    assert set(jinit.__dict__) & {n for n in dir(jinit) if not n.startswith("_")} <= set(dir(minit))
