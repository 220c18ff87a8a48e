"""meshax.ops (JAX's jax.ops: segment_sum/prod/max/min) against real JAX: values, dtypes, every keyword, out-of-range
ids, empty segments, eagerly, under jit, grad, vmap and shard_map, and on sharded Arrays."""
from __future__ import annotations

import jax
import jax.ops
import numpy as np
import pytest

import meshax
import meshax.ops
from differential import MODES, assert_matches
from meshax.sharding import Mesh, NamedSharding, PartitionSpec

NAMES = ("segment_sum", "segment_prod", "segment_max", "segment_min")
IDS = np.array([0, 0, 2, 5, -1, 2, 1, 3], np.int32)  # 5 and -1 are out of range for 4 segments


def _data(dtype: str, shape: tuple[int, ...] = (8,)) -> np.ndarray:
    values = np.random.default_rng(0).integers(-3, 4, shape)
    return values.astype(dtype) if dtype != "bool" else values > 0


def _ours(name: str, how: str, *args: np.ndarray, **kw) -> object:
    fun = getattr(meshax.ops, name)
    arrays = [meshax.numpy.asarray(a) for a in args]
    if how == "eager":
        return fun(*arrays, **kw)
    if how == "jit":
        return meshax.jit(lambda *xs: fun(*xs, **kw))(*arrays)
    mesh = Mesh(np.array(meshax.devices()), ("x",))
    return meshax.shard_map(lambda *xs: fun(*xs, **kw), mesh=mesh, in_specs=PartitionSpec(),
                            out_specs=PartitionSpec(), check_vma=False)(*arrays)


def _check(name: str, how: str, *args: np.ndarray, **kw) -> None:
    """`name` in meshax (run `how`: eager, jit or shard_map) and in JAX agree."""
    theirs = getattr(jax.ops, name)(*[jax.numpy.asarray(a) for a in args], **kw)
    assert_matches(_ours(name, how, *args, **kw), theirs, rtol=1e-5)


def test_public_names_match_jax():
    assert sorted(meshax.ops.__all__) == sorted(n for n in dir(jax.ops) if not n.startswith("_"))


@pytest.mark.parametrize("how", MODES)
@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "uint8", "bool"])
@pytest.mark.parametrize("name", NAMES)
def test_values_dtypes_and_out_of_range(name, dtype, how):
    if dtype == "bool" and name in ("segment_sum", "segment_prod"):
        for lib in (meshax, jax):
            with pytest.raises(TypeError):
                getattr(lib.ops, name)(lib.numpy.asarray(_data(dtype)), lib.numpy.asarray(IDS), 4)
        return
    _check(name, how, _data(dtype), IDS, num_segments=4)
    _check(name, how, _data(dtype), IDS, num_segments=7)  # empty segments hold the identity
    _check(name, how, _data(dtype), IDS, num_segments=4, mode="clip")


