"""shard_map without in_specs: the specs come from the arguments, as JAX infers them from types; where nothing says
how a traced argument is laid out (Auto axes inside jit), JAX's TypeError instead of a guess."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax.sharding import AxisType

X = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)


def _rows_per_device_summed(lib, np_, axis_types, jitted):
    mesh = lib.make_mesh((4,), ("batch",), axis_types=(axis_types,))
    x = lib.device_put(np_.asarray(X), lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("batch")))

    @lib.shard_map(mesh=mesh, out_specs=lib.sharding.PartitionSpec())
    def f(block):
        return lib.lax.psum(block.shape[0] * np_.ones(()) + np_.sum(block), "batch")

    return np.asarray((lib.jit(f) if jitted else f)(x))


@pytest.mark.parametrize("jitted", [False, True])
def test_specs_come_from_explicit_types_eagerly_and_under_jit(jitted):
    ours = _rows_per_device_summed(meshax, jnp, AxisType.Explicit, jitted)
    theirs = _rows_per_device_summed(jax, jjnp, jax.sharding.AxisType.Explicit, jitted)
    np.testing.assert_allclose(ours, theirs)
    assert ours == 32 + X.sum()


def test_an_array_on_auto_axes_gives_its_own_spec_when_called_eagerly():
    """A meshax extension (JAX refuses in_specs=None on Auto axes): an Array's own sharding is its spec."""
    assert _rows_per_device_summed(meshax, jnp, AxisType.Auto, False) == 32 + X.sum()


def test_a_traced_value_on_auto_axes_needs_in_specs_as_in_jax():
    with pytest.raises(TypeError, match=r"in_specs argument must be a pytree .* but it was `None` when "
                                        r"axis_names=frozenset\(\{'batch'\}\) are of type AxisType.Auto"):
        _rows_per_device_summed(meshax, jnp, AxisType.Auto, True)
    with pytest.raises(TypeError, match="AxisType.Auto"):
        _rows_per_device_summed(jax, jjnp, jax.sharding.AxisType.Auto, True)


def _mismatched(lib, np_, jitted):
    mesh = lib.make_mesh((2,), ("i",), axis_types=(lib.sharding.AxisType.Explicit,))
    f = lib.shard_map(lambda x: x, mesh=mesh, in_specs=lib.sharding.PartitionSpec("i"),
                      out_specs=lib.sharding.PartitionSpec("i"))
    with pytest.raises(ValueError) as caught:
        (lib.jit(f) if jitted else f)(np_.arange(6.0))
    return str(caught.value)


@pytest.mark.parametrize("jitted", [False, True])
def test_in_specs_that_contradict_an_explicit_type_are_refused_as_in_jax(jitted):
    ours, theirs = _mismatched(meshax, jnp, jitted), _mismatched(jax, jjnp, jitted)
    assert ours == theirs.replace("P('i',)", "PartitionSpec('i',)").replace("P(None,)", "PartitionSpec(None,)")
