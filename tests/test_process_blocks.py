"""A controller runs a primitive once over its devices' joined blocks where that pays (always with one compute
thread): the same values as device by device (NumPy's and JAX's), on every layout, whether the blocks join or
not."""
from __future__ import annotations

import numpy as np
import pytest
import threadpoolctl

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax._src.core.core import impl_rules
from meshax._src.interpreters import process_blocks
from meshax._src.primitives import array_primitives, cpu_kernels
from meshax._src.runtime import cpu_budget
from meshax._src.runtime.compute_pool import run_each as real_run_each


def _counted(function, calls: list[str], label: str = ""):
    """`function(primitive, ...)` recording `label` + the primitive's name in `calls` whenever it returns a result."""

    def counting(primitive, *args, **kwargs):
        result = function(primitive, *args, **kwargs)
        if result is not None:
            calls.append(label + primitive.name)
        return result

    return counting


@pytest.fixture
def joined_calls(monkeypatch):
    """One compute thread (the devices' calls would run one after the other), and a count of the joined calls."""
    monkeypatch.setenv("MESHAX_CPU_THREADS", "1")
    calls: list[str] = []
    monkeypatch.setattr("meshax._src.interpreters.eager.run_joined", _counted(process_blocks.run_joined, calls))
    return calls


def _mlp_data(batch=64, sizes=(48, 256, 256, 10), seed=0):
    rng = np.random.default_rng(seed)
    params = [{"w": (rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32),
               "b": (0.1 * rng.standard_normal(o)).astype(np.float32)} for i, o in zip(sizes, sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    labels = rng.integers(0, sizes[-1], batch)
    return params, x, np.eye(sizes[-1], dtype=np.float32)[labels]


def _loss(params, x, one_hot):
    for layer in params[:-1]:
        x = meshax.nn.relu(x @ layer["w"] + layer["b"])
    logits = x @ params[-1]["w"] + params[-1]["b"]
    return -jnp.mean(jnp.sum(one_hot * meshax.nn.log_softmax(logits), axis=-1))


def _numpy_step(params, x, one_hot, lr):
    """The same SGD step by hand (train_floor's algebra) in float64."""
    p = [{k: v.astype(np.float64) for k, v in layer.items()} for layer in params]
    x, one_hot = x.astype(np.float64), one_hot.astype(np.float64)
    hs, acts = [], [x]
    for layer in p[:-1]:
        hs.append(acts[-1] @ layer["w"] + layer["b"])
        acts.append(np.maximum(hs[-1], 0))
    logits = acts[-1] @ p[-1]["w"] + p[-1]["b"]
    shifted = logits - logits.max(-1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)
    g = (probs - one_hot) / len(x)
    grads = []
    for i in reversed(range(len(p))):
        grads.append({"w": acts[i].T @ g, "b": g.sum(0)})
        if i:
            g = (g @ p[i]["w"].T) * (hs[i - 1] > 0)
    grads.reverse()
    loss = -np.mean(np.sum(one_hot * (shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))), -1))
    return [{k: layer[k] - lr * grad[k] for k in layer} for layer, grad in zip(p, grads)], loss


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_a_data_parallel_training_step_joins_the_devices_blocks_with_numpys_values(joined_calls, devices):
    mesh = meshax.make_mesh((devices,), ("data",), devices=meshax.devices()[:devices])
    params, x, one_hot = _mlp_data()
    replicated, rows = meshax.NamedSharding(mesh, meshax.P()), meshax.NamedSharding(mesh, meshax.P("data"))

    @meshax.jit
    def step(params, x, one_hot):
        loss, grads = meshax.value_and_grad(_loss)(params, x, one_hot)
        return meshax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss

    placed = meshax.device_put(params, replicated)
    xs, ys = meshax.device_put(x, rows), meshax.device_put(one_hot, rows)
    new, loss = step(placed, xs, ys)
    expected, expected_loss = _numpy_step(params, x, one_hot, 0.1)
    np.testing.assert_allclose(float(loss), expected_loss, rtol=1e-5)
    for layer, want in zip(new, expected):
        for key in ("w", "b"):
            np.testing.assert_allclose(np.asarray(layer[key]), want[key], rtol=2e-5, atol=2e-6)
    # every matmul but two small weight gradients (summed device by device, as XLA orders small sums)
    assert joined_calls.count("dot_general") >= 6, joined_calls
    again, _ = step(new, xs, ys)  # a second step reads the first one's joined results
    assert np.isfinite(np.asarray(again[0]["w"])).all()


