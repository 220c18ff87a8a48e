"""Typed PRNG key arrays (jax.random.key) against real JAX: values, dtypes, reprs, and keys passing through jit,
vmap, scan and shard_map. Each value case builds its keys from uint32 data with wrap_key_data, so it runs eagerly,
under jit and inside shard_map (see differential.py)."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from differential import MODES, assert_matches, check_case

DATA = np.array([[0, 42], [7, 3]], np.uint32)


def keys(L, data):
    return L.random.wrap_key_data(data)


CASES = {
    "key_data_roundtrip": lambda L, d: L.random.key_data(keys(L, d)),
    "split": lambda L, d: L.random.key_data(L.random.split(keys(L, d)[0], 3)),
    "split_shape": lambda L, d: L.random.key_data(L.random.split(keys(L, d)[1], (2, 2))),
    "fold_in": lambda L, d: L.random.key_data(L.random.fold_in(keys(L, d)[0], 17)),
    "normal": lambda L, d: L.random.normal(keys(L, d)[0], (4,)),
    "uniform": lambda L, d: L.random.uniform(keys(L, d)[1], (2, 3), minval=-1.0, maxval=2.0),
    "randint": lambda L, d: L.random.randint(keys(L, d)[0], (5,), 0, 10),
    "bernoulli": lambda L, d: L.random.bernoulli(keys(L, d)[1], 0.3, (6,)),
    "permutation": lambda L, d: L.random.permutation(keys(L, d)[0], 6),
    "categorical": lambda L, d: L.random.categorical(keys(L, d)[0], L.numpy.log(L.numpy.array([0.2, 0.3, 0.5]))),
    "gamma": lambda L, d: L.random.gamma(keys(L, d)[0], 2.5, (3,)),
    "bits": lambda L, d: L.random.bits(keys(L, d)[1], (3,)),
    "vmap_normal": lambda L, d: L.vmap(lambda k: L.random.normal(k, (2,)))(keys(L, d)),
    "vmap_split": lambda L, d: L.random.key_data(L.vmap(L.random.split)(keys(L, d))),
    "scan_carry": lambda L, d: L.lax.scan(lambda k, _: (L.random.split(k)[0], L.random.uniform(k)),
                                          keys(L, d)[0], None, length=4)[1],
    "typed_equals_raw": lambda L, d: (L.random.normal(keys(L, d)[0], (3,)),
                                      L.random.normal(L.random.key_data(keys(L, d))[0], (3,))),
    "key_equality": lambda L, d: keys(L, d) == L.random.wrap_key_data(L.random.key_data(keys(L, d))),
    "reshape_index": lambda L, d: L.random.key_data(keys(L, d).reshape(2, 1)[1, 0]),
    "grad_with_key_argument": lambda L, d: L.grad(lambda x, k: x * L.random.normal(k))(1.5, keys(L, d)[0]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_typed_keys_match_jax(name: str, mode: str) -> None:
    check_case(CASES[name], (DATA,), mode, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**31 + 5])
def test_key_of_seed(seed: int) -> None:
    ours, theirs = meshax.random.key(seed), jax.random.key(seed)
    assert repr(ours) == repr(theirs)
    assert ours.shape == theirs.shape == () and ours.ndim == 0 and ours.size == 1
    assert_matches(meshax.random.key_data(ours), jax.random.key_data(theirs))
    assert_matches(meshax.random.normal(ours, (3,)), jax.random.normal(theirs, (3,)))


def test_reprs_and_dtype() -> None:
    ours, theirs = meshax.random.split(meshax.random.key(0), 3), jax.random.split(jax.random.key(0), 3)
    assert repr(ours) == repr(theirs)
    assert str(ours.dtype) == str(theirs.dtype) == "key<fry>"
    assert ours.dtype == meshax.random.key(1).dtype == meshax.random.key_dtype()
    assert repr(ours[1]) == repr(theirs[1])
    assert len(ours) == 3 and [k.shape for k in ours] == [(), (), ()]
    assert ours.reshape(3, 1).shape == (3, 1) and ours.reshape(3, 1).T.shape == (1, 3)


def test_key_dtype_is_a_prng_key_subdtype() -> None:
    k = meshax.random.key(0)
    for library_np, library in ((mnp, meshax), (jjnp, jax)):
        key = library.random.key(0)
        assert library_np.issubdtype(key.dtype, library.dtypes.prng_key)
        assert library_np.issubdtype(key.dtype, library.dtypes.extended)
        assert not library_np.issubdtype(key.dtype, library_np.floating)
        assert not library_np.issubdtype(library_np.float32, library.dtypes.prng_key)
        assert not library_np.issubdtype(library_np.uint32, library.dtypes.prng_key)
    assert isinstance(k, meshax.Array)


def test_raw_keys_stay_raw() -> None:
    raw = meshax.random.PRNGKey(0)
    assert raw.dtype == np.uint32 and raw.shape == (2,)
    assert meshax.random.split(raw).dtype == np.uint32
    assert meshax.random.fold_in(raw, 1).dtype == np.uint32
    assert_matches(meshax.random.key_data(raw), jax.random.key_data(jax.random.PRNGKey(0)))


def test_key_array_is_not_a_numpy_array() -> None:
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(meshax.random.key(0))


def test_jit_returns_and_takes_typed_keys() -> None:
    ours = meshax.jit(lambda k: meshax.random.split(k))(meshax.random.key(3))
    theirs = jax.jit(lambda k: jax.random.split(k))(jax.random.key(3))
    assert repr(ours) == repr(theirs)
    traced_seed = meshax.jit(lambda s: meshax.random.key_data(meshax.random.key(s)))(5)
    assert_matches(traced_seed, jax.jit(lambda s: jax.random.key_data(jax.random.key(s)))(5))


def test_shard_map_over_a_batch_of_keys() -> None:
    from meshax.sharding import Mesh, PartitionSpec

    mesh = Mesh(np.array(meshax.devices()), ("x",))
    ks = meshax.random.split(meshax.random.key(0), 8)
    draw = meshax.shard_map(lambda k: meshax.random.normal(k[0], (1,)), mesh=mesh, in_specs=PartitionSpec("x"),
                            out_specs=PartitionSpec("x"))
    theirs = jax.vmap(lambda k: jax.random.normal(k, (1,)))(jax.random.split(jax.random.key(0), 8)).reshape(8)
    assert_matches(draw(ks), theirs)


def test_key_arrays_are_pytree_leaves_as_in_jax() -> None:
    trees = [{"k": L.random.split(L.random.key(0), 2), "w": L.numpy.ones(3)} for L in (meshax, jax)]
    ours, theirs = trees
    assert [np.shape(x) for x in meshax.tree_util.tree_leaves(ours)] == \
        [np.shape(x) for x in jax.tree_util.tree_leaves(theirs)] == [(2,), (3,)]
    assert str(meshax.tree_util.tree_structure(ours)) == str(jax.tree_util.tree_structure(theirs))
    assert str(meshax.tree.structure(ours)) == str(jax.tree.structure(theirs))
    mapped = meshax.tree.map(lambda x: x.shape, ours)
    assert mapped == jax.tree.map(lambda x: x.shape, theirs)
    # the structure of the keys split like a tree of parameters is that tree's (optax.tree_utils.tree_split_key_like)
    params = {"a": mnp.ones(2), "b": [mnp.ones(3), mnp.zeros(1)]}
    structure = meshax.tree.structure(params)
    keys_like = meshax.tree.unflatten(structure, list(meshax.random.split(meshax.random.key(1), structure.num_leaves)))
    assert meshax.tree.structure(keys_like) == structure
    # inside transformations a key array still travels as its uint32 data
    leaves, treedef = meshax._src.tree.tree_util.tree_flatten(ours)
    assert leaves[0].dtype == np.uint32 and leaves[0].shape == (2, 2)
    assert repr(meshax.tree_util.tree_unflatten(treedef, leaves)["k"]) == repr(ours["k"])


def test_checkpoint_saves_typed_keys_as_their_data(tmp_path) -> None:
    from meshax import checkpoint

    tree = {"key": meshax.random.split(meshax.random.key(3), 2), "w": mnp.ones(2)}
    checkpoint.save(str(tmp_path / "ckpt"), tree)
    restored = checkpoint.restore(str(tmp_path / "ckpt"), tree)
    assert repr(restored["key"]) == repr(tree["key"])
    data = checkpoint.restore(str(tmp_path / "ckpt"))["key"]
    np.testing.assert_array_equal(np.asarray(data[0]), np.asarray(meshax.random.key_data(tree["key"])))


@pytest.mark.parametrize("mode", MODES)
def test_stack_concatenate_and_asarray_of_typed_keys(mode: str) -> None:
    def case(L, d):
        ks = keys(L, d)
        stacked = L.numpy.stack([ks[1], ks[0]])
        joined = L.numpy.concatenate([ks, stacked])
        return (L.random.key_data(stacked), L.random.key_data(joined),
                L.random.key_data(L.numpy.stack([ks, ks], axis=1)), L.random.key_data(L.numpy.asarray(ks)))

    check_case(case, (DATA,), mode, rtol=0, atol=0)
    k = meshax.random.key(0)
    assert mnp.asarray(k) is k and isinstance(meshax.device_put(k), type(k))


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_where_and_astype_on_key_arrays_as_jax(mode):
    """jnp.where picks whole keys (optax's MultiSteps keeps a key in its inner state this way), astype to the key
    dtype is the identity and to another dtype the error JAX raises."""

    def pick(lib, np_, condition, seed_a, seed_b):
        a, b = lib.random.split(lib.random.key(seed_a), 3), lib.random.split(lib.random.key(seed_b), 3)
        chosen = np_.astype(np_.where(condition, a, b), a.dtype)
        return lib.random.key_data(chosen), lib.random.key_data(np_.where(condition[0], a[0], b[0]))

    condition = np.array([True, False, True])
    ours_fn = (lambda c: pick(meshax, mnp, c, 0, 1))
    ours = meshax.jit(ours_fn)(condition) if mode == "jit" else ours_fn(condition)
    theirs = pick(jax, jjnp, condition, 0, 1)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="Cannot convert_element_type from key<fry> to float32"):
        mnp.astype(meshax.random.key(0), np.float32)
