"""Meshes, PartitionSpecs, shardings and Array basics in one process with 8 CPU devices.

Sharding metadata (devices_indices_map, shard_shape, replica ids, ...) is compared
differentially with real JAX for the same mesh shapes, device orders and specs; a
meshax device and a JAX device correspond when they sit at the same position of
meshax.devices() and jax.devices(). Uneven shapes, which JAX refuses, are checked
against NumPy slicing and the torch.chunk rule documented in meshax/_src/sharding/shardings.py.
"""
from __future__ import annotations

import itertools
import pickle
from collections import OrderedDict

import jax
import numpy as np
import pytest
from jax.sharding import Mesh as JaxMesh
from jax.sharding import NamedSharding as JaxNamedSharding
from jax.sharding import PartitionSpec as JaxP

import meshax
from meshax._src.sharding.mesh import current_mesh
from meshax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding
from meshax.sharding import PartitionSpec as P

DEVICES = meshax.devices()
JAX_DEVICES = jax.devices()


def test_both_sides_have_eight_devices():
    assert len(DEVICES) == 8 and len(JAX_DEVICES) == 8
    assert [d.id for d in DEVICES] == list(range(8))
    assert meshax.process_count() == 1 and meshax.process_index() == 0


# --------------------------------------------------------------------------
# Mesh
# --------------------------------------------------------------------------


def test_make_mesh_shape_names_size_and_ids():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    assert mesh.shape == OrderedDict([("a", 4), ("b", 2)])
    assert list(mesh.shape) == ["a", "b"]
    assert mesh.axis_names == ("a", "b")
    assert mesh.size == 8
    assert mesh.axis_sizes == (4, 2)
    assert mesh.devices.shape == (4, 2)
    np.testing.assert_array_equal(mesh.device_ids, np.arange(8).reshape(4, 2))
    assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)
    assert mesh.local_devices == DEVICES
    assert mesh.local_mesh == mesh
    assert not mesh.is_multi_process


def test_make_mesh_keeps_the_order_of_given_devices():
    chosen = [DEVICES[i] for i in (7, 2, 5, 0)]
    mesh = meshax.make_mesh((2, 2), ("x", "y"), devices=chosen)
    np.testing.assert_array_equal(mesh.device_ids, [[7, 2], [5, 0]])
    assert mesh.size == 4
    assert mesh.local_mesh == mesh


def test_mesh_constructor_like_the_seeds():
    # mesh = Mesh(jax.devices(), ('a',)) is "the same as" make_mesh((device_count,), ('a',)).
    assert Mesh(meshax.devices(), ("a",)) == meshax.make_mesh((meshax.device_count(),), ("a",))
    # A single axis name may be a bare string (seed 004: Mesh(jax.devices(), 'x')).
    mesh = Mesh(meshax.devices(), "x")
    assert mesh.axis_names == ("x",) and mesh.shape == {"x": 8}
    grid = Mesh(np.array(meshax.devices()).reshape(2, 4), ["host", "dev"])
    assert grid.axis_names == ("host", "dev") and grid.shape == {"host": 2, "dev": 4}
    assert hash(grid) == hash(Mesh(np.array(meshax.devices()).reshape(2, 4), ("host", "dev")))
    assert grid != Mesh(np.array(meshax.devices()).reshape(4, 2), ("host", "dev"))


def test_mesh_reprs_as_in_the_seeds():
    # Inside a sharding, a mesh prints as seed 001 shows it ...
    assert meshax.make_mesh((8,), ("a",)).short_repr() == "Mesh('a': 8)"
    assert meshax.make_mesh((4, 2), ("a", "b")).short_repr() == "Mesh('a': 4, 'b': 2)"
    explicit = meshax.make_mesh((8,), ("a",), axis_types=(AxisType.Explicit,))
    assert explicit.short_repr() == "Mesh('a': 8, axis_types=(Explicit,))"
    two = meshax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
    assert two.short_repr() == "Mesh('a': 4, 'b': 2, axis_types=(Explicit, Explicit))"
    mixed = meshax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit, AxisType.Auto))
    assert mixed.short_repr() == "Mesh('a': 4, 'b': 2, axis_types=(Explicit, Auto))"
    assert repr(AxisType.Explicit) == "Explicit"
    # ... and on its own as seed 003 shows it.
    assert repr(Mesh(np.array(DEVICES), ("i",))) == "Mesh(device_ids=array([0, 1, 2, 3, 4, 5, 6, 7]), axis_names=('i',))"
    assert repr(Mesh(np.array(DEVICES).reshape(4, 2), ("i", "j"))) == (
        "Mesh(device_ids=array([[0, 1],\n       [2, 3],\n       [4, 5],\n       [6, 7]]), axis_names=('i', 'j'))")