@pytest.mark.parametrize("where", ["eager", "jit"])
def test_elementwise_chains_and_selects_join_and_keep_numpys_bits(joined_calls, where):
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((256, 128)).astype(np.float32) for _ in range(2))
    b[::7] = np.nan
    rows = meshax.NamedSharding(mesh, meshax.P("data"))

    def chain(u, v):
        relu = jnp.where(u > 0, u, 0.0)
        return lax.mul(relu, v) - jnp.maximum(u, v) * 2.0, jnp.where(v > u, v, u) @ jnp.ones((128, 8), np.float32)

    run = meshax.jit(chain) if where == "jit" else chain
    first, second = run(meshax.device_put(a, rows), meshax.device_put(b, rows))
    relu = np.where(a > 0, a, np.float32(0))
    np.testing.assert_array_equal(np.asarray(first), relu * b - np.maximum(a, b) * np.float32(2))
    np.testing.assert_allclose(np.asarray(second), np.where(b > a, b, a) @ np.ones((128, 8), np.float32), rtol=1e-5)
    assert joined_calls, "nothing ran over the joined blocks"


def test_blocks_that_do_not_line_up_run_device_by_device_with_the_same_values(joined_calls):
    """Devices in another order than their blocks', a 2-D mesh, columns split: joined only where it is exact."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    devices = meshax.devices()
    shuffled = meshax.sharding.Mesh(np.array([devices[2], devices[0], devices[3], devices[1]]), ("data",))
    grid = meshax.make_mesh((2, 2), ("data", "model"), devices=devices[:4])
    cases = [(shuffled, meshax.P("data"), meshax.P()), (grid, meshax.P("data"), meshax.P(None, "model")),
             (grid, meshax.P(None, "model"), meshax.P("model")), (grid, meshax.P(("data", "model")), meshax.P())]
    for mesh, a_spec, w_spec in cases:
        x = meshax.device_put(a, meshax.NamedSharding(mesh, a_spec))
        y = meshax.device_put(w, meshax.NamedSharding(mesh, w_spec))
        out = meshax.jit(lambda u, v: jnp.tanh(u) @ v + 1.0)(x, y)
        np.testing.assert_allclose(np.asarray(out), np.tanh(a) @ w + 1, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(meshax.grad(lambda u, v: jnp.sum((u @ v) ** 2))(x, y)),
                                   2 * (a @ w) @ w.T, rtol=1e-4, atol=1e-4)


def test_uneven_blocks_join(joined_calls):
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(7)
    a = rng.standard_normal((10, 300)).astype(np.float32)  # 3, 3, 3, 1 rows
    w = rng.standard_normal((300, 200)).astype(np.float32)
    x = meshax.device_put(a, meshax.NamedSharding(mesh, meshax.P("data")))
    out = meshax.jit(lambda u, v: jnp.maximum(u @ v, 0.0) * 3.0)(x, meshax.device_put(w, meshax.NamedSharding(
        mesh, meshax.P())))
    np.testing.assert_allclose(np.asarray(out), np.maximum(a @ w, 0) * 3, rtol=1e-5, atol=1e-5)
    assert "dot_general" in joined_calls


def test_a_product_over_the_split_rows_is_summed_once_per_process(joined_calls, monkeypatch):
    """x.T @ g over rows split across the devices: one product over the process's rows stands for the devices'
    partial sums in the reduction that follows (no per-device partials, no local combine)."""
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(11)
    a = rng.standard_normal((512, 200)).astype(np.float32)
    g = rng.standard_normal((512, 300)).astype(np.float32)
    rows = meshax.NamedSharding(mesh, meshax.P("data"))
    impl = impl_rules[array_primitives.dot_general]
    shapes = []

    def recording(lhs, rhs, **params):
        shapes.append(lhs.shape)
        return impl(lhs, rhs, **params)

    monkeypatch.setitem(impl_rules, array_primitives.dot_general, recording)
    out = meshax.jit(lambda u, v: u.T @ v)(meshax.device_put(a, rows), meshax.device_put(g, rows))
    np.testing.assert_allclose(np.asarray(out), a.T.astype(np.float64) @ g, rtol=1e-4, atol=1e-4)
    assert len(shapes) == 1 and sorted(shapes[0]) == [200, 512], shapes  # one product over all 512 rows
    assert out.sharding.is_fully_replicated


@pytest.fixture
def joined_device_calls(monkeypatch):
    """One compute thread, and a count of the calls run over the joined values of a shard_map's devices."""
    monkeypatch.setenv("MESHAX_CPU_THREADS", "1")
    calls: list[str] = []
    where = "meshax._src.interpreters.shard_map."
    monkeypatch.setattr(where + "run_joined_on_devices", _counted(process_blocks.run_joined_on_devices, calls))
    monkeypatch.setattr(where + "run_summed_product", _counted(process_blocks.run_summed_product, calls, "summed "))
    return calls


