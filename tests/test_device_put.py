"""device_put and the make_array_from_* family in one process with 8 CPU devices: property tests.

Meshes are random factorisations of random device subsets (in random orders) into 1-3
axes; specs use random subsets of the axes; shapes include uneven and empty dimensions.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import meshax
from meshax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from meshax.sharding import PartitionSpec as P

DEVICES = meshax.devices()
AXIS_NAMES = ("a", "b", "c")
DTYPES = [np.float32, np.int32, np.bool_, np.int8, np.float16, np.complex64, np.uint8]

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def factorisations(n: int, parts: int) -> list[tuple[int, ...]]:
    """Every ordered way to write n as a product of `parts` positive integers."""
    if parts == 1:
        return [(n,)]
    return [(d, *rest) for d in range(1, n + 1) if n % d == 0 for rest in factorisations(n // d, parts - 1)]


@st.composite
def meshes(draw) -> Mesh:
    chosen = draw(st.permutations(DEVICES))[: draw(st.integers(1, 8))]
    rank = draw(st.integers(1, 3))
    sizes = draw(st.sampled_from(factorisations(len(chosen), rank)))
    names = draw(st.permutations(AXIS_NAMES))[:rank]
    if draw(st.booleans()):
        return meshax.make_mesh(sizes, names, devices=chosen)
    return Mesh(np.array(chosen, dtype=object).reshape(sizes), names)


@st.composite
def specs(draw, mesh: Mesh, rank: int) -> P:
    """Each axis goes to one dimension or is left out; entries are names or tuples of names."""
    per_dim: list[list[str]] = [[] for _ in range(rank)]
    for name in draw(st.permutations(mesh.axis_names)):
        dim = draw(st.integers(-1, rank - 1)) if rank else -1
        if dim >= 0:
            per_dim[dim].append(name)
    entries = []
    for axes in per_dim:
        if not axes:
            entries.append(None)
        elif len(axes) == 1 and draw(st.booleans()):
            entries.append(axes[0])
        else:
            entries.append(tuple(axes))
    while entries and entries[-1] is None and draw(st.booleans()):
        entries.pop()
    return P(*entries)


shapes = st.lists(st.one_of(st.integers(1, 9), st.just(0), st.integers(10, 17)), min_size=0, max_size=3).map(tuple)


@st.composite
def shardings_for(draw, shape: tuple[int, ...]) -> NamedSharding:
    mesh = draw(meshes())
    return NamedSharding(mesh, draw(specs(mesh, len(shape))))


@st.composite
def cases(draw, count: int = 1):
    shape = draw(shapes)
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**16))
    value = (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)
    return (value, *[draw(shardings_for(shape)) for _ in range(count)])


def check_array(x: meshax.Array, value: np.ndarray, sharding) -> None:
    assert x.shape == value.shape and x.dtype == value.dtype
    assert x.sharding == sharding
    shards = x.addressable_shards
    assert {s.device for s in shards} == set(sharding.device_set)
    by_index: dict = {}
    buffers = x.local_buffers()
    for shard in shards:
        np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])
        assert np.asarray(shard.data).dtype == value.dtype
        by_index.setdefault(tuple((s.start, s.stop) for s in shard.index), []).append(shard)
    for group in by_index.values():  # replicas on this process share one buffer object
        assert len({id(buffers[s.device]) for s in group}) == 1
        if np.asarray(group[0].data).size:  # (empty trailing shards share a box without being replicas)
            assert sorted(s.replica_id for s in group) == list(range(len(group)))
    assert len({id(b) for b in buffers.values()}) == len(by_index)
    np.testing.assert_array_equal(np.asarray(x), value)


@SETTINGS
@given(cases(count=2))
def test_round_trip_between_two_shardings(case):
    value, first, second = case
    x = meshax.device_put(value, first)
    check_array(x, value, first)
    y = meshax.device_put(x, second)
    check_array(y, value, second)
    np.testing.assert_array_equal(meshax.device_get(y), value)
    z = meshax.device_put(y, first)
    check_array(z, value, first)
    assert meshax.device_put(z, first) is z  # same sharding: nothing to do


@SETTINGS
@given(cases(count=1), st.sampled_from(DEVICES))
def test_to_and_from_a_single_device(case, device):
    value, sharding = case
    x = meshax.device_put(meshax.device_put(value, device), sharding)
    check_array(x, value, sharding)
    y = meshax.device_put(x, device)
    assert y.sharding == SingleDeviceSharding(device)
    check_array(y, value, SingleDeviceSharding(device))


@SETTINGS
@given(cases(count=1))
def test_make_array_from_callback(case):
    value, sharding = case
    calls = []

    def callback(index):
        calls.append(index)
        return value[index]

    x = meshax.make_array_from_callback(value.shape, sharding, callback)
    check_array(x, value, sharding)
    distinct = {tuple((s.start, s.stop) for s in i) for i in sharding.devices_indices_map(value.shape).values()}
    assert len(calls) == len(distinct)  # one call per distinct shard, replicas reuse it


@SETTINGS
@given(cases(count=1))
def test_make_array_from_single_device_arrays(case):
    value, sharding = case
    index_map = sharding.addressable_devices_indices_map(value.shape)
    pieces = [meshax.device_put(value[index], device) for device, index in index_map.items()]
    x = meshax.make_array_from_single_device_arrays(value.shape, sharding, pieces)
    assert x.shape == value.shape and x.dtype == value.dtype and x.sharding == sharding
    for shard in x.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])
    for piece, (device, _) in zip(pieces, index_map.items()):  # no data moved: the same memory
        assert np.shares_memory(x.local_buffers()[device], piece.local_buffers()[device]) or piece.size == 0
    np.testing.assert_array_equal(np.asarray(x), value)


@SETTINGS
@given(cases(count=1))
def test_make_array_from_process_local_data_in_one_process(case):
    value, sharding = case  # one process holds every device, so its local data is the global array
    x = meshax.make_array_from_process_local_data(sharding, value)
    check_array(x, value, sharding)
    y = meshax.make_array_from_process_local_data(sharding, value, value.shape)
    check_array(y, value, sharding)


# --------------------------------------------------------------------------
# Errors of the make_array_from_* family
# --------------------------------------------------------------------------

MESH = meshax.make_mesh((4, 2), ("a", "b"))
ROWS = NamedSharding(MESH, P("a"))
VALUE = np.arange(48, dtype=np.float32).reshape(8, 6)


def test_callback_returning_a_wrong_shape():
    with pytest.raises(ValueError, match="shape"):
        meshax.make_array_from_callback(VALUE.shape, ROWS, lambda index: VALUE)
    with pytest.raises(ValueError, match="shape"):
        meshax.make_array_from_callback((8, 6), ROWS, lambda index: VALUE[index][:, :5])


def test_callback_dtype_argument_and_mixed_dtypes():
    x = meshax.make_array_from_callback(VALUE.shape, ROWS, lambda index: VALUE[index], dtype=np.int32)
    assert x.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(x), VALUE.astype(np.int32))
    flip = iter(range(100))
    with pytest.raises(ValueError, match="dtype"):
        meshax.make_array_from_callback(
            VALUE.shape, ROWS, lambda index: VALUE[index].astype(np.int32 if next(flip) % 2 else np.float32))
    wide = meshax.make_array_from_callback((4,), NamedSharding(MESH, P("a")), lambda index: np.arange(4)[index])
    assert wide.dtype == np.int32  # int64 canonicalised


def pieces_for(sharding, value):
    return [meshax.device_put(value[i], d) for d, i in sharding.addressable_devices_indices_map(value.shape).items()]


def test_single_device_arrays_errors():
    pieces = pieces_for(ROWS, VALUE)
    with pytest.raises(ValueError, match="shape"):
        meshax.make_array_from_single_device_arrays((16, 6), ROWS, pieces)
    with pytest.raises(ValueError, match="no array for local devices"):
        meshax.make_array_from_single_device_arrays(VALUE.shape, ROWS, pieces[:-1])
    wrong = [meshax.device_put(np.zeros((3, 6), np.float32), p.device) for p in pieces]
    with pytest.raises(ValueError, match="shape"):
        meshax.make_array_from_single_device_arrays(VALUE.shape, ROWS, wrong)
    elsewhere = NamedSharding(meshax.make_mesh((4,), ("a",), devices=DEVICES[:4]), P("a"))
    with pytest.raises(ValueError, match="not a local device"):
        meshax.make_array_from_single_device_arrays((4, 6), elsewhere, pieces_for(
            NamedSharding(meshax.make_mesh((4,), ("a",), devices=DEVICES[4:]), P("a")), VALUE[:4]))
    with pytest.raises(TypeError):
        meshax.make_array_from_single_device_arrays(VALUE.shape, ROWS, [VALUE[0:2]] * 8)
    with pytest.raises(TypeError):  # a multi-device array is not a single-device array
        meshax.make_array_from_single_device_arrays(VALUE.shape, ROWS, [meshax.device_put(VALUE, ROWS)] * 8)


def test_single_device_arrays_dtype_argument():
    pieces = pieces_for(ROWS, VALUE)
    x = meshax.make_array_from_single_device_arrays(VALUE.shape, ROWS, pieces, dtype=np.float32)
    assert x.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(x), VALUE)


def test_process_local_data_errors_and_global_shape():
    with pytest.raises(ValueError, match="local data of shape"):
        meshax.make_array_from_process_local_data(ROWS, VALUE, (16, 6))
    with pytest.raises(ValueError, match="rank"):
        meshax.make_array_from_process_local_data(NamedSharding(MESH, P("a", "b")), np.ones(8))
    x = meshax.make_array_from_process_local_data(ROWS, VALUE.astype(np.float64))
    assert x.dtype == np.float32 and x.shape == (8, 6)  # float64 canonicalised
    np.testing.assert_array_equal(np.asarray(x), VALUE)
    lists = meshax.make_array_from_process_local_data(ROWS, VALUE.tolist())
    np.testing.assert_array_equal(np.asarray(lists), VALUE)


# --------------------------------------------------------------------------
# Pytrees
# --------------------------------------------------------------------------


def test_device_get_on_pytrees():
    x = meshax.device_put(VALUE, ROWS)
    tree = {"x": x, "pair": (meshax.device_put(np.int32(3)), 7), "list": [x, "text", None]}
    got = meshax.device_get(tree)
    assert set(got) == {"x", "pair", "list"}
    assert isinstance(got["x"], np.ndarray) and isinstance(got["list"][0], np.ndarray)
    np.testing.assert_array_equal(got["x"], VALUE)
    assert isinstance(got["pair"], tuple) and got["pair"][1] == 7 and int(got["pair"][0]) == 3
    assert got["list"][1:] == ["text", None]
    np.testing.assert_array_equal(meshax.device_get(x), VALUE)
    assert meshax.device_get(5) == 5


def test_device_put_pytree_with_one_sharding():
    tree = {"a": VALUE, "b": [VALUE[:4], (VALUE[4:],)]}
    out = meshax.device_put(tree, ROWS)
    assert isinstance(out["b"], list) and isinstance(out["b"][1], tuple)
    for got, want in [(out["a"], VALUE), (out["b"][0], VALUE[:4]), (out["b"][1][0], VALUE[4:])]:
        assert got.sharding == ROWS
        check_array(got, want, ROWS)
    with pytest.raises(ValueError, match="rank"):  # the scalar leaf cannot take P('a')
        meshax.device_put(np.float32(2.0), ROWS)
    scalars = meshax.device_put({"s": np.float32(2.0), "t": 3}, NamedSharding(MESH, P()))
    assert float(scalars["s"]) == 2.0 and int(scalars["t"]) == 3


def test_device_put_pytree_with_a_tree_of_shardings():
    cols = NamedSharding(MESH, P(None, ("b", "a")))
    tree = {"a": VALUE, "b": [VALUE.T, (VALUE[:1], VALUE[1:])]}
    targets = {"a": ROWS, "b": [cols, (DEVICES[3], NamedSharding(MESH, P()))]}
    out = meshax.device_put(tree, targets)
    check_array(out["a"], VALUE, ROWS)
    check_array(out["b"][0], VALUE.T, cols)
    check_array(out["b"][1][0], VALUE[:1], SingleDeviceSharding(DEVICES[3]))
    check_array(out["b"][1][1], VALUE[1:], NamedSharding(MESH, P()))
    again = meshax.device_put(out, {"a": cols, "b": [ROWS, (ROWS, DEVICES[0])]})
    check_array(again["a"], VALUE, cols)
    check_array(again["b"][1][1], VALUE[1:], SingleDeviceSharding(DEVICES[0]))
    with pytest.raises(ValueError, match="does not match"):
        meshax.device_put(tree, {"a": ROWS, "b": [cols]})
    with pytest.raises(ValueError, match="does not match"):
        meshax.device_put([VALUE, VALUE], [ROWS])


def test_device_put_defaults_and_weak_types():
    x = meshax.device_put(VALUE)
    assert x.sharding == SingleDeviceSharding(DEVICES[0])
    assert meshax.device_put(x) is x
    assert meshax.device_put(1.5).weak_type and not meshax.device_put(np.float32(1.5)).weak_type
    moved = meshax.device_put(meshax.device_put(1.5), ROWS.with_spec(P()))
    assert moved.weak_type and moved.dtype == np.float32
    assert meshax.device_put([1, 2]) [0].dtype == np.int32
    assert math.isclose(float(meshax.device_put(2.5, DEVICES[7])), 2.5)


def test_resharding_a_scalar_keeps_array_buffers():
    # transfer._local_targets takes a replica's box as a view with source[relative(box, ...)]; for a
    # 0-d array that index is () and NumPy returns a scalar, not an array, so np.asarray(y) fails.
    x = meshax.device_put(np.float32(1.5), DEVICES[0])
    for target in (DEVICES[1], NamedSharding(MESH, P()), NamedSharding(meshax.make_mesh((1,), ("a",), devices=[DEVICES[0]]), P())):
        y = meshax.device_put(x, target)
        assert all(isinstance(b, np.ndarray) for b in y.local_buffers().values())
        assert np.asarray(y) == 1.5 and np.asarray(y).shape == ()


@pytest.mark.parametrize("spec,target", [(P("a"), None), (P(None, "a"), None), (P("a", "b"), None),
                                         (P("a"), P(None, "a")), (P(None, "a"), P("a"))])
def test_a_process_shards_are_views_of_one_buffer_where_they_tile_a_block(spec, target):
    """device_put (from the host) and a resharding (to `target`) lay the process's shards out as views of one
    buffer, so that a call over the joined blocks reads them without a copy (process_blocks.join_blocks)."""
    from meshax._src.interpreters.process_blocks import join_blocks

    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    y = meshax.device_put(x, NamedSharding(mesh, spec))
    if target is not None:
        y = meshax.device_put(y, NamedSharding(mesh, target))
    buffers = list({id(b): b for b in y.local_buffers().values()}.values())
    roots = {id(b.base if b.base is not None else b) for b in buffers}
    assert len(roots) == 1 and len(buffers) > 1
    np.testing.assert_array_equal(np.asarray(y), x)
    rows = [b for d, b in y.local_buffers().items() if d in mesh.devices[:, 0]]
    if (target or spec) == P("a"):
        joined = join_blocks(rows, 0)
        assert np.shares_memory(joined, rows[0]) and (joined == x).all()


def _where_values_land(lib, jnp):
    """(devices, committed) of values made in several ways, inside and outside `default_device`."""
    def where(x):
        return sorted(d.id for d in x.devices()), x.committed

    seen = {}
    with lib.default_device(lib.devices()[2]):
        seen["ones"] = where(jnp.ones(3))
        seen["device_put"] = where(lib.device_put(np.ones(3)))
        seen["jit of NumPy"] = where(lib.jit(lambda x: x * 2)(np.ones(3)))
        seen["jit of an uncommitted Array"] = where(lib.jit(lambda x: x * 2)(jnp.ones(3)))
        seen["eager"] = where(jnp.asarray(np.ones(3)) + 1)
        seen["committed stays"] = where(lib.device_put(np.ones(3), lib.devices()[1]) * 2)
        seen["cpu"] = where(lib.jit(lambda x: x + 1)(np.ones(2)))
    seen["after"] = where(jnp.ones(3))
    seen["device_put after"] = where(lib.device_put(np.ones(3)))
    lib.config.update("jax_default_device", lib.devices()[3])
    try:
        seen["config"] = where(jnp.ones(3))
    finally:
        lib.config.update("jax_default_device", None)
    with lib.default_device("cpu"):
        seen["'cpu'"] = where(jnp.ones(3))
    return seen


def test_default_device_places_uncommitted_values_as_jax():
    """jax.default_device and config's jax_default_device: host values, device_put without a target and the
    results of programs on them land on that device, uncommitted, as in JAX (run side by side)."""
    import jax
    import jax.numpy as jjnp

    import meshax.numpy as mjnp
    assert _where_values_land(meshax, mjnp) == _where_values_land(jax, jjnp)
    with meshax.default_device(meshax.devices()[2]):
        np.testing.assert_array_equal(np.asarray(meshax.jit(lambda x: x * 2)(np.arange(3.0))), [0.0, 2.0, 4.0])


def test_default_device_refuses_what_is_not_a_device_here():
    with meshax.default_device("tpu"):
        with pytest.raises(ValueError, match="neither a device nor 'cpu'"):
            meshax.numpy.ones(3)