def test_mesh_is_a_context_manager_for_bare_specs():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    value = np.arange(16, dtype=np.float32).reshape(8, 2)
    assert current_mesh() is None
    with pytest.raises(ValueError, match="needs a mesh"):
        meshax.device_put(value, P("a"))
    with mesh as entered:
        assert entered is mesh and current_mesh() is mesh
        x = meshax.device_put(value, P("a"))
        inner = meshax.make_mesh((8,), ("c",))
        with inner:
            assert current_mesh() is inner
            y = meshax.device_put(value, P("c"))
        assert current_mesh() is mesh
    assert current_mesh() is None
    assert x.sharding == NamedSharding(mesh, P("a"))
    assert y.sharding == NamedSharding(inner, P("c"))
    np.testing.assert_array_equal(np.asarray(x), value)
    with meshax.sharding.use_mesh(mesh):
        assert current_mesh() is mesh
    assert current_mesh() is None


def test_mesh_errors():
    with pytest.raises(ValueError, match="at least one device"):
        Mesh(np.array([], dtype=object), ("a",))
    assert [d.id for d in meshax.make_mesh((3,), ("a",)).devices.flat] == [0, 1, 2]  # the first ones, as JAX
    with pytest.raises(ValueError, match="8 devices were given.*--cpu-devices"):
        meshax.make_mesh((16,), ("a",))
    with pytest.raises(ValueError, match="2 devices were given"):
        meshax.make_mesh((4,), ("a",), devices=DEVICES[:2])
    with pytest.raises(ValueError, match="axis names"):
        meshax.make_mesh((4, 2), ("a",))
    with pytest.raises(ValueError, match="distinct"):
        meshax.make_mesh((4, 2), ("a", "a"))
    with pytest.raises(ValueError, match="each device once"):
        Mesh([DEVICES[0], DEVICES[0]], ("a",))
    with pytest.raises(ValueError, match="axis names"):
        Mesh(np.array(DEVICES).reshape(2, 4), ("a",))
    with pytest.raises(ValueError, match="axis_types"):
        meshax.make_mesh((8,), ("a",), axis_types=(AxisType.Explicit,) * 2)
    with pytest.raises(TypeError):
        Mesh(JAX_DEVICES, ("a",))


# --------------------------------------------------------------------------
# PartitionSpec
# --------------------------------------------------------------------------


def test_partition_spec_repr():
    assert repr(P("a")) == "PartitionSpec('a',)"
    assert repr(P()) == "PartitionSpec()"
    assert repr(P("a", None)) == "PartitionSpec('a', None)"
    assert repr(P(("a", "b"))) == "PartitionSpec(('a', 'b'),)"
    assert repr(P(None, "b")) == "PartitionSpec(None, 'b')"
    assert P is PartitionSpec


def test_partition_spec_trailing_none_equality_and_hash():
    assert P("a") == P("a", None) == P("a", None, None)
    assert hash(P("a")) == hash(P("a", None)) == hash(P("a", None, None))
    assert P() == P(None) and hash(P()) == hash(P(None, None))
    assert P("a") != P(None, "a")
    assert P("a", "b") != P("b", "a")
    assert P(("a", "b")) != P(("b", "a"))
    assert P(("a",)) == P("a")
    assert len({P("a"), P("a", None), P(None, "a")}) == 2
    assert P("a", None) != P("a", "b")
    assert pickle.loads(pickle.dumps(P("a", None, ("b", "c")))) == P("a", None, ("b", "c"))
    assert tuple(P("a", None)) == ("a", None)


def test_partition_spec_rejects_bad_entries():
    with pytest.raises(TypeError):
        P(1)
    with pytest.raises(TypeError):
        P(("a", None))


# --------------------------------------------------------------------------
# Sharding reprs, equality, errors
# --------------------------------------------------------------------------