@pytest.mark.parametrize("devices", [2, 4])
def test_an_fsdp_step_in_shard_map_joins_the_devices_rows_with_numpys_values(joined_device_calls, devices):
    mesh = meshax.make_mesh((devices,), ("data",), devices=meshax.devices()[:devices])
    params, x, one_hot = _mlp_data()
    P = meshax.P
    specs = [{"w": P("data"), "b": P()} for _ in params]

    def local_loss(params, x, one_hot):
        full = [{"w": lax.all_gather(p["w"], "data", tiled=True), "b": p["b"]} for p in params]
        return lax.pmean(_loss(full, x, one_hot), "data")

    def local_step(params, x, one_hot):
        loss, grads = meshax.value_and_grad(local_loss)(params, x, one_hot)
        return meshax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss

    step = meshax.jit(meshax.shard_map(local_step, mesh=mesh, in_specs=(specs, P("data"), P("data")),
                                       out_specs=(specs, P())))
    placed = [{k: meshax.device_put(v, meshax.NamedSharding(mesh, spec[k])) for k, v in layer.items()}
              for layer, spec in zip(params, specs)]
    rows = meshax.NamedSharding(mesh, P("data"))
    new, loss = step(placed, meshax.device_put(x, rows), meshax.device_put(one_hot, rows))
    expected, expected_loss = _numpy_step(params, x, one_hot, 0.1)
    np.testing.assert_allclose(float(loss), expected_loss, rtol=1e-5)
    for layer, want in zip(new, expected):
        for key in ("w", "b"):
            np.testing.assert_allclose(np.asarray(layer[key]), want[key], rtol=2e-5, atol=2e-6)
    assert joined_device_calls.count("dot_general") >= 5, joined_device_calls  # forward and input gradients
    # the 256x256 weight's gradient, summed next by its reduce-scatter: one product over the process's rows (the
    # two small ones are summed device by device, in XLA's order)
    assert joined_device_calls.count("summed dot_general") == 1, joined_device_calls


def test_shard_map_joins_only_what_is_a_block_of_one_call(joined_device_calls):
    """Per-device values with a shared constant of their own shape, per-device weights, a contraction over the
    rows: each device's own result, as NumPy computes it."""
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(2)
    a = rng.standard_normal((32, 6)).astype(np.float32)
    w = rng.standard_normal((24, 5)).astype(np.float32)  # 6 rows per device
    c = rng.standard_normal((8, 6)).astype(np.float32)  # one device's block of `a`, the same for every device
    P = meshax.P

    def body(x, v):
        return jnp.maximum(x, 0.0) + c, x @ v, x.T @ x, jnp.tanh(x) * 2.0

    out = meshax.shard_map(body, mesh=mesh, in_specs=(P("data"), P("data")),
                           out_specs=(P("data"), P("data"), P("data"), P("data")))(
        meshax.device_put(a, meshax.NamedSharding(mesh, P("data"))),
        meshax.device_put(w, meshax.NamedSharding(mesh, P("data"))))
    blocks = [a[8 * i:8 * i + 8] for i in range(4)]
    np.testing.assert_allclose(np.asarray(out[0]), np.concatenate([np.maximum(b, 0) + c for b in blocks]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out[1]), np.concatenate([b @ w[6 * i:6 * i + 6] for i, b in
                                                                   enumerate(blocks)]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out[2]), np.concatenate([b.T @ b for b in blocks]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out[3]), np.tanh(a) * 2, rtol=1e-6)


def test_a_per_device_row_broadcast_along_the_rows_is_not_joined(joined_device_calls):
    """Each device's own (1, n) row broadcast over its rows in a fused cluster (a softmax's labels row, say): the
    devices' rows cannot be one call's, each device gets its own."""
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    a = np.random.default_rng(4).standard_normal((64, 10)).astype(np.float32)

    def body(x):
        row = jnp.arange(10.0, dtype=np.float32)[None, :] * (lax.axis_index("data") + 1).astype(np.float32)
        return jnp.maximum(x * row + 1.0, 0.0) - row

    out = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=meshax.P("data"), out_specs=meshax.P("data")))(
        meshax.device_put(a, meshax.NamedSharding(mesh, meshax.P("data"))))
    rows = [np.arange(10, dtype=np.float32)[None, :] * (i + 1) for i in range(4)]
    want = np.concatenate([np.maximum(a[16 * i:16 * i + 16] * r + 1, 0) - r for i, r in enumerate(rows)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)


@pytest.mark.parametrize("where", ["eager", "jit", "shard_map"])
def test_reductions_along_the_kept_rows_join_and_keep_numpys_bits(joined_calls, joined_device_calls, where):
    """Sums, maxima and minima of each row (a softmax's), NaNs included, over the joined rows of 4 devices: each
    row reduced on its own, bit for bit as NumPy; a sum over the split rows is not joined."""
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((64, 3, 33)) * 1e3).astype(np.float32)
    a[5, 1, 7] = np.nan

    def reduce(x):
        return jnp.sum(x, axis=(1, 2)), jnp.max(x, axis=-1), jnp.min(x, axis=1, keepdims=True), jnp.sum(x, axis=0)

    if where == "shard_map":
        P = meshax.P
        run = meshax.shard_map(reduce, mesh=mesh, in_specs=P("data"), out_specs=(P("data"),) * 4)
    else:
        run = meshax.jit(reduce) if where == "jit" else reduce
    ours = run(meshax.device_put(a, meshax.NamedSharding(mesh, meshax.P("data"))))
    blocks = np.split(a, 4)
    for got, want in zip(ours, [np.concatenate([b.sum(axis=(1, 2)) for b in blocks]), a.max(axis=-1),
                                a.min(axis=1, keepdims=True)]):
        np.testing.assert_array_equal(np.asarray(got), want)
    over_rows = np.concatenate([b.sum(axis=0) for b in blocks]) if where == "shard_map" else a.sum(axis=0)
    np.testing.assert_allclose(np.asarray(ours[3]), over_rows, rtol=1e-5, atol=1e-2)
    assert {"reduce_sum", "reduce_max", "reduce_min"} <= set(joined_calls + joined_device_calls), \
        joined_calls + joined_device_calls


