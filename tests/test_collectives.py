"""Differential tests: every collective inside shard_map, meshax against real JAX, on random meshes and specs."""
from __future__ import annotations

import functools
import itertools
import random

import jax
import numpy as np
import pytest
from jax.sharding import Mesh as JaxMesh
from jax.sharding import PartitionSpec as JP

import meshax
import meshax.numpy as jnp
from meshax.sharding import Mesh, PartitionSpec as P

MESH_SHAPES = [((8,), ("i",)), ((4, 2), ("i", "j")), ((2, 4), ("i", "j")), ((2, 2, 2), ("i", "j", "k"))]


def jax_shard_map():
    if hasattr(jax, "shard_map"):
        return functools.partial(jax.shard_map, check_vma=False)
    from jax.experimental.shard_map import shard_map

    return functools.partial(shard_map, check_rep=False)


def meshes(shape, names, order):
    ours = Mesh(np.array(meshax.devices(), dtype=object)[order].reshape(shape), names)
    theirs = JaxMesh(np.array(jax.devices())[order].reshape(shape), names)
    return ours, theirs


def group_size(shape, names, axes):
    """How many devices a collective over `axes` combines."""
    return int(np.prod([dict(zip(names, shape))[a] for a in axes]))


def both(body_ours, body_jax, shape, names, order, in_spec, out_spec, value):
    ours_mesh, jax_mesh = meshes(shape, names, order)
    ours = meshax.jit(meshax.shard_map(body_ours, mesh=ours_mesh, in_specs=P(*in_spec), out_specs=P(*out_spec)))
    theirs = jax.jit(jax_shard_map()(body_jax, mesh=jax_mesh, in_specs=JP(*in_spec), out_specs=JP(*out_spec)))
    return np.asarray(meshax.device_get(ours(value))), np.asarray(theirs(value))


def cases():
    rng = random.Random(1234)
    for (shape, names), trial in itertools.product(MESH_SHAPES, range(3)):
        order = list(range(8))
        rng.shuffle(order)
        axes = rng.sample(names, rng.randint(1, len(names)))
        yield shape, names, order, tuple(axes)


CASES = list(cases())
IDS = [f"{'x'.join(map(str, c[0]))}-{''.join(c[3])}-{n}" for n, c in enumerate(CASES)]


def data(shape, names, dims=2, seed=0):
    rows = int(np.prod(shape)) * 2
    return np.random.default_rng(seed).standard_normal((rows, 6)[:dims]).astype(np.float32)


def spec_over_all(names):
    return (tuple(names),)


@pytest.mark.parametrize("shape,names,order,axes", CASES, ids=IDS)
@pytest.mark.parametrize("name", ["psum", "pmean", "pmax", "pmin"])
def test_reductions(shape, names, order, axes, name):
    value = data(shape, names)
    spec = spec_over_all(names)
    ours, theirs = both(lambda x: getattr(meshax.lax, name)(x, axes), lambda x: getattr(jax.lax, name)(x, axes),
                        shape, names, order, spec, spec, value)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,names,order,axes", CASES, ids=IDS)
@pytest.mark.parametrize("tiled,axis", [(False, 0), (True, 0), (False, 1), (True, 1)])
def test_all_gather(shape, names, order, axes, tiled, axis):
    value = data(shape, names)
    spec = spec_over_all(names)
    ours, theirs = both(lambda x: meshax.lax.all_gather(x, axes, axis=axis, tiled=tiled),
                        lambda x: jax.lax.all_gather(x, axes, axis=axis, tiled=tiled),
                        shape, names, order, spec, spec, value)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("shape,names,order,axes", CASES, ids=IDS)
@pytest.mark.parametrize("tiled", [False, True])
def test_psum_scatter(shape, names, order, axes, tiled):
    n = group_size(shape, names, axes)
    value = np.random.default_rng(3).standard_normal((int(np.prod(shape)) * n, 3)).astype(np.float32)
    spec = spec_over_all(names)
    ours, theirs = both(lambda x: meshax.lax.psum_scatter(x, axes, scatter_dimension=0, tiled=tiled),
                        lambda x: jax.lax.psum_scatter(x, axes, scatter_dimension=0, tiled=tiled),
                        shape, names, order, spec, spec, value)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,names,order,axes", CASES, ids=IDS)
