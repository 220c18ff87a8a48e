"""Where a gather's result lives, against JAX on the same 8-device mesh: rows looked up by split index arrays
stay split as the indices are (an embedding of a data-parallel batch computes only each device's rows), a
split table keeps its split, and the values and gradients are JAX's, eagerly and under jit."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import Mesh as JaxMesh
from jax.sharding import NamedSharding as JaxNamedSharding
from jax.sharding import PartitionSpec as JaxP

import meshax
import meshax.numpy as mnp
from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

TABLE = np.arange(48 * 32, dtype=np.float32).reshape(48, 32) / 100
TOKENS = (np.arange(16 * 8, dtype=np.int32).reshape(16, 8) * 7) % 48

# (name, table spec, tokens spec, lookup written for either numpy module)
CASES = [
    ("rows by a batch split", (), ("data",), lambda np_, e, t: e[t]),
    ("rows by a sliced batch split", (), ("data",), lambda np_, e, t: e[t[:, :-1]]),
    ("take by a batch split", (), ("data",), lambda np_, e, t: np_.take(e, t, axis=0)),
    ("columns split, batch split", (None, "data"), ("data",), lambda np_, e, t: e[t[:, :-1]]),
    ("rows by a split second axis", (), (None, "data"), lambda np_, e, t: e[t]),
    ("columns by split indices", (), (None, "data"), lambda np_, e, t: e[:, t % 32]),
    ("rows plus positions", (), ("data",), lambda np_, e, t: e[t] + e[:8]),
    ("a split table looked up", ("data",), ("data",), lambda np_, e, t: e[t]),
]


def _placed(library, mesh_type, sharding_type, spec_type, table_spec, tokens_spec):
    devices = np.array(library.devices())
    mesh = mesh_type(devices, ("data",))
    return (library.device_put(TABLE, sharding_type(mesh, spec_type(*table_spec))),
            library.device_put(TOKENS, sharding_type(mesh, spec_type(*tokens_spec))))


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name,table_spec,tokens_spec,lookup", CASES, ids=[c[0] for c in CASES])
def test_a_lookup_splits_and_computes_as_jax(name, table_spec, tokens_spec, lookup, jitted):
    ours_in = _placed(meshax, Mesh, NamedSharding, P, table_spec, tokens_spec)
    theirs_in = _placed(jax, JaxMesh, JaxNamedSharding, JaxP, table_spec, tokens_spec)
    ours_f, theirs_f = (lambda e, t: lookup(mnp, e, t)), (lambda e, t: lookup(jjnp, e, t))
    if jitted:
        ours_f, theirs_f = meshax.jit(ours_f), jax.jit(theirs_f)
    ours, theirs = ours_f(*ours_in), theirs_f(*theirs_in)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert tuple(ours.sharding.spec) == tuple(theirs.sharding.spec), name
    for shard in ours.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), np.asarray(theirs)[shard.index])


@pytest.mark.parametrize("name,table_spec,tokens_spec,lookup", CASES, ids=[c[0] for c in CASES])
def test_the_gradient_of_a_lookup_is_jaxs(name, table_spec, tokens_spec, lookup):
    ours_in = _placed(meshax, Mesh, NamedSharding, P, table_spec, tokens_spec)
    theirs_in = _placed(jax, JaxMesh, JaxNamedSharding, JaxP, table_spec, tokens_spec)
    ours = meshax.jit(meshax.grad(lambda e, t: (lookup(mnp, e, t) ** 2).sum()))(*ours_in)
    theirs = jax.jit(jax.grad(lambda e, t: (lookup(jjnp, e, t) ** 2).sum()))(*theirs_in)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6)


def test_a_boolean_mask_gathers_whole_rows():
    mesh = Mesh(np.array(meshax.devices()), ("data",))
    table = meshax.device_put(TABLE, NamedSharding(mesh, P()))
    mask = meshax.device_put(np.arange(48) % 3 == 0, NamedSharding(mesh, P()))
    np.testing.assert_array_equal(np.asarray(table[mask]), TABLE[np.arange(48) % 3 == 0])