def test_with_many_compute_threads_large_elementwise_calls_run_side_by_side_into_one_buffer(monkeypatch):
    """With 2 compute threads: a matmul and a small elementwise result run once over the joined rows, a large
    elementwise one (a cluster, or not) per device side by side (one call would leave a thread idle), each
    writing its block of one buffer, which the next joined call reads without a copy."""
    monkeypatch.setenv("MESHAX_CPU_THREADS", "2")
    calls: list[str] = []
    monkeypatch.setattr("meshax._src.interpreters.eager.run_joined", _counted(process_blocks.run_joined, calls))
    side_by_side: list[str] = []
    monkeypatch.setattr(process_blocks, "_side_by_side", _counted(process_blocks._side_by_side, side_by_side))
    copied: list[tuple] = []  # joins of blocks that had to be copied

    def join(buffers, dim, _join=process_blocks.join_blocks):
        joined = _join(buffers, dim)
        if not np.shares_memory(joined, buffers[0]):
            copied.append(joined.shape)
        return joined

    monkeypatch.setattr(process_blocks, "join_blocks", join)
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(6)
    small, large = rng.standard_normal((64, 16)).astype(np.float32), rng.standard_normal((1024, 512)).astype(np.float32)
    rows = meshax.NamedSharding(mesh, meshax.P("data"))
    w = np.ones((16, 8), np.float32)
    product, doubled = meshax.device_put(small, rows) @ w, meshax.device_put(small, rows) * 2.0
    np.testing.assert_allclose(np.asarray(product), small @ w, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(doubled), small * np.float32(2))
    assert calls == ["dot_general", "mul"] and not side_by_side, calls
    placed = meshax.device_put(large, rows)
    doubled = placed * 2.0
    np.testing.assert_array_equal(np.asarray(doubled), large * np.float32(2))
    assert side_by_side == ["mul"], side_by_side
    step = meshax.jit(lambda x, w: meshax.nn.relu(x * 2.0 + 1.0) @ w)
    w = rng.standard_normal((512, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(step(placed, w)), np.maximum(large * 2 + 1, 0) @ w, rtol=1e-4, atol=1e-4)
    assert side_by_side[0] == "mul" and "fused" in side_by_side and not copied, (side_by_side, copied)


def test_a_reduction_over_rows_of_column_blocks_joins_along_the_columns(joined_calls):
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    a = np.random.default_rng(8).standard_normal((33, 64)).astype(np.float32)
    x = meshax.device_put(a, meshax.NamedSharding(mesh, meshax.P(None, "data")))
    np.testing.assert_array_equal(np.asarray(jnp.max(x, axis=0)), a.max(axis=0))
    assert joined_calls == ["reduce_max"], joined_calls


def test_shard_map_stacks_scalars_reductions_over_rows_and_small_transcendentals_with_numpys_bits(
        joined_device_calls):
    """A device's loss (a sum over its rows, then scalar arithmetic), its bias gradients (sums and maxima over its
    rows) and small transcendentals, on 4 devices: one call over the devices' values stacked (or joined), each
    device's values bit for bit those of its block computed alone (NumPy's; a large sum over rows, BLAS's)."""
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((64, 33)) * 10.0 ** rng.integers(-3, 4, (64, 33))).astype(np.float32)
    a[3, 4] = np.nan
    P = meshax.P

    large = rng.standard_normal((4 * 128, 200)).astype(np.float32)  # too large to stack by copying

    def body(x, y):
        loss = jnp.sum(x)
        return (-loss / 3.0 * 2.0)[None], jnp.sum(x, axis=0)[None], jnp.max(x, axis=0)[None], jnp.exp(x), \
            jnp.log(jnp.abs(x) + 1.0), jnp.sum(x * 2.0 + 1.0, axis=0)[None], jnp.sum(y, axis=0)[None]

    ours = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=(P("data"),) * 7))(
        meshax.device_put(a, meshax.NamedSharding(mesh, P("data"))),
        meshax.device_put(large, meshax.NamedSharding(mesh, P("data"))))
    blocks = np.split(a, 4)
    f32 = np.float32
    wants = [np.stack([-b.sum() / f32(3) * f32(2) for b in blocks]), np.stack([_row_sums(b) for b in blocks]),
             np.stack([b.max(axis=0) for b in blocks]), np.exp(a),
             np.log(np.abs(a) + f32(1)),
             np.stack([_row_sums(b * f32(2) + f32(1)) for b in blocks]),  # a reshape of the joined rows
             np.stack([_row_sums(b) for b in np.split(large, 4)])]
    for got, want in zip(ours, wants):  # exp's subnormal results flush to zero, as on JAX (runtime/denormals.py)
        np.testing.assert_array_equal(np.asarray(got), np.where(np.abs(want) < np.finfo(f32).tiny, f32(0), want))
    assert {"reduce_sum", "reduce_max", "fused", "exp", "log"} <= set(joined_device_calls), joined_device_calls


