"""A jitted convolution's products with its windows run a few images at a time (primitives/window_products.py):
the forward product, the kernel's gradient and the input's gradient each as one primitive that never makes the
whole windows, with JAX's values eagerly, under jit, vmap and shard_map, split along the batch, for 1-3 spatial
dimensions, strides, padding and dilation."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from meshax.sharding import NamedSharding, PartitionSpec as P

_rng = np.random.default_rng(23)
CASES = {
    "2d-same": (("NHWC", "HWIO", "NHWC"), (5, 9, 8, 4), (3, 3, 4, 6), dict(window_strides=(1, 1), padding="SAME")),
    "2d-strided-dilated": (("NHWC", "HWIO", "NHWC"), (4, 11, 9, 3), (3, 2, 3, 5),
                           dict(window_strides=(2, 1), padding=((1, 2), (0, 1)), rhs_dilation=(1, 2))),
    "2d-nchw-valid": (("NCHW", "OIHW", "NCHW"), (3, 4, 8, 7), (6, 4, 3, 3), dict(window_strides=(1, 1),
                                                                                   padding="VALID")),
    "1d": (("NWC", "WIO", "NWC"), (6, 17, 3), (5, 3, 4), dict(window_strides=(1,), padding=((2, 2),))),
    "3d": (("NDHWC", "DHWIO", "NDHWC"), (2, 5, 6, 5, 2), (3, 3, 2, 2, 3),
           dict(window_strides=(1, 1, 1), padding="SAME")),
}


def _inputs(name, dtype=np.float32):
    _, image, kernel, _ = CASES[name]
    return _rng.normal(size=image).astype(dtype), _rng.normal(size=kernel).astype(dtype)


def _loss(L, name):
    numbers, _, _, options = CASES[name]

    def loss(image, kernel):
        out = L.lax.conv_general_dilated(image, kernel, dimension_numbers=numbers, **options)
        return (out * L.numpy.tanh(out)).sum()

    return loss


@pytest.fixture(autouse=True)
def _every_size_blocked(monkeypatch):
    """The rewrites for these small convolutions too (a program's windows of BLOCKED_FROM_BYTES or more, else), and
    the input's gradient as the flipped kernel's convolution whatever the features."""
    from meshax._src.primitives import window_products

    monkeypatch.setattr(window_products, "BLOCKED_FROM_BYTES", 0)
    monkeypatch.setattr(window_products, "FLIPPED_MIN_FEATURES", 1)


def _executed(function, *args):
    """The primitives of the program a jitted `function` runs (simplified and fused)."""
    from meshax._src.interpreters.fusion import executable

    (call,) = [eq for eq in meshax.make_jaxpr(function)(*args).jaxpr.equations if eq.primitive.name == "jit"]
    return {eq.primitive.name for eq in executable(call.params["jaxpr"]).equations}


def _close(ours, theirs, rtol=2e-4, atol=2e-3):
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


@pytest.mark.parametrize("block_bytes", [1, 1 << 20], ids=["image-blocks", "one-block"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_jitted_convolution_and_its_gradients_run_as_window_products_with_jaxs_values(name, block_bytes,
                                                                                       monkeypatch):
    from meshax._src.primitives import window_products

    monkeypatch.setattr(window_products, "WINDOW_BLOCK_BYTES", block_bytes)
    image, kernel = _inputs(name)
    value_and_grad = meshax.jit(meshax.value_and_grad(_loss(meshax, name), argnums=(0, 1)))
    executed = _executed(value_and_grad, image, kernel)
    assert {"conv_windows_product", "conv_windows_gradient", "conv_windows_product_sum"} <= executed, executed
    assert "conv_windows" not in executed
    theirs = jax.value_and_grad(_loss(jax, name), argnums=(0, 1))(image, kernel)
    for _ in range(2):  # the second call runs the generated program
        _close(value_and_grad(image, kernel), theirs)
    _close(meshax.value_and_grad(_loss(meshax, name), argnums=(0, 1))(image, kernel), theirs)  # eagerly


def test_window_products_in_float64_and_under_vmap():
    """Two leading dimensions (vmap over a batch of batches), and float64 kept float64."""
    with jax.enable_x64(True), meshax.enable_x64(True):
        images = _rng.normal(size=(3, 2, 9, 8, 4))
        kernel = _rng.normal(size=(3, 3, 4, 6))

        def batched(L):
            per_batch = L.grad(_loss(L, "2d-same"), argnums=(0, 1))
            return L.vmap(per_batch, in_axes=(0, None))

        ours = meshax.jit(batched(meshax))(images, kernel)
        theirs = batched(jax)(images, kernel)
        assert all(np.asarray(a).dtype == np.float64 for a in ours)
        _close(ours, theirs, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("spec", [("b",), (None, "b")], ids=["batch", "rows"])
def test_window_products_of_an_input_split_on_two_devices(spec):
    """Split along the batch, each device's kernel gradient is summed across them; split along rows, the input is
    gathered first (a window spans rows)."""
    image, kernel = _inputs("2d-same")
    image = np.concatenate([image, image[::-1]])[:6]
    mesh = meshax.make_mesh((2,), ("b",), devices=meshax.devices()[:2])
    split = meshax.device_put(image, NamedSharding(mesh, P(*spec)))
    grad = meshax.jit(meshax.grad(_loss(meshax, "2d-same"), argnums=(0, 1)))
    _close(grad(split, kernel), jax.grad(_loss(jax, "2d-same"), argnums=(0, 1))(image, kernel))


def test_window_products_inside_shard_map():
    """Each device's convolution and gradients on its own images (the kernel's gradient of an unvarying kernel
    summed across devices, as JAX's), and the kernel split across devices instead."""
    image, kernel = _inputs("2d-same")
    image = np.concatenate([image, image])[:8]

    def per_device(L, kernel_split):
        mesh = L.sharding.Mesh(np.array(L.devices()[:2]), ("b",))
        spec = L.sharding.PartitionSpec
        specs = (spec(), spec(None, None, None, "b")) if kernel_split else (spec("b"), spec())
        step = L.grad(_loss(L, "2d-same"), argnums=(0, 1))
        return L.jit(L.shard_map(step, mesh=mesh, in_specs=specs, out_specs=specs))

    for kernel_split in (False, True):
        _close(per_device(meshax, kernel_split)(image, kernel), per_device(jax, kernel_split)(image, kernel))


def test_no_window_product_where_the_windows_are_read_otherwise(monkeypatch):
    """Integer convolutions, grouped ones and those whose windows are small keep the windows' copy and the plain
    product, with JAX's values; the input's gradient of an input with few features is made by window positions."""
    from meshax._src.primitives import window_products
    image = _rng.integers(-3, 4, size=(2, 6, 5, 4)).astype(np.int32)
    kernel = _rng.integers(-3, 4, size=(3, 3, 4, 2)).astype(np.int32)
    numbers = ("NHWC", "HWIO", "NHWC")

    def conv(L):
        return lambda i, k: L.lax.conv_general_dilated(i, k, (1, 1), "SAME", dimension_numbers=numbers)

    assert "conv_windows_product" not in _executed(meshax.jit(conv(meshax)), image, kernel)
    np.testing.assert_array_equal(np.asarray(meshax.jit(conv(meshax))(image, kernel)),
                                  np.asarray(jax.jit(conv(jax))(image, kernel)))
    grouped = _rng.normal(size=(3, 3, 2, 4)).astype(np.float32)
    floats = image.astype(np.float32)

    def grouped_conv(L):
        return lambda i, k: L.lax.conv_general_dilated(i, k, (1, 1), "SAME", dimension_numbers=numbers,
                                                       feature_group_count=2)

    assert "conv_windows_product" not in _executed(meshax.jit(grouped_conv(meshax)), floats, grouped)
    _close(meshax.jit(grouped_conv(meshax))(floats, grouped), jax.jit(grouped_conv(jax))(floats, grouped))
    monkeypatch.undo()  # the module's own sizes
    image, kernel = _inputs("2d-same")  # windows of 5x9x8 positions, 36 features: 52 KB; 4 input features
    value_and_grad = meshax.jit(meshax.value_and_grad(_loss(meshax, "2d-same"), argnums=(0, 1)))
    executed = _executed(value_and_grad, image, kernel)
    assert "conv_windows" in executed and "conv_windows_product_sum" in executed
    assert not {"conv_windows_product", "conv_windows_gradient"} & executed, executed
    flipped = []
    original = window_products._windows_product_impl
    monkeypatch.setattr(window_products, "_windows_product_impl",
                        lambda *args, **params: (flipped.append(1), original(*args, **params))[1])
    theirs = jax.value_and_grad(_loss(jax, "2d-same"), argnums=(0, 1))(image, kernel)
    for _ in range(2):
        _close(value_and_grad(image, kernel), theirs)
    assert not flipped


@pytest.mark.parametrize("image_spec, kernel_spec", [(("b",), ()), ((), (None, None, None, "b")),
                                                     (("b",), (None, None, None, "b")), ((None, None, "b"), ()),
                                                     ((), (None, None, "b"))],
                         ids=["batch", "output-features", "both-on-one-axis", "columns", "input-features"])
def test_window_products_results_are_split_as_jaxs(image_spec, kernel_spec):
    """The forward product keeps the batch's and the kernel's output features' splits, the kernel's gradient the
    output features', the input's gradient the kernel's input features', and the results of an input split along
    a spatial dimension are split so, as JAX's convolution places them (under jit; eagerly the forward result);
    values equal JAX's."""
    image, kernel = _inputs("2d-same")
    image = np.concatenate([image, image[::-1]])[:6]

    def run(L):
        mesh = L.sharding.Mesh(np.array(L.devices()[:2]), ("b",))
        placed = [L.device_put(v, L.sharding.NamedSharding(mesh, L.sharding.PartitionSpec(*spec)))
                  for v, spec in ((image, image_spec), (kernel, kernel_spec))]
        numbers, _, _, options = CASES["2d-same"]

        def conv(i, k):
            return L.lax.conv_general_dilated(i, k, dimension_numbers=numbers, **options)

        gradient = L.grad(_loss(L, "2d-same"), argnums=(0, 1))
        return [f(*placed) for f in (conv, L.jit(conv))] + [*L.jit(gradient)(*placed)]

    ours, theirs = run(meshax), run(jax)
    assert [tuple(a.sharding.spec) for a in ours] == [tuple(b.sharding.spec) for b in theirs]
    _close(ours, theirs)


@pytest.mark.parametrize("image, kernel, padding", [((0, 8, 8, 4), (3, 3, 4, 5), "SAME"),
                                                    ((2, 2, 2, 4), (3, 3, 4, 5), "VALID"),
                                                    ((3, 5, 5, 4), (1, 1, 4, 5), "SAME"),
                                                    ((2, 6, 6, 1), (6, 6, 1, 2), "VALID")],
                         ids=["no-images", "no-positions", "one-by-one", "window-as-large-as-the-image"])
def test_window_products_of_empty_and_degenerate_shapes(image, kernel, padding):
    image = _rng.normal(size=image).astype(np.float32)
    kernel = _rng.normal(size=kernel).astype(np.float32)

    def loss(L):
        return lambda i, k: (L.lax.conv_general_dilated(i, k, (1, 1), padding,
                                                        dimension_numbers=("NHWC", "HWIO", "NHWC")) ** 2).sum()

    ours = meshax.jit(meshax.value_and_grad(loss(meshax), argnums=(0, 1)))
    theirs = jax.value_and_grad(loss(jax), argnums=(0, 1))(image, kernel)
    for _ in range(2):  # the second call runs the generated program
        _close(ours(image, kernel), theirs)