def test_sharding_reprs_as_in_the_seeds():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    assert repr(NamedSharding(mesh, P("a"))) == (
        "NamedSharding(mesh=Mesh('a': 4, 'b': 2), spec=PartitionSpec('a',), memory_kind=device)")
    explicit = meshax.make_mesh((4,), ("a",), devices=DEVICES[4:], axis_types=(AxisType.Explicit,))
    assert str(NamedSharding(explicit, P("a"))) == (
        "NamedSharding(mesh=Mesh('a': 4, axis_types=(Explicit,)), spec=PartitionSpec('a',), memory_kind=device)")
    assert repr(SingleDeviceSharding(DEVICES[3])) == "SingleDeviceSharding(device=CpuDevice(id=3))"  # seed 003
    # The seed's line for its subset mesh of 8 devices (of 16).
    eight = meshax.make_mesh((8,), ("a",), axis_types=(AxisType.Explicit,))
    assert repr(NamedSharding(eight, P("a"))) == (
        "NamedSharding(mesh=Mesh('a': 8, axis_types=(Explicit,)), spec=PartitionSpec('a',), memory_kind=device)")
    assert NamedSharding(mesh, P("a")).memory_kind == "device"


def test_sharding_equality_and_hash():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    assert NamedSharding(mesh, P("a")) == NamedSharding(mesh, P("a", None))
    assert hash(NamedSharding(mesh, P("a"))) == hash(NamedSharding(mesh, P("a", None)))
    assert NamedSharding(mesh, P("a")) != NamedSharding(mesh, P("b"))
    assert NamedSharding(mesh, P("a")) != NamedSharding(meshax.make_mesh((2, 4), ("a", "b")), P("a"))
    assert NamedSharding(mesh, ("a", None)) == NamedSharding(mesh, P("a"))
    assert NamedSharding(mesh, None) == NamedSharding(mesh, P())
    assert SingleDeviceSharding(DEVICES[1]) == SingleDeviceSharding(DEVICES[1])
    assert SingleDeviceSharding(DEVICES[1]) != SingleDeviceSharding(DEVICES[2])


def test_sharding_errors():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    with pytest.raises(ValueError, match="'c' is not in the mesh"):
        NamedSharding(mesh, P("c"))
    with pytest.raises(ValueError, match="'c' is not in the mesh"):
        NamedSharding(mesh, P(("a", "c")))
    with pytest.raises(ValueError, match="more than once"):
        NamedSharding(mesh, P("a", "a"))
    with pytest.raises(ValueError, match="more than once"):
        NamedSharding(mesh, P(("a", "b"), "a"))
    with pytest.raises(ValueError, match="more than once"):
        NamedSharding(mesh, P(("b", "b")))
    long = NamedSharding(mesh, P("a", "b"))
    with pytest.raises(ValueError, match="longer than the array's rank"):
        long.shard_shape((8,))
    with pytest.raises(ValueError, match="longer than the array's rank"):
        long.devices_indices_map((8,))
    with pytest.raises(ValueError, match="longer than the array's rank"):
        meshax.device_put(np.ones(8), long)
    with pytest.raises(ValueError, match="longer than the array's rank"):
        meshax.device_put(meshax.device_put(np.ones(8)), long)
    with pytest.raises(ValueError, match="memory_kind"):
        NamedSharding(mesh, P(), memory_kind="pinned_host")
    with pytest.raises(TypeError):
        NamedSharding("not a mesh", P())
    with pytest.raises(TypeError):
        SingleDeviceSharding(JAX_DEVICES[0])


# --------------------------------------------------------------------------
# Differential: sharding metadata against real JAX
# --------------------------------------------------------------------------

MESHES = [  # (axis sizes, axis names, positions of the devices in jax.devices()/meshax.devices())
    ((8,), ("a",), list(range(8))),
    ((4, 2), ("a", "b"), list(range(8))),
    ((2, 4), ("a", "b"), list(range(8))[::-1]),
    ((2, 2, 2), ("x", "y", "z"), [3, 6, 0, 5, 1, 7, 2, 4]),
    ((1, 8), ("a", "b"), [1, 0, 3, 2, 5, 4, 7, 6]),
    ((8, 1), ("a", "b"), list(range(8))),
    ((4,), ("a",), [5, 1, 7, 3]),
    ((3,), ("x",), [2, 6, 0]),
    ((3, 2), ("r", "c"), [7, 0, 6, 1, 5, 2]),
    ((1,), ("only",), [6]),
]