def test_a_small_replicated_value_read_row_by_row_is_repeated_for_each_device(joined_device_calls):
    """A value every device holds alike, of a device's rows (the mean's cotangent, the same on every device), in a
    cluster with the devices' own rows (their labels' one-hot): one call over the joined rows, the shared value
    repeated for each device."""
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(8)
    labels = rng.integers(0, 10, 64)
    c = rng.standard_normal((16, 1)).astype(np.float32)  # one device's rows
    P = meshax.P

    def body(labels, c):
        return meshax.nn.one_hot(labels, 10) * (c * 2.0)  # split (16, 1) labels, one (16, 1) value: not stackable

    out = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=(P("data"), P()), out_specs=P("data")))(
        meshax.device_put(labels, meshax.NamedSharding(mesh, P("data"))), c)
    want = np.concatenate([np.eye(10, dtype=np.float32)[b] * (c * np.float32(2)) for b in np.split(labels, 4)])
    np.testing.assert_array_equal(np.asarray(out), want)
    assert "fused" in joined_device_calls, joined_device_calls


def test_gather_of_rows_lying_in_one_buffer_is_a_view_of_it(monkeypatch):
    """An all_gather of a weight sharded by rows over the process's devices (FSDP) whose shards are consecutive rows
    of one buffer (as device_put lays them out) gives that buffer itself, read-only; the values are the
    weight's, and those of shards laid out apart are too."""
    from meshax._src.lax import parallel
    from meshax.sharding import NamedSharding, PartitionSpec as P
    mesh = meshax.make_mesh((len(meshax.devices()),), ("data",))
    assert mesh.size > 1
    w = np.arange(4 * mesh.size * 6, dtype=np.float32).reshape(4 * mesh.size, 6)
    gathered = []
    monkeypatch.setattr(parallel, "join_blocks", lambda pieces, axis: gathered.append(
        process_blocks.join_blocks(pieces, axis)) or gathered[-1])

    def body(shard, other):  # two gathers: grouped into one (schedule.py)
        return lax.all_gather(shard, "data", tiled=True) * 2, lax.all_gather(other, "data", tiled=True)

    step = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P(), check_vma=False))
    sharded = meshax.device_put(w, NamedSharding(mesh, P("data")))
    doubled, same = step(sharded, sharded)
    np.testing.assert_array_equal(np.asarray(doubled), w * 2)
    np.testing.assert_array_equal(np.asarray(same), w)
    assert len(gathered) == 2 and not gathered[0].flags.writeable
    assert np.shares_memory(gathered[0], np.asarray(sharded.addressable_shards[0].data))
    pieces = [np.full((4, 6), i, np.float32) for i in range(mesh.size)]  # buffers of their own: joined by a copy
    np.testing.assert_array_equal(process_blocks.join_blocks(pieces, 0), np.concatenate(pieces))


def _activations_and_cotangents(seed: int, rows: int, features: int):
    """A 4-device mesh, its rows' sharding, and float32 activations (rows per device x features) and cotangents
    (x 10) to place on it."""
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4 * rows, features)).astype(np.float32)
    g = rng.standard_normal((4 * rows, 10)).astype(np.float32)
    return mesh, meshax.NamedSharding(mesh, meshax.P("data")), x, g


