"""shard_map's in_specs/out_specs may be a prefix of the arguments' tree, as JAX's: one spec for a whole subtree."""
import numpy as np
import pytest

import meshax as jax
import meshax.numpy as jnp
from meshax.sharding import Mesh, PartitionSpec as P


def test_one_spec_covers_a_tree_of_parameters():
    mesh = Mesh(np.array(jax.devices()), ("i",))
    params = {"w": jnp.ones((8, 2)), "b": [jnp.zeros(3)]}

    def body(params, x):
        return params["w"] * x[:, None], params

    out, same = jax.shard_map(body, mesh=mesh, in_specs=(P(), P("i")), out_specs=(P("i"), P()))(
        params, jnp.arange(8.0))
    assert same["b"][0].shape == (3,) and same["w"].shape == (8, 2)
    # every device multiplies the whole (8, 2) weight by its one element of x; the blocks are stacked
    np.testing.assert_array_equal(np.asarray(out), np.repeat(np.arange(8.0), 8)[:, None] * np.ones((1, 2)))


def test_specs_that_are_no_prefix_are_refused():
    mesh = Mesh(np.array(jax.devices()), ("i",))
    with pytest.raises(ValueError, match="prefix"):
        jax.shard_map(lambda t: t, mesh=mesh, in_specs=(P(), P()), out_specs=P())({"a": jnp.ones(8)})