def specs_for(axis_names: tuple[str, ...], rank: int):
    """Every spec of length <= rank using each axis at most once (all orders within a dimension)."""
    seen = set()
    for placement in itertools.product([None, *range(rank)], repeat=len(axis_names)):
        per_dim: list[list[str]] = [[] for _ in range(rank)]
        for name, dim in zip(axis_names, placement):
            if dim is not None:
                per_dim[dim].append(name)
        for orders in itertools.product(*[list(itertools.permutations(axes)) for axes in per_dim]):
            entries = [None if not axes else (axes[0] if len(axes) == 1 else tuple(axes)) for axes in orders]
            for length in range(rank + 1):
                if any(entries[length:]):
                    continue
                key = tuple(entries[:length])
                if key not in seen:
                    seen.add(key)
                    yield key


def even_shape(rank: int) -> tuple[int, ...]:
    return (24, 48, 24)[:rank]  # divisible by every product of axis sizes above


def pair(sizes, names, positions, spec):
    jax_mesh = JaxMesh(np.array([JAX_DEVICES[i] for i in positions]).reshape(sizes), names)
    mesh = Mesh(np.array([DEVICES[i] for i in positions], dtype=object).reshape(sizes), names)
    return JaxNamedSharding(jax_mesh, JaxP(*spec)), NamedSharding(mesh, P(*spec))


def jax_position(device) -> int:
    return JAX_DEVICES.index(device)


def meshax_position(device) -> int:
    return DEVICES.index(device)


def slices(index):
    return tuple((s.start, s.stop, s.step) for s in index)


@pytest.mark.parametrize("sizes,names,positions", MESHES, ids=lambda v: str(v))
def test_sharding_metadata_matches_jax(sizes, names, positions):
    checked = 0
    for rank in range(4):
        shape = even_shape(rank)
        for spec in specs_for(names, rank):
            theirs, ours = pair(sizes, names, positions, spec)
            where = f"mesh {sizes} {names}, spec {spec}, shape {shape}"
            expected = [(jax_position(d), slices(i)) for d, i in theirs.devices_indices_map(shape).items()]
            got = [(meshax_position(d), slices(i)) for d, i in ours.devices_indices_map(shape).items()]
            assert got == expected, where
            assert ours.shard_shape(shape) == theirs.shard_shape(shape), where
            assert ours.is_fully_replicated == theirs.is_fully_replicated, where
            assert ours.num_devices == theirs.num_devices, where
            assert {meshax_position(d) for d in ours.device_set} == {jax_position(d) for d in theirs.device_set}
            assert ours.is_fully_addressable and theirs.is_fully_addressable
            assert {meshax_position(d) for d in ours.addressable_devices} == {
                jax_position(d) for d in theirs.addressable_devices}
            got_addr = {meshax_position(d): slices(i) for d, i in ours.addressable_devices_indices_map(shape).items()}
            assert got_addr == dict(expected), where
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("sizes,names,positions", MESHES[:6], ids=lambda v: str(v))
def test_array_shards_match_jax(sizes, names, positions):
    """Shard devices, indices, replica ids and data of device_put arrays, against jax.device_put."""
    for rank in (1, 2):
        shape = tuple(np.prod(sizes) * k for k in (2, 1)[:rank])
        value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        for spec in specs_for(names, rank):
            theirs, ours = pair(sizes, names, positions, spec)
            a, b = jax.device_put(value, theirs), meshax.device_put(value, ours)
            expected = [(jax_position(s.device), slices(s.index), s.replica_id) for s in a.addressable_shards]
            got = [(meshax_position(s.device), slices(s.index), s.replica_id) for s in b.addressable_shards]
            assert sorted(got) == sorted(expected), (sizes, spec)
            global_got = [(meshax_position(s.device), slices(s.index), s.replica_id) for s in b.global_shards]
            assert sorted(global_got) == sorted(expected)
            for shard in b.addressable_shards:
                np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])
            assert b.is_fully_replicated == a.is_fully_replicated
            assert {meshax_position(d) for d in b.devices()} == {jax_position(d) for d in a.devices()}