@pytest.mark.parametrize("threads", ["1", "2"])
def test_products_of_two_per_device_operands_run_stacked_with_each_devices_bits(monkeypatch, threads):
    """x.T @ g on each device (a weight's gradient before its sum over the devices) as one stacked call: each
    device's product bit for bit NumPy's product of that device's blocks."""
    monkeypatch.setenv("MESHAX_CPU_THREADS", threads)
    stacked = []
    monkeypatch.setattr("meshax._src.interpreters.process_blocks._run_stacked",
                        _counted(process_blocks._run_stacked, stacked))
    mesh, rows, x, g = _activations_and_cotangents(seed=3, rows=32, features=300)
    P = meshax.P
    body = meshax.shard_map(lambda a, b: (jnp.maximum(a, 0.0).T @ b)[None], mesh=mesh,
                            in_specs=(P("data"), P("data")), out_specs=P("data"))
    out = np.asarray(meshax.jit(body)(meshax.device_put(x, rows), meshax.device_put(g, rows)))
    for i in range(4):
        block = slice(32 * i, 32 * (i + 1))
        assert out[i].tobytes() == (np.maximum(x[block], 0).T @ g[block]).tobytes(), i
    assert "dot_general" in stacked, stacked


@pytest.mark.parametrize("threads", ["2", "4"])
def test_large_stacked_products_spread_over_many_threads_with_each_devices_bits(monkeypatch, threads):
    """With 4 compute threads or more, a large stacked product (a 1024x10 weight's gradient from 128 rows per device)
    runs as ranges of the stack side by side, each on one BLAS thread; with fewer, as one call. Each device's product
    is bit for bit NumPy's product of that device's blocks on as many BLAS threads as it ran with (one when spread,
    as each device's own call beside the others'; the share as one call): OpenBLAS's Haswell kernels round a
    product on one thread and on several differently."""
    monkeypatch.setenv("MESHAX_CPU_THREADS", threads)
    spread = []
    monkeypatch.setattr("meshax._src.runtime.compute_pool.run_each",
                        lambda calls, **kw: spread.append(([getattr(c, "func", None) for c in calls], kw))
                        or real_run_each(calls, **kw))
    mesh, rows, x, g = _activations_and_cotangents(seed=4, rows=128, features=1024)
    P = meshax.P
    body = meshax.shard_map(lambda a, b: lax.dot_general(jnp.maximum(a, 0.0), b, (((0,), (0,)), ((), ())))[None],
                            mesh=mesh, in_specs=(P("data"), P("data")), out_specs=P("data"))
    out = np.asarray(meshax.jit(body)(meshax.device_put(x, rows), meshax.device_put(g, rows)))
    with _blas_threads(1 if threads == "4" else _policy_threads(1024, 10, 128, int(threads))):
        for i in range(4):
            block = slice(128 * i, 128 * (i + 1))
            assert out[i].tobytes() == (np.maximum(x[block], 0).T @ g[block]).tobytes(), i
    products = [kw for funcs, kw in spread if funcs == [impl_rules[array_primitives.dot_general]] * 4]
    assert products == ([{"blas": True}] if threads == "4" else []), spread


def _row_sums(block: np.ndarray) -> np.ndarray:
    """A device's sum over the rows of its `block` alone: NumPy's reduction, or for blocks large enough one BLAS
    product with ones (cpu_kernels.reduce_sum)."""
    return cpu_kernels.reduce_sum(block, (0,))


def _policy_threads(m: int, n: int, k: int, share: int) -> int:
    """The BLAS threads meshax gives one m x k @ k x n product with `share` threads all free (cpu_budget's policy):
    OpenBLAS rounds a product differently on different thread counts."""
    return cpu_budget.product_threads(m * n * k, m, share, share)


def _blas_threads(threads: int):
    return threadpoolctl.threadpool_limits(threads, user_api="blas")


def _pairwise(parts):
    """XLA's order of adding the devices' partial sums: neighbours first, ((p0 + p1) + (p2 + p3)) + ..."""
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


@pytest.mark.parametrize("devices", [4, 8])
@pytest.mark.parametrize("where", ["eager", "jit"])
def test_small_partial_products_and_sums_over_the_split_rows_run_stacked_with_xlas_bits(monkeypatch, devices, where):
    """Data parallel: a small weight's gradient (x.T @ g) and a bias's (a sum over the rows), whose devices' partial
    sums are added in XLA's pairwise order: each device's part from one call over the devices' blocks stacked,
    the total bit for bit that of NumPy's per-block results added pairwise."""
    monkeypatch.setenv("MESHAX_CPU_THREADS", "1")
    stacked = []
    monkeypatch.setattr("meshax._src.interpreters.process_blocks._run_stacked",
                        _counted(process_blocks._run_stacked, stacked))
    mesh = meshax.make_mesh((devices,), ("data",), devices=meshax.devices()[:devices])
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((devices * 16, 24)) * 10.0 ** rng.integers(-3, 4, (devices * 16, 24))).astype(np.float32)
    g = rng.standard_normal((devices * 16, 10)).astype(np.float32)
    rows = meshax.NamedSharding(mesh, meshax.P("data"))

    def grads(u, v):
        return lax.dot_general(u, v, (((0,), (0,)), ((), ()))), jnp.sum(v, axis=0), jnp.max(u, axis=0)

    f = grads if where == "eager" else meshax.jit(grads)
    weight, bias, largest = f(meshax.device_put(x, rows), meshax.device_put(g, rows))
    blocks = list(zip(np.split(x, devices), np.split(g, devices)))
    assert np.asarray(weight).tobytes() == _pairwise([a.T @ b for a, b in blocks]).tobytes()
    assert np.asarray(bias).tobytes() == _pairwise([b.sum(axis=0) for _, b in blocks]).tobytes()
    np.testing.assert_array_equal(np.asarray(largest), x.max(axis=0))
    assert {"dot_general", "reduce_sum", "reduce_max"} <= set(stacked), stacked