@pytest.mark.parametrize("tiled", [False, True])
def test_psum_scatter_along_a_later_dimension(shape, names, order, axes, tiled):
    n = group_size(shape, names, axes)
    value = np.random.default_rng(4).standard_normal((int(np.prod(shape)), 3, 2 * n)).astype(np.float32)
    if not tiled:
        value = value[..., :n].copy()  # an untiled scatter's dimension is the group's size
    spec = spec_over_all(names)
    ours, theirs = both(lambda x: meshax.lax.psum_scatter(x, axes, scatter_dimension=2, tiled=tiled),
                        lambda x: jax.lax.psum_scatter(x, axes, scatter_dimension=2, tiled=tiled),
                        shape, names, order, spec, spec, value)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,names,order,axes", CASES, ids=IDS)
def test_ppermute(shape, names, order, axes):
    n = group_size(shape, names, axes)
    rng = random.Random(n)
    targets = list(range(n))
    rng.shuffle(targets)
    perm = [(s, t) for s, t in enumerate(targets)][: max(1, n - 1)]  # one device may receive nothing
    value = data(shape, names)
    spec = spec_over_all(names)
    run = functools.partial(both, lambda x: meshax.lax.ppermute(x, axes, perm),
                            lambda x: jax.lax.ppermute(x, axes, perm), shape, names, order, spec, spec, value)
    if list(axes) != sorted(axes, key=names.index):
        # JAX 0.12 refuses axis names out of the mesh's order (jax_raise_on_ppermute_sort_diff, on by default)
        with pytest.raises(RuntimeError) as theirs_error:
            jax.jit(jax_shard_map()(lambda x: jax.lax.ppermute(x, axes, perm), mesh=meshes(shape, names, order)[1],
                                    in_specs=JP(*spec), out_specs=JP(*spec)))(value)
        with pytest.raises(RuntimeError) as ours_error:
            run()
        assert str(ours_error.value) == str(theirs_error.value).split("\n")[0]
        return
    ours, theirs = run()
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("shape,names,order,axes", [c for c in CASES if list(c[3]) != sorted(c[3], key=c[1].index)],
                         ids=[i for i, c in zip(IDS, CASES) if list(c[3]) != sorted(c[3], key=c[1].index)])
def test_ppermute_over_axes_out_of_mesh_order_with_the_check_off(shape, names, order, axes, monkeypatch):
    """With jax_raise_on_ppermute_sort_diff off, JAX 0.12 numbers the devices in the order of the axis names."""
    n = group_size(shape, names, axes)
    targets = list(range(n))
    random.Random(n).shuffle(targets)
    perm = [(s, t) for s, t in enumerate(targets)][: max(1, n - 1)]
    value = data(shape, names)
    spec = spec_over_all(names)
    monkeypatch.setitem(meshax.config._values, "jax_raise_on_ppermute_sort_diff", False)
    previous = jax.config.jax_raise_on_ppermute_sort_diff
    jax.config.update("jax_raise_on_ppermute_sort_diff", False)
    try:
        ours, theirs = both(lambda x: meshax.lax.ppermute(x, axes, perm), lambda x: jax.lax.ppermute(x, axes, perm),
                            shape, names, order, spec, spec, value)
    finally:
        jax.config.update("jax_raise_on_ppermute_sort_diff", previous)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("shape,names,order,axes", CASES, ids=IDS)
@pytest.mark.parametrize("tiled", [False, True])
def test_all_to_all(shape, names, order, axes, tiled):
    n = group_size(shape, names, axes)
    value = np.random.default_rng(5).standard_normal((int(np.prod(shape)) * n, 2 * n)).astype(np.float32)
    spec = spec_over_all(names)
    if tiled:
        ours_body = lambda x: meshax.lax.all_to_all(x, axes, 0, 1, tiled=True)  # noqa: E731
        jax_body = lambda x: jax.lax.all_to_all(x, axes, 0, 1, tiled=True)  # noqa: E731
    else:
        ours_body = lambda x: meshax.lax.all_to_all(x.reshape(n, -1, x.shape[1]), axes, 0, 0)  # noqa: E731
        jax_body = lambda x: jax.lax.all_to_all(x.reshape(n, -1, x.shape[1]), axes, 0, 0)  # noqa: E731
    ours, theirs = both(ours_body, jax_body, shape, names, order, spec, spec, value)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("shape,names,order,axes", CASES, ids=IDS)
