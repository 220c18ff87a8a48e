"""meshax.image against jax.image: resize and scale_and_translate for every method, eagerly, under jit, grad
and vmap, with several dtypes and shapes."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
import meshax.image as mi
from differential import assert_matches

METHODS = ["nearest", "linear", "bilinear", "trilinear", "cubic", "bicubic", "tricubic", "lanczos3", "lanczos5",
           "area"]
SHAPES = [((5, 7), (9, 3)), ((8, 8), (3, 5)), ((4, 6, 2), (7, 3, 2)), ((1, 6), (4, 6)), ((6,), (13,))]


def _image(shape, dtype=np.float32, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("antialias", [True, False])
def test_resize_matches_jax_eager_and_jit(method, shapes, antialias):
    x = _image(shapes[0])
    # JAX given the method the name stands for (its resize reads the name so): its compiled resize is cached per
    # method, so the aliases (bilinear, trilinear, bicubic, tricubic) and test_resize_enum_members's members
    # share one compilation instead of one per name; meshax gets the name
    theirs = jax.image.resize(x, shapes[1], jax.image.ResizeMethod.from_string(method), antialias=antialias)
    assert_matches(mi.resize(x, shapes[1], method, antialias=antialias), theirs, rtol=1e-5, atol=1e-5)
    jitted = meshax.jit(lambda a: mi.resize(a, shapes[1], method, antialias=antialias))
    assert_matches(jitted(meshax.numpy.asarray(x)), theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("shapes", SHAPES)
def test_resize_enum_members(antialias, shapes):
    x = _image(shapes[0], seed=3)
    for name in ["LINEAR", "CUBIC", "CUBIC_PYTORCH", "LANCZOS3", "LANCZOS5", "AREA", "NEAREST"]:
        theirs = jax.image.resize(x, shapes[1], getattr(jax.image.ResizeMethod, name), antialias=antialias)
        ours = mi.resize(x, shapes[1], getattr(mi.ResizeMethod, name), antialias=antialias)
        assert_matches(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float16, np.complex64, np.bool_])
@pytest.mark.parametrize("method", ["nearest", "linear", "cubic"])
def test_resize_dtypes(dtype, method):
    x = _image((4, 6), seed=1)
    x = (x > 0) if dtype is np.bool_ else np.abs(x).astype(dtype)
    theirs = jax.image.resize(x, (7, 3), method)
    tol = 3e-3 if dtype is np.float16 else 1e-5
    assert_matches(mi.resize(x, (7, 3), method), theirs, rtol=tol, atol=tol)


def test_resize_bfloat16():
    x = _image((4, 6)).astype(jax.numpy.bfloat16)
    theirs = jax.image.resize(x, (7, 3), "linear")
    assert_matches(mi.resize(np.asarray(x), (7, 3), "linear"), theirs, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "lanczos5", "area"])
@pytest.mark.parametrize("seed", range(6))
def test_scale_and_translate_matches_jax(method, seed):
    rng = np.random.default_rng(seed)
    in_shape, out_shape = (2,) + tuple(rng.integers(1, 9, 2)), (2,) + tuple(rng.integers(1, 11, 2))
    scale = rng.uniform(0.3, 2.5, 2).astype(np.float32)
    translation = rng.uniform(-3, 3, 2).astype(np.float32)
    x = _image(in_shape, seed=seed)
    for antialias in (True, False):
        theirs = jax.image.scale_and_translate(x, out_shape, (1, 2), scale, translation, method, antialias=antialias)
        ours = mi.scale_and_translate(x, out_shape, (1, 2), scale, translation, method, antialias=antialias)
        assert_matches(ours, theirs, rtol=1e-5, atol=1e-5)
        jitted = meshax.jit(lambda a, s, t: mi.scale_and_translate(a, out_shape, (1, 2), s, t, method,
                                                                   antialias=antialias))
        assert_matches(jitted(x, scale, translation), theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(8))
def test_scale_and_translate_cubic_pytorch(seed):
    """PyTorch's cubic: Keys' a = -0.75 with edge folding without antialiasing, samples far outside included."""
    rng = np.random.default_rng(seed)
    in_shape, out_shape = tuple(rng.integers(1, 9, 2)), tuple(rng.integers(1, 11, 2))
    scale = rng.uniform(0.2, 3, 2).astype(np.float32)
    translation = rng.uniform(-6, 6, 2).astype(np.float32)
    x = _image(in_shape, seed=seed)
    for antialias in (True, False):
        theirs = jax.image.scale_and_translate(x, out_shape, (0, 1), scale, translation,
                                               jax.image.ResizeMethod.CUBIC_PYTORCH, antialias=antialias)
        ours = mi.scale_and_translate(x, out_shape, (0, 1), scale, translation, mi.ResizeMethod.CUBIC_PYTORCH,
                                      antialias=antialias)
        assert_matches(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["linear", "cubic", "lanczos3", "area", "nearest"])
def test_resize_grad_and_vmap(method):
    x = _image((5, 6), seed=2)
    target = _image((3, 8), seed=4)

    def loss(resize, a):
        return (resize(a, (3, 8), method) * target).sum()

    assert_matches(meshax.grad(lambda a: loss(mi.resize, a))(x), jax.grad(lambda a: loss(jax.image.resize, a))(x),
                   rtol=1e-5, atol=1e-5)
    batch = _image((4, 5, 6), seed=5)
    assert_matches(meshax.vmap(lambda a: mi.resize(a, (3, 8), method))(batch),
                   jax.vmap(lambda a: jax.image.resize(a, (3, 8), method))(batch), rtol=1e-5, atol=1e-5)


def test_scale_and_translate_grad_wrt_image_scale_translation():
    x = _image((5, 6), seed=6)
    scale, translation = np.array([0.7, 1.4], np.float32), np.array([0.4, -0.6], np.float32)

    def loss(st, a, s, t):
        return (st(a, (4, 8), (0, 1), s, t, "linear") ** 2).sum()

    ours = meshax.grad(lambda a, s, t: loss(mi.scale_and_translate, a, s, t), argnums=(0, 1, 2))(x, scale,
                                                                                                  translation)
    theirs = jax.grad(lambda a, s, t: loss(jax.image.scale_and_translate, a, s, t), argnums=(0, 1, 2))(
        x, scale, translation)
    assert_matches(ours, theirs, rtol=1e-4, atol=1e-4)


def test_method_names_and_errors():
    assert [m.name for m in mi.ResizeMethod] == [m.name for m in jax.image.ResizeMethod]
    for name in METHODS + ["triangle"]:
        assert mi.ResizeMethod.from_string(name).name == jax.image.ResizeMethod.from_string(name).name
    for bad in ("cubic_pytorch", "NEAREST", "foo"):
        with pytest.raises(ValueError, match="Unknown resize method"):
            mi.ResizeMethod.from_string(bad)
    x = _image((3, 4))
    with pytest.raises(ValueError, match="shape must have length"):
        mi.resize(x, (2,), "linear")
    with pytest.raises(ValueError, match="Nearest neighbor"):
        mi.scale_and_translate(x, (3, 4), (0,), np.ones(1), np.zeros(1), "nearest")
    assert sorted(mi.__all__) == sorted(n for n in dir(jax.image) if not n.startswith("_"))