@pytest.mark.parametrize("where", ["jit", "shard_map"])
def test_large_stacked_reductions_spread_over_the_threads_with_each_devices_bits(monkeypatch, where):
    """With 2 compute threads, a stacked reduction's operand large enough runs as ranges of the stack side by side:
    each device's sum over its rows bit for bit that of its block alone (and its product beside it, one
    stacked call)."""
    monkeypatch.setenv("MESHAX_CPU_THREADS", "2")
    spread = []
    monkeypatch.setattr("meshax._src.runtime.compute_pool.run_each",
                        lambda calls, **kw: spread.append([getattr(c, "func", None) for c in calls])
                        or real_run_each(calls, **kw))
    mesh, rows, x, g = _activations_and_cotangents(seed=9, rows=512, features=160)
    P = meshax.P

    def parts(u, v):  # doubled first (exactly): operands that are one joined result, stacked without a copy
        u, v = u * 2.0, v * 2.0
        return lax.dot_general(u, v, (((0,), (0,)), ((), ()))), jnp.sum(u, axis=0)

    if where == "shard_map":
        f = meshax.jit(meshax.shard_map(lambda u, v: [p[None] for p in parts(u, v)], mesh=mesh, in_specs=P("data"),
                                        out_specs=P("data")))
    else:
        f = meshax.jit(parts)
    weight, bias = (np.asarray(o) for o in f(meshax.device_put(x, rows), meshax.device_put(g, rows)))
    with _blas_threads(_policy_threads(160, 160, 128, 2)):
        weights = [(2 * a).T @ (2 * b) for a, b in zip(np.split(x, 4), np.split(g, 4))]
    biases = [_row_sums(2 * a) for a in np.split(x, 4)]
    if where == "shard_map":
        assert all(weight[i].tobytes() == w.tobytes() for i, w in enumerate(weights))
        assert all(bias[i].tobytes() == b.tobytes() for i, b in enumerate(biases))
    else:  # the devices' parts added in XLA's order
        assert weight.tobytes() == _pairwise(weights).tobytes() and bias.tobytes() == _pairwise(biases).tobytes()
    reduce_sum = impl_rules[array_primitives.REDUCE["sum"]]
    assert [reduce_sum] * 2 in spread, spread  # the sum's two ranges of the stack


def test_a_joined_results_buffers_are_its_views_and_the_next_joined_call_reads_it_whole(joined_calls, monkeypatch):
    """An Array computed by one call over the devices' rows holds that result's views (JoinedValues, uneven blocks
    too); the next call joining them reads the result itself, without a copy."""
    from meshax._src.arrays.joined_values import JoinedValues
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    x = np.arange(4 * 6 * 5, dtype=np.float32).reshape(24, 5)
    rows = meshax.NamedSharding(mesh, meshax.P("data"))
    first = meshax.jit(lambda u: u * 2.0)(meshax.device_put(x, rows))
    buffers = first.local_buffers()
    assert isinstance(buffers, JoinedValues) and buffers.whole.shape == (24, 5)
    assert all(np.shares_memory(buffers[d], buffers.whole) and not buffers[d].flags.writeable for d in buffers)
    joins = []
    real_join = process_blocks.join_blocks
    monkeypatch.setattr(process_blocks, "join_blocks", lambda *a: joins.append(a) or real_join(*a))
    second = meshax.jit(lambda u: u + 1.0)(first)
    np.testing.assert_array_equal(np.asarray(second), x * 2 + 1)
    assert not joins and len(joined_calls) == 2, (joins, joined_calls)


