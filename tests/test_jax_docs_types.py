"""What traced values and types print, as JAX 0.10.2 prints them: tracer reprs, varying axes, types' shardings,
PartitionSpec's unreduced/reduced axes."""
import pickle

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax.sharding import AxisType, NamedSharding, PartitionSpec as P


def printed_by(lib, np_, transform):
    seen = []

    def show(x):
        seen.append(repr(x))
        return x

    transform(lib, np_, show)
    return seen


TRANSFORMS = {
    "jit": lambda lib, np_, f: lib.jit(f)(1.0),
    "jit_int_matrix": lambda lib, np_, f: lib.jit(f)(np_.ones((2, 3), np_.int32)),
    "vmap": lambda lib, np_, f: lib.vmap(f)(np_.ones(3)),
    "vmap_axis_1": lambda lib, np_, f: lib.vmap(f, in_axes=1)(np_.ones((2, 3))),
    "grad": lambda lib, np_, f: lib.grad(f)(1.0),
    "grad_array": lambda lib, np_, f: lib.grad(lambda x: f(x).sum())(np_.ones(2)),
    "jvp": lambda lib, np_, f: lib.jvp(f, (1.0,), (1.0,)),
    "jit_grad": lambda lib, np_, f: lib.jit(lib.grad(f))(1.0),
    "vmap_jit": lambda lib, np_, f: lib.vmap(lib.jit(f))(np_.ones(3)),
    "linearize": lambda lib, np_, f: lib.linearize(f, 1.0),
    "vjp": lambda lib, np_, f: lib.vjp(f, 1.0),
    "make_jaxpr_bf16": lambda lib, np_, f: lib.make_jaxpr(f)(np_.ones(2, np_.bfloat16)),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_tracers_print_as_in_jax(transform):
    ours = printed_by(meshax, mnp, TRANSFORMS[transform])
    theirs = printed_by(jax, jjnp, TRANSFORMS[transform])
    assert ours == theirs


def explicit_mesh(lib):
    return lib.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2 if lib is meshax else
                         (jax.sharding.AxisType.Explicit,) * 2)


def auto_mesh(lib):
    return lib.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2 if lib is meshax else
                         (jax.sharding.AxisType.Auto,) * 2)


def types_seen(lib, np_, mesh, spec):
    seen = []

    def look(x):
        t = lib.typeof(x)
        seen.append((str(t), repr(t.sharding).replace("P(", "PartitionSpec("), repr(t.manual_axis_type)))
        return x

    x = lib.device_put(np_.arange(32.0).reshape(8, 4), lib.NamedSharding(mesh, spec))
    look(x)
    lib.jit(look)(x)
    lib.jit(lib.shard_map(look, mesh=mesh, in_specs=spec, out_specs=spec))(x)
    lib.shard_map(look, mesh=mesh, in_specs=spec, out_specs=spec)(x)
    lib.jit(lib.shard_map(lambda b: look(b * 2), mesh=mesh, in_specs=spec, out_specs=spec))(x)
    lib.jit(lib.shard_map(lambda b: look(lib.lax.psum(b, "x")), mesh=mesh, in_specs=spec,
                          out_specs=lib.sharding.PartitionSpec(None, "y")))(x)
    return seen


@pytest.mark.parametrize("kind", ["explicit", "auto"])
@pytest.mark.parametrize("spec", [("x", "y"), ("x", None), (("x", "y"),)], ids=str)
def test_types_show_shardings_and_varying_axes_as_jax(kind, spec):
    mesh_of = explicit_mesh if kind == "explicit" else auto_mesh
    ours = types_seen(meshax, mnp, mesh_of(meshax), P(*spec))
    theirs = types_seen(jax, jjnp, mesh_of(jax), jax.sharding.PartitionSpec(*spec))
    if kind == "auto":  # under jit, meshax's types of Auto-axes values do not know their mesh (README)
        assert ours[1] == (theirs[1][0], "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=PartitionSpec(None, None))",
                           theirs[1][2])
        ours, theirs = ours[:1] + ours[2:], theirs[:1] + theirs[2:]
    assert ours == theirs