def test_single_device_sharding_matches_jax():
    theirs, ours = jax.sharding.SingleDeviceSharding(JAX_DEVICES[5]), SingleDeviceSharding(DEVICES[5])
    for shape in [(), (3,), (4, 5)]:
        assert [slices(i) for i in ours.devices_indices_map(shape).values()] == [
            slices(i) for i in theirs.devices_indices_map(shape).values()]
        assert ours.shard_shape(shape) == theirs.shard_shape(shape)
    assert ours.is_fully_replicated == theirs.is_fully_replicated
    assert ours.num_devices == theirs.num_devices == 1
    assert ours.device_set == {DEVICES[5]}


# --------------------------------------------------------------------------
# Uneven shapes: torch.chunk's rule, checked with NumPy
# --------------------------------------------------------------------------


def chunk_sizes(n: int, k: int) -> list[int]:
    """torch.chunk's rule via NumPy: pieces of ceil(n/k) rows; the last ones shorter or empty."""
    step = -(-n // k)
    return [len(piece) for piece in np.split(np.arange(n), [min(i * step, n) for i in range(1, k)])]


@pytest.mark.parametrize("n,k,sizes", [
    (7, 4, [2, 2, 2, 1]),
    (5, 4, [2, 2, 1, 0]),
    (3, 8, [1, 1, 1, 0, 0, 0, 0, 0]),
    (9, 8, [2, 2, 2, 2, 1, 0, 0, 0]),
    (10, 4, [3, 3, 3, 1]),
    (8, 8, [1] * 8),
    (0, 4, [0, 0, 0, 0]),
])
def test_chunk_rule_examples(n, k, sizes):
    assert chunk_sizes(n, k) == sizes
    mesh = Mesh(np.array(DEVICES[:k], dtype=object), ("a",))
    sharding = NamedSharding(mesh, P("a"))
    index_map = sharding.devices_indices_map((n,))
    assert [s.stop - s.start for (s,) in index_map.values()] == sizes
    assert sharding.shard_shape((n,)) == (max(sizes),)
    value = np.arange(n, dtype=np.int32) * 3
    x = meshax.device_put(value, sharding)
    assert [np.asarray(s.data).shape for s in x.addressable_shards] == [(m,) for m in sizes]
    np.testing.assert_array_equal(np.concatenate([np.asarray(s.data) for s in x.addressable_shards]), value)
    np.testing.assert_array_equal(np.asarray(x), value)


@pytest.mark.parametrize("sizes,names,positions", MESHES, ids=lambda v: str(v))
def test_uneven_shapes_against_numpy(sizes, names, positions):
    rng = np.random.default_rng(sum(positions))
    for rank in (1, 2, 3):
        for spec in list(specs_for(names, rank))[:40]:
            shape = tuple(int(n) for n in rng.integers(1, 11, size=rank))
            _, sharding = pair(sizes, names, positions, spec)
            parts = sharding.shards_per_dim(rank)
            value = rng.standard_normal(shape).astype(np.float32)
            x = meshax.device_put(value, sharding)
            covered = np.zeros(shape, dtype=int)
            for shard in x.addressable_shards:
                data = np.asarray(shard.data)
                np.testing.assert_array_equal(data, value[shard.index])
                if shard.replica_id == 0:
                    covered[shard.index] += 1
                # Every sharded dimension follows the chunk rule.
                coords = sharding.shard_coordinates(shard.device, rank)
                for dim, (n, k, i) in enumerate(zip(shape, parts, coords)):
                    assert data.shape[dim] == chunk_sizes(n, k)[i], (spec, shape, dim)
            assert (covered == 1).all(), (spec, shape)  # each element once among replica 0 shards
            expected_shard_shape = tuple(max(chunk_sizes(n, k)) for n, k in zip(shape, parts))
            assert sharding.shard_shape(shape) == expected_shard_shape
            np.testing.assert_array_equal(np.asarray(x), value)


# --------------------------------------------------------------------------
# Array basics
# --------------------------------------------------------------------------


def test_array_metadata():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    value = np.arange(48, dtype=np.float32).reshape(8, 6)
    x = meshax.device_put(value, NamedSharding(mesh, P("a", "b")))
    assert isinstance(x, meshax.Array)
    assert x.shape == (8, 6) and x.dtype == np.float32 and x.ndim == 2 and x.size == 48
    assert x.nbytes == 48 * 4 and x.itemsize == 4 and len(x) == 8
    assert x.is_fully_addressable and not x.is_fully_replicated
    assert x.devices() == set(DEVICES)
    assert x.sharding == NamedSharding(mesh, P("a", "b"))
    shards = x.addressable_shards
    assert [s.device for s in shards] == DEVICES
    assert [s.index for s in shards] == [
        (slice(r * 2, r * 2 + 2), slice(c * 3, c * 3 + 3)) for r in range(4) for c in range(2)]
    assert all(s.replica_id == 0 for s in shards)
    for shard in shards:
        assert isinstance(shard.data, meshax.Array)
        assert shard.data.shape == (2, 3)
        assert shard.data.devices() == {shard.device}
        assert shard.data.sharding == SingleDeviceSharding(shard.device)
        np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])
    assert [(s.device, s.index, s.replica_id) for s in x.global_shards] == [
        (s.device, s.index, s.replica_id) for s in shards]
    np.testing.assert_array_equal(np.asarray(x.addressable_data(3)), value[2:4, 3:6])

    replicated = meshax.device_put(value, NamedSharding(mesh, P()))
    assert replicated.is_fully_replicated
    assert [s.replica_id for s in replicated.addressable_shards] == list(range(8))
    assert all(s.index == (slice(None), slice(None)) for s in replicated.addressable_shards)
    half = meshax.device_put(value, NamedSharding(mesh, P("a")))
    assert [s.replica_id for s in half.addressable_shards] == [0, 1] * 4

    single = meshax.device_put(value)
    assert single.devices() == {DEVICES[0]} and single.device == DEVICES[0]
    assert single.sharding == SingleDeviceSharding(DEVICES[0])
    on_five = meshax.device_put(value, DEVICES[5])
    assert on_five.sharding == SingleDeviceSharding(DEVICES[5])
    assert [s.device for s in on_five.addressable_shards] == [DEVICES[5]]