@pytest.mark.parametrize("how", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_keywords(name, how):
    rows = _data("float32", (8, 3))
    _check(name, how, rows, IDS, num_segments=4)
    _check(name, how, rows, np.sort(IDS), num_segments=6, indices_are_sorted=True)
    _check(name, how, rows[:4], np.array([3, 0, 1, 2], np.int32), num_segments=4, unique_indices=True)
    _check(name, how, rows, IDS, num_segments=0)
    for bucket_size in (1, 3, 8, 20):
        for values in (rows, rows.astype(np.int32)):
            _check(name, how, values, IDS, num_segments=4, bucket_size=bucket_size)
            _check(name, how, values, IDS, num_segments=4, bucket_size=bucket_size, mode="clip")
    _check(name, how, rows, IDS, num_segments=4, mode="fill")
    _check(name, how, rows, IDS, num_segments=4, mode="drop")


@pytest.mark.parametrize("name", NAMES)
def test_num_segments_from_the_ids_when_concrete(name):
    _check(name, "eager", _data("float32"), IDS)
    with pytest.raises(meshax.errors.ConcretizationTypeError):
        meshax.jit(getattr(meshax.ops, name))(_data("float32"), IDS)
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(getattr(jax.ops, name))(_data("float32"), IDS)


@pytest.mark.parametrize("name", NAMES)
def test_bad_arguments(name):
    for lib in (meshax, jax):
        fun = getattr(lib.ops, name)
        with pytest.raises(ValueError, match="non-negative"):
            fun(_data("float32"), IDS, -1)
        with pytest.raises(TypeError):
            fun(_data("float32"), IDS, 2.5)
        with pytest.raises(TypeError, match="integer"):
            fun(lib.numpy.asarray(_data("float32")), lib.numpy.asarray(IDS.astype(np.float32)), 4)
    with pytest.raises(meshax.errors.ConcretizationTypeError):
        meshax.jit(lambda d, s, n: meshax.ops.segment_sum(d, s, n))(_data("float32"), IDS, 4)


def _grad(lib, name: str, data, ids, **kw):
    fun = getattr(lib.ops, name)
    return lib.grad(lambda x: (fun(x, ids, 4, **kw) * lib.numpy.arange(1.0, 5.0)).sum())(data)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", ["segment_sum", "segment_max", "segment_min"])
def test_grad(name, jit):
    data = np.array([3.0, 3.0, 3.0, 0.0, 2.0, 3.0, 5.0, 4.0], np.float32)  # ties in segments 0 and 2
    fun = lambda x: _grad(meshax, name, x, IDS)  # noqa: E731
    ours = meshax.jit(fun)(data) if jit else fun(data)
    assert_matches(ours, _grad(jax, name, jax.numpy.asarray(data), IDS))


def test_grad_of_prod_with_unique_indices():
    data = np.array([1.5, 3.0, -2.0, 0.5], np.float32)
    ids = np.array([3, 0, 1, 2], np.int32)
    assert_matches(_grad(meshax, "segment_prod", data, ids, unique_indices=True),
                   _grad(jax, "segment_prod", jax.numpy.asarray(data), ids, unique_indices=True))


@pytest.mark.parametrize("name", NAMES)
def test_vmap(name):
    data = _data("float32", (3, 8, 2))
    ids = np.stack([IDS, np.roll(IDS, 1), np.sort(IDS)])
    for in_axes in [(0, 0), (0, None), (None, 0)]:
        args = (data if in_axes[0] == 0 else data[0], ids if in_axes[1] == 0 else ids[0])
        ours = meshax.vmap(lambda d, s: getattr(meshax.ops, name)(d, s, 4), in_axes=in_axes)(*args)
        theirs = jax.vmap(lambda d, s: getattr(jax.ops, name)(d, s, 4), in_axes=in_axes)(*args)
        assert_matches(ours, theirs)


@pytest.mark.parametrize("name", NAMES)
def test_sharded_arrays(name):
    mesh = Mesh(np.array(meshax.devices()), ("x",))
    data, ids = _data("float32", (16, 3)), np.tile(IDS, 2)
    sharded = meshax.device_put(data, NamedSharding(mesh, PartitionSpec("x")))
    sharded_ids = meshax.device_put(ids, NamedSharding(mesh, PartitionSpec("x")))
    fun = getattr(meshax.ops, name)
    assert_matches(fun(sharded, sharded_ids, 4), getattr(jax.ops, name)(data, ids, 4))
    assert_matches(meshax.jit(fun, static_argnums=2)(sharded, sharded_ids, 4), getattr(jax.ops, name)(data, ids, 4))
    out = fun(sharded, sharded_ids, 4, out_sharding=NamedSharding(mesh, PartitionSpec(None, None)))
    assert out.sharding.is_fully_replicated


@pytest.mark.parametrize("jit", [False, True])
def test_grad_of_prod_with_repeated_ids(jit):
    """JAX differentiates segment_prod only with unique_indices=True; meshax's derivative with repeated ids (and
    zeros) matches JAX's derivative of the same products written with jnp.prod."""
    data = np.array([3.0, 2.0, 0.0, 7.0, 2.0, 0.0, 5.0, 4.0, 0.0, 1.5], np.float32)
    ids = np.array([0, 0, 2, 5, -1, 2, 1, 3, 1, 3], np.int32)
    weights = np.arange(1.0, 5.0, dtype=np.float32)

    def reference(x):
        masks = jax.numpy.asarray(ids)[None, :] == jax.numpy.arange(4)[:, None]
        return (jax.numpy.prod(jax.numpy.where(masks, x[None, :], 1.0), axis=1) * weights).sum()

    fun = meshax.grad(lambda x: (meshax.ops.segment_prod(x, ids, 4) * weights).sum())
    ours = meshax.jit(fun)(data) if jit else fun(data)
    assert_matches(ours, jax.grad(reference)(jax.numpy.asarray(data)))
    assert_matches(meshax.ops.segment_prod(data, ids, 4), jax.ops.segment_prod(data, ids, 4))