def test_joined_values_are_the_devices_blocks_of_one_result():
    """A joined call's per-device values: read-only views of the result, cut into equal blocks along a dimension
    (or stacked); the result is found again only for the same devices in the same order, cut the same way."""
    from meshax._src.arrays.joined_values import STACKED, joined_values, whole_of
    devices = tuple(meshax.devices()[:4])
    result = np.arange(8 * 8, dtype=np.float32).reshape(8, 8)
    blocks = {0: lambda i: result[2 * i:2 * i + 2], 1: lambda i: result[:, 2 * i:2 * i + 2]}
    for how, block in blocks.items():
        values = joined_values(result, how, devices)
        assert list(values) == list(devices)
        for i, d in enumerate(devices):
            np.testing.assert_array_equal(values[d], block(i))
            assert not values[d].flags.writeable and np.shares_memory(values[d], result)
        assert whole_of(values, devices, how) is values.whole
        assert whole_of(values, devices, 1 - how) is None and whole_of(values, devices[::-1], how) is None
        assert whole_of(dict(values), devices, how) is None  # a plain dict of the same views: not known whole
    stacked = joined_values(np.arange(24.0).reshape(4, 6), STACKED, devices)
    np.testing.assert_array_equal(stacked[devices[2]], np.arange(12.0, 18.0))
    rows = whole_of(stacked, devices, 0)  # a C-ordered stack is also the devices' values joined along their rows
    np.testing.assert_array_equal(rows, np.concatenate(list(stacked.values())))
    assert np.shares_memory(rows, stacked.whole) and not rows.flags.writeable
    assert whole_of(joined_values(np.asfortranarray(np.ones((4, 6))), STACKED, devices), devices, 0) is None
    scalars = joined_values(np.arange(4.0), STACKED, devices)  # each device's scalar: a 0-d view, not a NumPy scalar
    assert all(type(v) is np.ndarray and v.shape == () and v == i for i, v in enumerate(scalars.values()))
    uneven = joined_values(result, 0, devices, [3, 3, 1, 1])  # blocks of the sizes given
    assert [uneven[d].shape[0] for d in devices] == [3, 3, 1, 1]
    np.testing.assert_array_equal(np.concatenate(list(uneven.values())), result)


def test_a_cluster_runs_once_over_the_joined_rows_once_its_kernel_ran(monkeypatch):
    """With 2 compute threads a large cluster's devices' calls run side by side until its compiled kernel has
    run; from then on it runs once over the devices' joined rows (the kernel spreads them over the threads)."""
    from meshax._src.interpreters import fusion

    monkeypatch.setenv("MESHAX_CPU_THREADS", "2")
    monkeypatch.setattr(fusion.EXECUTORS["cpu"].numba.compiler, "background", False)
    side_by_side: list[str] = []
    monkeypatch.setattr(process_blocks, "_side_by_side", _counted(process_blocks._side_by_side, side_by_side))
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    large = np.random.default_rng(9).standard_normal((1024, 512)).astype(np.float32)
    placed = meshax.device_put(large, meshax.NamedSharding(mesh, meshax.P("data")))
    step = meshax.jit(lambda x: jnp.maximum(x * 3.0 - 1.0, 0.5))
    expected = np.maximum(large * np.float32(3) - np.float32(1), np.float32(0.5))
    for call in range(3):
        assert np.asarray(step(placed)).tobytes() == expected.tobytes()
        assert side_by_side == ["fused"], (call, side_by_side)  # the first call only


def test_reshapes_and_scatters_over_the_process_devices_keep_their_result_whole(monkeypatch):
    """Inside shard_map over this process's devices, a reshape of a joined result and a psum_scatter's blocks are
    one result cut into the devices' blocks (read at once by the next joined call), with each device's values."""
    from meshax._src.interpreters import shard_map as device_map
    kinds: dict[str, set] = {}
    process = device_map.DeviceTrace.process

    def recording(self, primitive, args, params):
        out = process(self, primitive, args, params)
        for tracer in out if isinstance(out, list) else [out]:
            kinds.setdefault(primitive.name, set()).add(type(tracer.payload).__name__)
        return out

    monkeypatch.setattr(device_map.DeviceTrace, "process", recording)
    mesh = meshax.make_mesh((4,), ("data",), devices=meshax.devices()[:4])
    P = meshax.P
    x = np.arange(4 * 6 * 8, dtype=np.float32).reshape(24, 8)

    def body(a):
        rows = jnp.sum(a * 2.0, axis=1).reshape(a.shape[0], 1)
        return rows + 1.0, lax.psum_scatter(a * 3.0, "data", scatter_dimension=1, tiled=True)

    step = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=(P("data"), P(None, "data"))))
    rows, scattered = step(meshax.device_put(x, meshax.NamedSharding(mesh, P("data"))))
    np.testing.assert_array_equal(np.asarray(rows), (x * 2).sum(axis=1, keepdims=True) + 1)
    np.testing.assert_allclose(np.asarray(scattered), sum(3 * x[6 * i:6 * i + 6] for i in range(4)), rtol=1e-6)
    assert kinds["reshape"] == {"JoinedValues"}, kinds
    scatter = kinds.get("grouped_sum", set()) | kinds.get("reduce_scatter", set())
    assert scatter == {"JoinedValues"}, kinds