def test_scalar_array():
    x = meshax.device_put(np.float32(2.5))
    assert x.shape == () and x.ndim == 0 and x.size == 1 and x.nbytes == 4
    assert float(x) == 2.5 and x.item() == 2.5
    assert x.addressable_shards[0].index == ()
    with pytest.raises(TypeError):
        len(x)


REPR_VALUES = [
    np.float32(1.5),
    np.float32(0.1),
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.array([True, False]),
    np.arange(12, dtype=np.int32).reshape(3, 4),
    np.arange(2000, dtype=np.float32),
    np.array([1e10, 1e-3], np.float32),
    np.array([1 + 2j], np.complex64),
    np.float16(2.5),
    np.uint8(7),
    1.0,
    3,
    np.arange(24, dtype=np.int8).reshape(2, 3, 4),
]


@pytest.mark.parametrize("value", REPR_VALUES, ids=lambda v: f"{type(v).__name__}{np.shape(v)}")
def test_repr_str_and_format_match_jax(value):
    ours, theirs = meshax.device_put(value), jax.device_put(value)
    assert repr(ours) == repr(theirs)
    assert str(ours) == str(theirs)
    assert f"{ours}" == f"{theirs}"


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0)])
def test_repr_of_empty_arrays_matches_jax(shape):
    value = np.zeros(shape, np.float32)
    assert repr(meshax.device_put(value)) == repr(jax.device_put(value))  # e.g. Array([], shape=(0, 3), dtype=float32)


def test_scalar_formats_like_a_python_float():
    x = meshax.device_put(np.float32(1.5))
    assert f"{x}" == "1.5" == f"{float(np.float32(1.5))}"
    assert f"{x:.3f}" == "1.500" and f"{x:>6}" == "   1.5"
    y = meshax.device_put(np.float32(0.1))
    assert f"{y}" == f"{float(np.float32(0.1))}"
    assert f"{meshax.device_put(np.int32(7)):03d}" == "007"
    assert repr(x) == "Array(1.5, dtype=float32)"
    assert repr(meshax.device_put(1.0)) == "Array(1., dtype=float32, weak_type=True)"


def test_sharded_array_repr_and_str():
    mesh = meshax.make_mesh((8,), ("a",))
    x = meshax.device_put(np.arange(8, dtype=np.int32), NamedSharding(mesh, P("a")))
    assert repr(x) == "Array([0, 1, 2, 3, 4, 5, 6, 7], dtype=int32)"
    assert str(x) == "[0 1 2 3 4 5 6 7]" == f"{x}"