def test_axis_index_and_size(shape, names, order, axes):
    spec = spec_over_all(names)

    def ours(x):
        return x * 0 + meshax.lax.axis_index(axes) * 100 + meshax.lax.psum(1, axes)

    def theirs(x):
        return x * 0 + jax.lax.axis_index(axes) * 100 + jax.lax.psum(1, axes)

    a, b = both(ours, theirs, shape, names, order, spec, spec, data(shape, names, dims=1))
    np.testing.assert_array_equal(a, b)


def test_errors():
    mesh = meshax.make_mesh((4, 2), ("i", "j"))
    x = np.zeros((8, 2), np.float32)
    with pytest.raises(NameError, match="outside shard_map"):
        meshax.lax.psum(jnp.ones(3), "i")
    with pytest.raises(NameError, match="unbound axis name 'z'"):
        meshax.shard_map(lambda v: meshax.lax.psum(v, "z"), mesh=mesh, in_specs=P("i"), out_specs=P("i"))(x)
    with pytest.raises(ValueError, match="not a permutation"):
        meshax.shard_map(lambda v: meshax.lax.ppermute(v, "i", [(0, 1), (1, 1)]), mesh=mesh, in_specs=P("i"),
                         out_specs=P("i"))(x)
    with pytest.raises(ValueError, match="not divisible"):
        meshax.shard_map(lambda v: v, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(np.zeros((6, 2)))
    with pytest.raises(ValueError, match="PartitionSpecs"):
        meshax.shard_map(lambda a, b: a, mesh=mesh, in_specs=(P("i"),), out_specs=P("i"))(x, x)


@pytest.mark.parametrize("name", ["psum", "all_gather", "ppermute", "pmax"])
def test_large_results_stay_intact_while_later_calls_reuse_buffers(name):
    """Collective results of 1 MiB and more come from a buffer pool: a buffer is reused only once no result
    refers to it, so results kept alive must never change, whatever runs after them."""
    mesh = meshax.make_mesh((8,), ("i",))
    n = 1 << 18  # float32 elements per device: 1 MiB
    bodies = {
        "psum": (lambda a: meshax.lax.psum(a, "i"), P()),
        "pmax": (lambda a: meshax.lax.pmax(a, "i"), P()),
        "all_gather": (lambda a: meshax.lax.all_gather(a, "i", tiled=True), P()),
        "ppermute": (lambda a: meshax.lax.ppermute(a, "i", [(j, (j + 1) % 8) for j in range(8)]), P("i")),
    }
    body, out_spec = bodies[name]
    f = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=out_spec, check_vma=False))
    kept, expected = [], []
    for call in range(6):
        data = np.full((8 * n,), float(call), np.float32) + np.repeat(np.arange(8, dtype=np.float32), n)
        result = f(meshax.device_put(data, meshax.sharding.NamedSharding(mesh, P("i"))))
        if call % 2 == 0:  # keep every other result (and a view of one shard) alive; drop the rest
            kept.append((result, np.asarray(result.addressable_shards[0].data)))
            expected.append(np.asarray(meshax.device_get(result)).copy())
    for (result, shard_view), want in zip(kept, expected):
        np.testing.assert_array_equal(np.asarray(meshax.device_get(result)), want)
        np.testing.assert_array_equal(shard_view, np.asarray(result.addressable_shards[0].data))


@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_large_psum_combines_in_chunks_across_cores_exactly(op, layout):
    """psum/pmax/pmin of several MiB per device combine the devices' parts chunk by chunk on a thread
    pool; the result must equal NumPy's running combine in mesh order bit for bit, also for strided
    parts (which take the serial path)."""
    mesh = meshax.make_mesh((8,), ("i",))
    rng = np.random.default_rng(7)
    n = (1 << 20) + 12345  # float32 per device: a bit over 4 MiB, so the last chunk is partial
    data = rng.standard_normal((8, n, 2) if layout == "strided" else (8, n)).astype(np.float32)
    collective = {"sum": meshax.lax.psum, "max": meshax.lax.pmax, "min": meshax.lax.pmin}[op]
    combine = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]

    def body(block):
        return collective(block[0, :, 0] if layout == "strided" else block[0], "i")

    f = meshax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P(), check_vma=False)
    got = np.asarray(f(meshax.device_put(data, meshax.sharding.NamedSharding(mesh, P("i")))))
    parts = data[:, :, 0] if layout == "strided" else data
    want = combine(parts[0], parts[1])
    for part in parts[2:]:
        want = combine(want, part)
    np.testing.assert_array_equal(got, want)
