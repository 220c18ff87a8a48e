"""What JAX 0.10.2's sharding and remat pages (parallel.md, new_docs/201/sharding.md, 301/remat.md,
gradient-checkpointing.md) rely on, each compared with JAX: `x ** n` as `integer_pow` (values, derivatives, residuals,
jaxprs), ShardingTypeError's wording for elementwise operations, `auto_axes`/`explicit_axes` with call-time
shardings, `use_abstract_mesh`, result specs spelled as JAX's, and make_mesh's Explicit default as an option."""
import io
import contextlib
import re

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
meshax_config = meshax.config

LIBS = {"jax": (jax, jjnp), "meshax": (meshax, mnp)}


def both(run):
    """`run(lib, np_)` under JAX and meshax."""
    return run(jax, jjnp), run(meshax, mnp)


def explicit_mesh(lib, shape=(4, 2), names=("X", "Y")):
    return lib.make_mesh(shape, names, axis_types=(lib.sharding.AxisType.Explicit,) * len(shape))


def printed(fun, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fun(*args)
    return re.sub(r"\bP\(", "PartitionSpec(", out.getvalue())


# ---- x ** n is integer_pow ------------------------------------------------------------------------------------

POWERS = [2, 3, 5, -2, 0, 1]
DATA = np.array([-2.0, -1.25, -0.5, 0.5, 1.5, 2.25, 3.0, 0.75], np.float32)


def _power_runs(lib, np_, n):
    x = np_.asarray(DATA)
    mesh = lib.make_mesh((8,), ("i",), axis_types=(lib.sharding.AxisType.Auto,))
    in_map = lib.shard_map(lambda v: v ** n, mesh=mesh, in_specs=lib.P("i"), out_specs=lib.P("i"))
    return {
        "eager": x ** n,
        "jit": lib.jit(lambda v: v ** n)(x),
        "lax": lib.lax.integer_pow(x, n),
        "grad": lib.grad(lambda v: np_.sum(v ** n))(x),
        "jit_grad": lib.jit(lib.grad(lambda v: np_.sum(lib.lax.integer_pow(v, n))))(x),
        "vmap": lib.vmap(lambda v: lib.lax.integer_pow(v, n))(x),
        "shard_map": in_map(x),
        "jvp": lib.jvp(lambda v: v ** n, (x,), (np_.ones_like(x),))[1],
        "int": np_.arange(5, dtype=np_.int32) ** abs(n),
    }


@pytest.mark.parametrize("n", POWERS)
def test_integer_powers_give_jax_values_and_derivatives(n):
    theirs, ours = both(lambda lib, np_: _power_runs(lib, np_, n))
    for name in theirs:
        assert np.asarray(ours[name]).dtype == np.asarray(theirs[name]).dtype, name
        np.testing.assert_array_equal(np.asarray(ours[name]), np.asarray(theirs[name]), err_msg=name)


def test_integer_pow_in_jaxprs_and_residuals_as_jax():
    theirs, ours = both(lambda lib, np_: str(lib.make_jaxpr(lambda v: v ** 3)(np_.arange(5))))
    assert ours == "{ lambda ; a:i32[5]. let\n    b:i32[5] = integer_pow[y=3] a\n  in (b,) }"
    assert "integer_pow[y=3]" in theirs
    for lib, np_ in LIBS.values():  # the derivative of x ** 2 keeps 2 * x, as JAX's rule does
        text = str(lib.make_jaxpr(lib.grad(lambda v: np_.sum(v ** 2)))(np_.ones(3)))
        assert "integer_pow[y=2]" in text and "mul 2.0:f32[]" in text, text

    def residuals(lib, np_):
        from importlib import import_module

        show = import_module(f"{lib.__name__}.ad_checkpoint").print_saved_residuals
        return printed(show, lambda a, b: np_.sum((a - b) ** 2), np_.ones(4), np_.zeros(4))

    theirs, ours = both(residuals)
    assert ours.splitlines()[-1].split(" from ")[0] == theirs.splitlines()[-1].split(" from ")[0] == \
        "f32[4] output of mul"
    assert len(ours.splitlines()) == len(theirs.splitlines())


# ---- Explicit axes: errors, auto_axes/explicit_axes, use_abstract_mesh, specs --------------------------------


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_conflicting_elementwise_shardings_raise_jax_message(jitted):
    def run(lib, np_):
        with lib.set_mesh(explicit_mesh(lib)):
            x = lib.device_put(np.arange(16).reshape(4, 4), lib.P("X", None))
            y = lib.device_put(np.arange(16).reshape(4, 4), lib.P(None, "X"))
            add = lib.jit(lambda a, b: a + b) if jitted else (lambda a, b: a + b)
            try:
                add(x, y)
            except Exception as error:  # noqa: BLE001 - the error is the result compared
                return type(error).__name__, str(error).splitlines()[0]
        return None

    theirs, ours = both(run)
    assert ours == theirs == ("ShardingTypeError", "add operation with inputs: i32[4@X,4], i32[4,4@X] produces an "
                              "illegally sharded result: i32[4@X,4@X]")


def _auto_axes_run(lib, np_):
    from importlib import import_module

    sharding = import_module(f"{lib.__name__}.sharding")
    with lib.set_mesh(explicit_mesh(lib)):
        x = lib.device_put(np.arange(16).reshape(4, 4), lib.P("X", None))
        y = lib.device_put(np.arange(16).reshape(4, 4), lib.P(None, "X"))

        @sharding.auto_axes
        def add(a, b):
            print(sharding.get_abstract_mesh())
            return a + b

        out = printed(lambda: print(lib.typeof(add(x, y, out_sharding=lib.P("X", None))),
                                    add(x, y, out_sharding=lib.P("X", None)).sharding.spec))
        jitted = lib.jit(lambda a, b: add(a, b, out_sharding=lib.P(None, "X")))(x, y)
        factory = sharding.auto_axes(out_sharding=lib.P("X", None))(lambda a, b: a * b)
        out += printed(lambda: print(lib.typeof(jitted), lib.typeof(factory(x, y)), np.asarray(jitted).sum()))
    with lib.set_mesh(lib.make_mesh((4, 2), ("X", "Y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)):
        @sharding.explicit_axes
        def double(v):
            print(sharding.get_abstract_mesh(), lib.typeof(v), lib.typeof(v * 2))
            return v * 2

        arg = lib.device_put(np.arange(16.0).reshape(4, 4), lib.P("X", "Y"))
        out += printed(lambda: print(np.asarray(lib.jit(lambda v: double(np_.sin(v), in_sharding=lib.P("X", "Y"))
                                                          + 1)(arg)).round(4).tolist()))
        out += printed(lambda: print(np.asarray(double(arg, in_sharding=lib.P("X", None))).tolist()))
    return out


def test_auto_axes_and_explicit_axes_take_shardings_at_the_call():
    theirs, ours = both(_auto_axes_run)
    assert ours == theirs


def test_use_abstract_mesh_views_the_mesh_with_other_axes_under_jit():
    def run(lib, np_):
        with lib.set_mesh(explicit_mesh(lib)):
            x = lib.device_put(np_.arange(32.0).reshape(8, 4), lib.P("X", "Y"))
            seen = []

            @lib.jit
            def f(v):
                view = lib.sharding.AbstractMesh((8,), ("A",), (lib.sharding.AxisType.Explicit,))
                with lib.sharding.use_abstract_mesh(view):
                    seen.append(str(lib.sharding.get_abstract_mesh()))
                    y = lib.reshard(v, lib.P("A", None))
                    seen.append(str(lib.typeof(y)))
                    return y * 2

            z = f(x)
            try:
                with lib.sharding.use_abstract_mesh(lib.sharding.AbstractMesh((4,), ("A",))):
                    pass
                refused = None
            except ValueError as error:
                refused = str(error).split(". Got")[0]
            return str(lib.typeof(z)), tuple(z.sharding.spec), np.asarray(z).tolist(), seen, refused

    theirs, ours = both(run)
    assert ours == theirs
    assert ours[-1] == "use_abstract_mesh cannot change the size of the mesh"


SPEC_CASES = {
    "device_put": lambda lib, np_, x: lib.device_put(x, lib.P("X", None)),
    "elementwise": lambda lib, np_, x: lib.device_put(x, lib.P("X")) * 2,
    "unary": lambda lib, np_, x: np_.sin(lib.device_put(x, lib.P("X"))),
    "jit": lambda lib, np_, x: lib.jit(lambda v: v * 2)(lib.device_put(x, lib.P("X"))),
    "transpose": lambda lib, np_, x: lib.device_put(x, lib.P("X", None)).T,
    "reduction": lambda lib, np_, x: lib.device_put(x, lib.P(None, "X")).sum(0),
    "reshard_equal": lambda lib, np_, x: lib.reshard(lib.device_put(x, lib.P("X")), lib.P("X", None)),
}


@pytest.mark.parametrize("case", sorted(SPEC_CASES))
@pytest.mark.parametrize("axis_type", ["Explicit", "Auto"])
def test_result_specs_are_spelled_as_jax(case, axis_type):
    """Explicit meshes: one entry a dimension, as results' types have; jit results over Auto axes: without
    trailing replicated dimensions, as XLA reports them."""
    def run(lib, np_):
        kind = getattr(lib.sharding.AxisType, axis_type)
        with lib.set_mesh(lib.make_mesh((4, 2), ("X", "Y"), axis_types=(kind, kind))):
            out = SPEC_CASES[case](lib, np_, np_.arange(32.0).reshape(8, 4))
            return tuple(out.sharding.spec), np.asarray(out).tolist()

    if axis_type == "Auto" and case == "reshard_equal":
        pytest.skip("JAX refuses reshard over Auto axes")
    theirs, ours = both(run)
    if axis_type == "Auto" and case in ("device_put", "elementwise", "unary", "transpose", "reduction",
                                        "reshard_equal"):
        # eager operations over Auto axes: JAX's are compiled programs (XLA's spelling), meshax's keep the
        # operands' spec; the layout is the same
        assert ours[1] == theirs[1]
        assert [e for e in ours[0] if e is not None] == [e for e in theirs[0] if e is not None]
        return
    assert ours == theirs


def test_with_sharding_constraint_result_under_jit_on_auto_axes():
    def run(lib, np_):
        with lib.set_mesh(lib.make_mesh((4, 2), ("X", "Y"), axis_types=(lib.sharding.AxisType.Auto,) * 2)):
            x = lib.device_put(np_.arange(16.0).reshape(4, 4), lib.P("X", "Y"))
            z = lib.jit(lambda a, b: lib.lax.with_sharding_constraint(np_.dot(a, b), lib.P("X", None)))(x, x)
            return tuple(z.sharding.spec), np.asarray(z).tolist()

    theirs, ours = both(run)
    assert ours == theirs


def test_make_mesh_explicit_by_default_is_an_option(monkeypatch):
    assert meshax.make_mesh((8,), ("a",)).axis_types == (meshax.sharding.AxisType.Auto,)  # the seeds' default
    meshax_config.update("meshax_explicit_axes_by_default", True)
    try:
        mesh = meshax.make_mesh((4, 2), ("X", "Y"))
        assert mesh.axis_types == tuple(t for t in (meshax.sharding.AxisType.Explicit,) * 2)
        assert [t.name for t in mesh.axis_types] == [t.name for t in jax.make_mesh((4, 2), ("X", "Y")).axis_types]
        assert meshax.make_mesh((8,), ("a",), axis_types=(meshax.sharding.AxisType.Auto,)).axis_types == (
            meshax.sharding.AxisType.Auto,)
        with meshax.set_mesh(mesh):
            x = meshax.device_put(mnp.ones((8, 4)), meshax.P("X", "Y"))
            assert str(meshax.typeof(x)) == "float32[8@X,4@Y]"
    finally:
        meshax_config.update("meshax_explicit_axes_by_default", False)


# ---- nested checkpoints -----------------------------------------------------------------------------------------


def _recursive_checkpoint(lib, funs):
    """301/remat.md's recursive_checkpoint: checkpoints nested log2(len(funs)) deep."""
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        f1, f2 = funs
        return lambda x: f1(f2(x))
    f1 = _recursive_checkpoint(lib, funs[:len(funs) // 2])
    f2 = _recursive_checkpoint(lib, funs[len(funs) // 2:])
    return lambda x: f1(lib.checkpoint(f2)(x))


def _nested_runs(lib, np_, depth):
    f = _recursive_checkpoint(lib, [np_.sin] * depth)
    named = lib.checkpoint(lambda x: np_.sin(lib.checkpoint(
        lambda y: lib.ad_checkpoint.checkpoint_name(np_.sin(y), "s") * 2,
        policy=lib.checkpoint_policies.save_only_these_names("s"))(x)))
    mesh = lib.make_mesh((8,), ("i",), axis_types=(lib.sharding.AxisType.Auto,))
    mapped = lib.shard_map(lib.grad(lambda v: np_.sum(f(v))), mesh=mesh, in_specs=lib.P("i"), out_specs=lib.P("i"))
    xs = np_.linspace(0.5, 2.0, 8, dtype=np_.float32)
    return {
        "grad": lib.grad(f)(3.0),
        "jit_grad": lib.jit(lib.grad(f))(3.0),
        "vmap_grad": lib.vmap(lib.grad(f))(xs),
        "shard_map_grad": mapped(xs),
        "named": lib.grad(named)(1.5),
        "residuals": printed(lib.ad_checkpoint.print_saved_residuals, f, 3.0),
        "named_residuals": printed(lib.ad_checkpoint.print_saved_residuals, named, 1.5),
    }


@pytest.mark.parametrize("depth", [4, 8, 16])
def test_nested_checkpoints_differentiate_and_save_as_jax(depth):
    def run(lib, np_):
        import importlib

        importlib.import_module(f"{lib.__name__}.ad_checkpoint")
        return _nested_runs(lib, np_, depth)

    theirs, ours = both(run)
    for name in theirs:
        if name.endswith("residuals"):
            where = re.compile(r" from \S+:\d+:\d+ ")  # the same lines of this file, as each library reports them
            assert where.sub(" ", ours[name]) == where.sub(" ", theirs[name]), name
        else:
            np.testing.assert_allclose(np.asarray(ours[name]), np.asarray(theirs[name]), rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("remat3", [False, True])
def test_saved_residuals_name_a_checkpointed_functions_arguments_as_jax(remat3):
    def run(lib, np_):
        import importlib

        show = importlib.import_module(f"{lib.__name__}.ad_checkpoint").print_saved_residuals
        before = lib.config.read("jax_remat3") if lib is meshax else lib.config.jax_remat3
        lib.config.update("jax_remat3", remat3)
        try:
            def loss(params, x, y):
                return np_.sum((np_.sin(params[0] @ x) * params[1] - y) ** 2)

            args = ([np_.ones((3, 3)), np_.ones(3)], np_.ones(3), np_.zeros(3))
            return (printed(show, loss, *args), printed(show, lib.checkpoint(loss), *args),
                    printed(show, lib.checkpoint(lambda a, b: np_.sin(a) * b), 1.0, 2.0))
        finally:
            lib.config.update("jax_remat3", before)

    theirs, ours = both(run)
    where = re.compile(r" from \S+:\d+:\d+ ")
    assert [where.sub(" ", text) for text in ours] == [where.sub(" ", text) for text in theirs]


@pytest.mark.parametrize("iota_order", [False, True])
def test_private_test_util_create_mesh_as_jax(iota_order):
    import jax._src.test_util as theirs_module
    from meshax._src.compat.jax_private import test_util as ours_module

    theirs = theirs_module.create_mesh((2, 4), ("x", "y"), iota_order=iota_order)
    ours = ours_module.create_mesh((2, 4), ("x", "y"), iota_order=iota_order)
    assert ours.axis_names == theirs.axis_names and ours.devices.shape == theirs.devices.shape
    assert [d.id for d in ours.devices.flat] == [d.id for d in theirs.devices.flat]
    assert [t.name for t in ours.axis_types] == [t.name for t in theirs.axis_types]


def test_checkpoint_reuses_a_functions_trace_as_jax():
    """gradient-checkpointing.md: a second jax.checkpoint of the same function reuses its first trace (a global it
    reads is read then), eagerly and under jit; a new function object is traced afresh."""
    def run(lib, np_):
        import importlib

        show = importlib.import_module(f"{lib.__name__}.ad_checkpoint").print_saved_residuals
        name = importlib.import_module(f"{lib.__name__}.ad_checkpoint").checkpoint_name
        scale = {"named": False}

        def inner(v):
            y = np_.sin(v)
            return name(y, "y") if scale["named"] else y

        def loss(v):
            return np_.sum(np_.cos(inner(v)))

        policy = lib.checkpoint_policies.save_only_these_names("y")
        first = printed(show, lib.checkpoint(loss, policy=policy), np_.ones(3))
        scale["named"] = True
        again = printed(show, lib.checkpoint(loss, policy=policy), np_.ones(3))
        fresh = printed(show, lib.checkpoint(lambda v: loss(v), policy=policy), np_.ones(3))
        grads = [np.asarray(g).tolist() for g in (lib.grad(lib.checkpoint(loss))(np_.ones(3)),
                                                  lib.jit(lib.grad(lib.checkpoint(loss)))(np_.ones(3)))]
        return first, again, fresh, grads

    theirs, ours = both(run)
    where = re.compile(r" from \S+:\d+:\d+ ")
    assert [where.sub(" ", t) if isinstance(t, str) else t for t in ours] == \
        [where.sub(" ", t) if isinstance(t, str) else t for t in theirs]


def test_meshes_and_devices_print_as_in_the_seeds():
    """README's differences: a mesh alone prints as seed 003 does, a device's str as the seeds' outputs show."""
    ours, theirs = meshax.make_mesh((4, 2), ("X", "Y")), jax.make_mesh((4, 2), ("X", "Y"))
    assert repr(ours) == ("Mesh(device_ids=array([[0, 1],\n       [2, 3],\n       [4, 5],\n       [6, 7]]), "
                          "axis_names=('X', 'Y'))")
    assert str(theirs) == "Mesh('X': 4, 'Y': 2, axis_types=(Explicit, Explicit))" and str(ours) == repr(ours)
    assert str(meshax.devices()[3]) == "TFRT_CPU_3" and str(jax.devices()[3]) == "cpu:3"
    assert repr(meshax.devices()[3]) == repr(jax.devices()[3]) == "CpuDevice(id=3)"


def test_derivative_jaxprs_hold_meshax_equations_with_jax_types():
    """README's differences: the same inputs, outputs and types as JAX's jaxpr, meshax's own equations."""
    def run(lib, np_):
        text = str(lib.make_jaxpr(lib.grad(lambda w, x: np_.sum((x @ w) ** 2)))(np_.ones((4, 2)), np_.ones((8, 4))))
        lines = text.splitlines()
        return lines[0], lines[-1], re.findall(r"= (\w+)", text)

    theirs, ours = both(run)
    assert ours[0] == theirs[0] == "{ lambda ; a:f32[4,2] b:f32[8,4]. let"
    assert ours[1].replace("l", "j") == theirs[1] or ours[1].startswith("  in (")
    assert ours[2] != theirs[2]  # e.g. JAX's `reshard` of the scalar cotangent, meshax's reshape + broadcast
    assert "integer_pow" in ours[2] and "integer_pow" in theirs[2]