def test_types_under_grad_keep_shardings():
    def seen(lib, np_, mesh):
        out = []
        x = lib.device_put(np_.ones(8), lib.NamedSharding(mesh, lib.sharding.PartitionSpec("x")))
        lib.grad(lambda v: (out.append(str(lib.typeof(v))), (v * 2).sum())[1])(x)
        lib.jit(lambda v: out.append(str(lib.typeof(v))) or v)(x)
        return out

    ours_mesh = meshax.make_mesh((8,), ("x",), axis_types=(AxisType.Explicit,))
    with meshax.set_mesh(ours_mesh):
        ours = seen(meshax, mnp, ours_mesh)
    theirs_mesh = jax.make_mesh((8,), ("x",))
    with jax.set_mesh(theirs_mesh):
        theirs = seen(jax, jjnp, theirs_mesh)
    assert ours == theirs == ["float32[8@x]", "float32[8@x]"]


def test_typeof_a_ref():
    assert repr(meshax.typeof(meshax.new_ref(mnp.zeros(3)))) == repr(jax.typeof(jax.new_ref(jjnp.zeros(3))))


def test_partition_spec_unreduced_and_reduced():
    J = jax.sharding.PartitionSpec
    for args, kwargs in [(("x", None), {"reduced": {"y"}}), ((), {"unreduced": {"x"}}),
                         (("x",), {"unreduced": {"z"}, "reduced": {"y"}})]:
        ours, theirs = P(*args, **kwargs), J(*args, **kwargs)
        assert repr(ours) == repr(theirs).replace("P(", "PartitionSpec(")
        assert (ours.unreduced, ours.reduced, ours.partitions) == (theirs.unreduced, theirs.reduced,
                                                                   theirs.partitions)
        assert pickle.loads(pickle.dumps(ours)) == ours
        assert ours.update(partitions=("w",)) == P("w", **kwargs)
    assert P("x", reduced={"y"}) != P("x") and hash(P("x", reduced={"y"})) != hash(P("x"))
    for kwargs in [{"unreduced": {"x"}}, {"reduced": {"x"}}]:
        with pytest.raises(ValueError, match="cannot overlap"):
            P("x", **kwargs)
        with pytest.raises(ValueError, match="cannot overlap"):
            J("x", **kwargs)
    with pytest.raises(ValueError, match="cannot overlap"):
        P(unreduced={"x"}, reduced={"x"})
    mesh = meshax.make_mesh((4, 2), ("x", "y"))
    x = meshax.device_put(mnp.arange(8.0), NamedSharding(mesh, P("x", reduced={"y"})))
    np.testing.assert_array_equal(np.asarray(x), np.arange(8.0))
    partial = meshax.device_put(mnp.arange(8.0), NamedSharding(mesh, P(unreduced={"x"})))  # partial sums
    np.testing.assert_array_equal(np.asarray(partial), np.arange(8.0))  # (tests/test_unreduced.py has more)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_gradients_on_explicit_axes_are_typed_as_their_parameters(jitted):
    def run(lib, np_, mesh):
        with lib.set_mesh(mesh):
            x = lib.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4) / 32, lib.sharding.PartitionSpec("X", None))
            w = lib.device_put(np.ones((4, 8), np.float32) * 0.1, lib.sharding.PartitionSpec(None, "Y"))
            grad = lib.grad(lambda w, x: np_.sum(np_.tanh(x @ w)), argnums=(0, 1))
            gw, gx = (lib.jit(grad) if jitted else grad)(w, x)
            return str(lib.typeof(gw)), str(lib.typeof(gx)), np.asarray(gw), np.asarray(gx)

    ours = run(meshax, mnp, meshax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2))
    theirs = run(jax, jjnp, jax.make_mesh((2, 4), ("X", "Y")))
    assert ours[:2] == theirs[:2]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5)
