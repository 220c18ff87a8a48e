"""JAX 0.10's sharding API: set_mesh (global and as a context), P, make_mesh over the first devices, typeof with
Explicit axes, reshard, get_abstract_mesh, the ambiguous-contraction error; against JAX where it prints."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import AxisType as JAxisType

import meshax
import meshax.numpy as jnp
from meshax._src.sharding.mesh import current_mesh
from meshax.sharding import AxisType, NamedSharding

X = np.arange(32.0, dtype=np.float32).reshape(8, 4)


def both(program):
    return program(meshax, jnp, AxisType), program(jax, jjnp, JAxisType)


def test_typeof_reshard_and_abstract_mesh_print_as_jax():
    def program(lib, np_, types):
        mesh = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit, types.Explicit))
        lines = [str(lib.sharding.get_abstract_mesh())]
        with lib.set_mesh(mesh):
            lines.append(str(lib.sharding.get_abstract_mesh()))
            x = lib.device_put(X, lib.P("X", "Y"))
            lines += [str(lib.typeof(x)), repr(lib.typeof(x)), str(lib.typeof(np_.sin(x) * 2))]
            z = lib.sharding.reshard(x, lib.P(None, "X"))
            lines += [str(lib.typeof(z)), str(lib.typeof(lib.jit(lambda a: a * 2)(x)))]
            lines.append(repr(lib.typeof(1.0)))
        lines.append(str(lib.sharding.get_abstract_mesh()))
        return lines

    ours, theirs = both(program)
    assert ours == theirs


def test_set_mesh_globally_and_as_a_context():
    mesh = meshax.make_mesh((8,), ("a",))
    assert current_mesh() is None
    handle = meshax.set_mesh(mesh)
    try:
        assert current_mesh() is mesh
        x = meshax.device_put(X, meshax.P("a"))
        assert x.sharding == NamedSharding(mesh, meshax.P("a"))
        out = meshax.shard_map(lambda v: v * 2, in_specs=meshax.P("a"), out_specs=meshax.P("a"))(x)
        np.testing.assert_array_equal(np.asarray(out), X * 2)
    finally:
        handle.__exit__(None, None, None)
    assert current_mesh() is None
    with meshax.set_mesh(mesh):
        assert current_mesh() is mesh
    assert current_mesh() is None
    with pytest.raises(TypeError, match="set_mesh needs a Mesh"):
        meshax.set_mesh("mesh")


def test_make_mesh_takes_the_first_devices_and_axis_types_positionally():
    ours = meshax.make_mesh((4,), ("q",), (AxisType.Explicit,))
    theirs = jax.make_mesh((4,), ("q",), (JAxisType.Explicit,))
    assert [d.id for d in ours.devices.flat] == [d.id for d in theirs.devices.flat]
    assert ours.axis_types == (AxisType.Explicit,)


def test_ambiguous_contraction_over_explicit_axes_raises_as_jax():
    def program(lib, np_, types):
        mesh = lib.make_mesh((4, 2), ("X", "Y"), axis_types=(types.Explicit, types.Explicit))
        with lib.set_mesh(mesh):
            a = lib.device_put(np.ones((8, 4), np.float32), lib.P(None, "X"))
            b = lib.device_put(np.ones((4, 2), np.float32), lib.P("X"))
            one_side = lib.device_put(np.ones((4, 2), np.float32), lib.P())
            ok = np.asarray(a @ one_side)
            with pytest.raises(Exception, match="Contracting dimensions are sharded and it is ambiguous"):
                a @ b
            fixed = np_.matmul(a, b, out_sharding=lib.P("X"))
            return ok, np.asarray(fixed), str(lib.typeof(fixed))

    ours, theirs = both(program)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_reshard_trees_and_errors():
    mesh = meshax.make_mesh((8,), ("a",))
    with meshax.set_mesh(mesh):
        out = meshax.sharding.reshard({"x": X, "y": X[:, :1]}, meshax.P("a"))
        assert out["x"].sharding.spec == meshax.P("a") and out["y"].sharding.spec == meshax.P("a")
    with pytest.raises(ValueError, match="no mesh is in use"):
        meshax.sharding.reshard(X, meshax.P("a"))


def test_out_sharding_on_creation_functions_and_random_as_jax():
    def program(lib, np_, types):
        P = lib.P
        mesh = lib.make_mesh((8,), ("a",), axis_types=(types.Explicit,))
        out = []
        with lib.set_mesh(mesh):
            k = lib.random.key(0)
            made = [np_.zeros((8, 2), out_sharding=P("a")), np_.ones((8,), out_sharding=P("a")),
                    np_.full((8,), 2., out_sharding=P("a")), np_.arange(8, out_sharding=P("a")),
                    np_.zeros_like(np_.ones(8), out_sharding=P("a")),
                    lib.random.normal(k, (8,), out_sharding=P("a")),
                    lib.random.uniform(k, (8, 3), out_sharding=P("a")),
                    lib.random.randint(k, (8,), 0, 5, out_sharding=P("a")),
                    lib.random.bernoulli(k, 0.3, (8,), out_sharding=P("a")),
                    lib.jit(lambda k: lib.random.normal(k, (8,), out_sharding=P("a")))(k)]
            for x in made:
                out.append((str(lib.typeof(x)), np.asarray(x).tolist()))
            out.append((str(lib.typeof(1.0)), repr(lib.typeof(1.0))))
        return out

    ours, theirs = both(program)
    assert ours == theirs