def test_x64_canonicalization():
    assert not meshax.config.jax_enable_x64
    assert meshax.device_put(np.arange(3, dtype=np.int64)).dtype == np.int32
    assert meshax.device_put(np.ones(3, dtype=np.float64)).dtype == np.float32
    assert meshax.device_put(np.ones(3, dtype=np.uint64)).dtype == np.uint32
    assert meshax.device_put(np.ones(3, dtype=np.complex128)).dtype == np.complex64
    assert meshax.device_put(np.arange(3)).dtype == np.int32
    assert meshax.device_put(5).dtype == np.int32
    assert meshax.device_put(np.int64(2**40)).dtype == np.int32
    meshax.config.update("jax_enable_x64", True)
    try:
        x = meshax.device_put(np.arange(3, dtype=np.int64))
        assert x.dtype == np.int64
        assert meshax.device_put(np.ones(3, dtype=np.float64)).dtype == np.float64
        big = meshax.device_put(np.int64(2**40))
        assert int(big) == 2**40 and big.dtype == np.int64
        assert repr(x) == "Array([0, 1, 2], dtype=int64)"
    finally:
        meshax.config.update("jax_enable_x64", False)
    assert meshax.device_put(np.arange(3, dtype=np.int64)).dtype == np.int32


def test_arrays_are_immutable():
    source = np.arange(8, dtype=np.float32)
    x = meshax.device_put(source, NamedSharding(meshax.make_mesh((8,), ("a",)), P("a")))
    with pytest.raises(TypeError, match="immutable"):
        x[0] = 1.0
    for buffer in x.local_buffers().values():
        assert not buffer.flags.writeable
        with pytest.raises(ValueError):
            buffer[...] = 0
    host = np.asarray(x)
    assert not host.flags.writeable
    source[:] = -1  # the array holds a copy of its input
    np.testing.assert_array_equal(np.asarray(x), np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(x.addressable_shards[2].data), [2.0])
    copy = np.array(x)
    copy[0] = 5  # a copy is writable and independent
    assert float(np.asarray(x)[0]) == 0.0


def test_replicas_share_one_buffer_object():
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    value = np.arange(32, dtype=np.float32).reshape(8, 4)
    everywhere = meshax.device_put(value, NamedSharding(mesh, P()))
    buffers = everywhere.local_buffers()
    assert set(buffers) == set(DEVICES)
    assert len({id(b) for b in buffers.values()}) == 1
    by_rows = meshax.device_put(value, NamedSharding(mesh, P("a")))
    buffers = by_rows.local_buffers()
    for row in range(4):
        assert buffers[DEVICES[2 * row]] is buffers[DEVICES[2 * row + 1]]
    assert len({id(b) for b in buffers.values()}) == 4
    by_cols = meshax.device_put(by_rows, NamedSharding(mesh, P(None, "a")))
    buffers = by_cols.local_buffers()
    assert len({id(b) for b in buffers.values()}) == 4
    for col in range(4):
        assert buffers[DEVICES[2 * col]] is buffers[DEVICES[2 * col + 1]]
        np.testing.assert_array_equal(buffers[DEVICES[2 * col]], value[:, col:col + 1])


def test_reading_values_and_conversions():
    x = meshax.device_put(np.arange(6, dtype=np.int32).reshape(2, 3),
                          NamedSharding(meshax.make_mesh((2,), ("a",), devices=DEVICES[2:4]), P("a")))
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.asarray(x, dtype=np.float32).dtype == np.float32
    assert meshax.device_get(x).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert int(meshax.device_put(np.int32(4))) == 4
    assert [4, 5, 6][meshax.device_put(np.int32(1))] == 5
    assert bool(meshax.device_put(True)) is True
    assert x.block_until_ready() is x


def test_a_sharding_keeps_its_hash_but_does_not_pickle_it():
    """A sharding's hash is kept (a jitted call hashes every argument's), and left out of its pickled state: string
    hashes differ between processes."""
    mesh = Mesh(np.array(meshax.devices()[:2]), ("a",))
    sharding = NamedSharding(mesh, PartitionSpec("a"))
    assert hash(sharding) == hash(sharding) == hash(NamedSharding(mesh, PartitionSpec("a")))
    assert "_hash" in sharding.__dict__ and "_hash" not in sharding.__getstate__()
    again = pickle.loads(pickle.dumps(sharding))
    assert again == sharding and hash(again) == hash(sharding) and {again: 1}[sharding] == 1
