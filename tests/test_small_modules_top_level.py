"""JAX 0.12's smaller top-level names against real JAX: configuration states, enums, ds, refs, fwd_and_bwd, smap,
get_mesh, make_user_context, copy_to_host_async, jax.ad / jax.memory namespaces."""
from __future__ import annotations

import enum

import jax
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax._src.compat import config_states as mstates
from meshax._src.compat import top_level as mtop
from meshax.sharding import AxisType, PartitionSpec as P

from differential import assert_matches

STATES = ["allow_f16_reductions", "array_garbage_collection_guard", "auto_pcast", "debug_key_reuse",
          "default_prng_impl", "enable_checks", "enable_custom_prng", "jax2tf_associative_scan_reductions",
          "legacy_prng_key", "no_execution", "no_tracing", "remove_size_one_mesh_axis_from_type",
          "softmax_custom_jvp", "thread_guard", "threefry_partitionable", "enable_x64", "debug_nans", "debug_infs"]


def _plain(value):
    return value.value if isinstance(value, enum.Enum) else value


@pytest.mark.parametrize("name", STATES)
def test_state_default_value_and_name(name):
    ours, theirs = getattr(mstates, name), getattr(jax, name)
    assert ours.name == theirs.name
    assert _plain(ours.value) == _plain(theirs.value)


BOOL_STATES = [n for n in STATES if isinstance(getattr(jax, n).value, bool)]


@pytest.mark.parametrize("name", [n for n in BOOL_STATES if n != "threefry_partitionable"])
@pytest.mark.parametrize("new", [True, False, 1, 0, "yes"])
def test_bool_state_context_sets_and_restores(name, new):
    ours, theirs = getattr(mstates, name), getattr(jax, name)
    before = ours.value
    with ours(new), theirs(new):
        assert ours.value == theirs.value
    assert ours.value == before == theirs.value


@pytest.mark.parametrize("name", BOOL_STATES)
def test_bool_state_without_value_means_true(name):
    ours = getattr(mstates, name)
    if name == "threefry_partitionable":
        with ours():
            assert ours.value is True
        return
    with ours(), getattr(jax, name)():
        assert ours.value is True is getattr(jax, name).value


@pytest.mark.parametrize("name", STATES)
def test_state_is_not_a_context_manager_nor_a_bool(name):
    for lib in (mstates, jax):
        state = getattr(lib, name)
        with pytest.raises(TypeError):
            bool(state)
        with pytest.raises((TypeError, AttributeError)):
            with state:
                pass


@pytest.mark.parametrize("name,value", [("array_garbage_collection_guard", "zz"), ("array_garbage_collection_guard", 3),
                                        ("default_prng_impl", "zz"), ("default_prng_impl", 3),
                                        ("legacy_prng_key", "zz"), ("legacy_prng_key", 3)])
def test_enum_state_rejects_what_jax_rejects(name, value):
    with pytest.raises(Exception) as theirs:
        with getattr(jax, name)(value):
            pass
    with pytest.raises(theirs.type):
        with getattr(mstates, name)(value):
            pass


@pytest.mark.parametrize("name,value", [("array_garbage_collection_guard", "log"),
                                        ("array_garbage_collection_guard", None), ("legacy_prng_key", "error"),
                                        ("legacy_prng_key", "warn"), ("default_prng_impl", "threefry2x32")])
def test_enum_state_accepts_choices(name, value):
    with getattr(mstates, name)(value), getattr(jax, name)(value):
        assert _plain(getattr(mstates, name).value) == _plain(getattr(jax, name).value)


def test_states_meshax_cannot_honour_raise():
    with pytest.raises(NotImplementedError):
        with mstates.default_prng_impl("rbg"):
            pass
    with pytest.raises(NotImplementedError):
        with mstates.threefry_partitionable(False):
            pass


def test_states_of_config_options_agree_with_config():
    with mstates.enable_checks(True):
        assert meshax.config.jax_enable_checks is True
    assert meshax.config.jax_enable_checks is False
    with mstates.enable_x64(True):
        assert mnp.ones(2).dtype == np.float64
    assert mnp.ones(2).dtype == np.float32
    with mstates.debug_nans(True):
        with pytest.raises(FloatingPointError):
            mnp.log(-mnp.ones(2))


@pytest.mark.parametrize("value", [True, "x", ("x",), frozenset({"x"}), {"x", "y"}])
def test_no_collectives(value):
    try:
        with jax.sharding.no_collectives(value):
            expected = jax.sharding.no_collectives.value
    except Exception as error:
        with pytest.raises(type(error)):
            with meshax.sharding.no_collectives(value):
                pass
        return
    with meshax.sharding.no_collectives(value):
        assert meshax.sharding.no_collectives.value == expected
    assert meshax.sharding.no_collectives.value == frozenset() == jax.sharding.no_collectives.value


@pytest.mark.parametrize("default", [None, 0, "a"])
def test_make_user_context(default):
    ours, theirs = mstates.make_user_context(default), jax.make_user_context(default)
    assert ours.value == theirs.value
    with ours(5), theirs(5):
        assert ours.value == theirs.value == 5
    assert ours.value == theirs.value == default


@pytest.mark.parametrize("name", ["CompilerEffortLevel", "Inline"])
def test_enums(name):
    ours, theirs = getattr(mtop, name), getattr(jax, name)
    assert [(m.name, m.value) for m in ours] == [(m.name, m.value) for m in theirs]


def test_namespaces():
    assert [m.name for m in mtop.memory.Space] == [m.name for m in jax.memory.Space]
    assert sorted(vars(mtop.ad)) == sorted(vars(jax.ad))
    assert repr(mtop.ad.DontWant()) == repr(jax.ad.DontWant())


@pytest.mark.parametrize("args", [(1, 3), (2,), (None, 3), (None,), (1, 3, 2), (0, 0), (4, 2, 1)])
def test_ds(args):
    ours, theirs = mtop.ds(*args), jax.ds(*args)
    assert repr(ours) == repr(theirs)
    assert type(ours).__name__ == type(theirs).__name__


@pytest.mark.parametrize("args", [(1, 3), (0, 2, 2), (3, 2), (0, 5)])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_ds_indexes_refs_through_jax_ref(args, mode):
    import meshax.ref  # noqa: F401

    def case(L, lib_ds, x):
        r = L.new_ref(x)
        L.ref.set(r, lib_ds(*args), L.ref.get(r, lib_ds(*args)) * 2)
        return r[...]

    x = np.arange(10.0, dtype=np.float32)
    ours = (meshax.jit(lambda v: case(meshax, mtop.ds, v)) if mode == "jit" else
            lambda v: case(meshax, mtop.ds, v))(mnp.asarray(x))
    assert_matches(ours, case(jax, jax.ds, jax.numpy.asarray(x)))


@pytest.mark.xfail(strict=True, reason="Array/Ref indexing does not take jax.ds's Slice yet: numpy/indexing.py's "
                                        "_normalize_index should turn a Slice into slice / index array (Slice.as_index)")
def test_ds_indexes_arrays_and_refs_directly():
    x = mnp.arange(10.0)
    assert_matches(x[mtop.ds(1, 3)], jax.numpy.arange(10.0)[jax.ds(1, 3)])


@pytest.mark.parametrize("start", [0, 1, 3])
def test_ds_with_traced_start(start):
    def case(L, lib_ds, x, i):
        return L.ref.get(L.new_ref(x), lib_ds(i, 2))

    x = np.arange(6.0, dtype=np.float32)
    import meshax.ref  # noqa: F401

    ours = meshax.jit(lambda v, i: case(meshax, mtop.ds, v, i))(mnp.asarray(x), start)
    assert_matches(ours, jax.jit(lambda v, i: case(jax, jax.ds, v, i))(x, start))


_SHAPE_AT = {None: (4,), (): (4,), 1: (), (slice(1, 3),): (2,)}


@pytest.mark.parametrize("op", ["get", "set", "swap", "addupdate"])
@pytest.mark.parametrize("idx", [None, (), 1, (slice(1, 3),)])
@pytest.mark.parametrize("value_shape", ["matching", (), (1,)])
def test_ref_functions(op, idx, value_shape):
    import meshax.ref as mref

    shape = _SHAPE_AT[idx] if value_shape == "matching" else value_shape

    def case(L, x):
        r = L.new_ref(x)
        value = L.numpy.full(shape, 7.0)
        module = L.ref
        if op == "get":
            return module.get(r, idx)
        if op == "set":
            module.set(r, idx, value)
            return r[...]
        if op == "swap":
            return module.swap(r, idx, value), r[...]
        module.addupdate(r, idx, value)
        return r[...]

    x = np.arange(4.0, dtype=np.float32)
    assert mref.Ref is meshax.Ref
    try:
        expected = case(jax, jax.numpy.asarray(x))
    except ValueError:
        with pytest.raises(ValueError):
            case(meshax, mnp.asarray(x))
        with pytest.raises(ValueError):
            meshax.jit(lambda v: case(meshax, v))(mnp.asarray(x))
        return
    assert_matches(case(meshax, mnp.asarray(x)), expected)
    assert_matches(meshax.jit(lambda v: case(meshax, v))(mnp.asarray(x)), expected)


@pytest.mark.parametrize("shape,dtype", [((3,), np.float32), ((2, 2), np.int32)])
def test_empty_ref_and_free_ref(shape, dtype):
    import meshax.ref  # noqa: F401

    def case(L, x):
        r = L.ref.empty_ref(L.typeof(x))
        r[...] = x * 2
        y = r[...]
        assert L.ref.free_ref(r) == ()
        return y

    x = np.ones(shape, dtype)
    assert_matches(meshax.jit(lambda v: case(meshax, v))(x), jax.jit(lambda v: case(jax, v))(x))
    with pytest.raises(NotImplementedError):
        meshax.ref.empty_ref(meshax.ShapeDtypeStruct(shape, dtype))
    with pytest.raises(NotImplementedError):
        jax.empty_ref(jax.ShapeDtypeStruct(shape, dtype))


@pytest.mark.parametrize("argnums", [0, 1, (0,), (0, 1), (1, 0)])
@pytest.mark.parametrize("jitted", [True, False])
def test_fwd_and_bwd(argnums, jitted):
    def f(L, x, y):
        return L.numpy.sin(x) * y + x ** 2

    x, y = np.float32(0.5), np.arange(3, dtype=np.float32)
    ct = np.ones(3, np.float32)
    fwd, bwd = mtop.fwd_and_bwd(lambda a, b: f(meshax, a, b), argnums, jitted=jitted)
    jfwd, jbwd = jax.fwd_and_bwd(lambda a, b: f(jax, a, b), argnums, jitted=jitted)
    out, res = fwd(x, y)
    jout, jres = jfwd(x, y)
    assert_matches(out, jout)
    assert_matches(bwd(res, ct), jbwd(jres, ct))


def test_fwd_and_bwd_has_aux():
    fwd, bwd = mtop.fwd_and_bwd(lambda x: (x * 2, {"a": x}), argnums=0, has_aux=True)
    jfwd, jbwd = jax.fwd_and_bwd(lambda x: (x * 2, {"a": x}), argnums=0, has_aux=True)
    out, res, aux = fwd(3.0)
    jout, jres, jaux = jfwd(3.0)
    assert_matches((out, aux), (jout, jaux))
    assert_matches(bwd(res, 1.0), jbwd(jres, 1.0))


def test_copy_to_host_async():
    x = mnp.arange(3.0)
    assert_matches(mtop.copy_to_host_async(x), jax.copy_to_host_async(jax.numpy.arange(3.0)))


def test_get_mesh():
    assert mtop.get_mesh().axis_names == jax.get_mesh().axis_names == ()
    assert mtop.get_mesh().size == jax.get_mesh().size == 0
    mesh = meshax.make_mesh((4, 2), ("x", "y"))
    with meshax.set_mesh(mesh):
        assert mtop.get_mesh() is mesh
        assert meshax.sharding.get_mesh() is mesh


def _meshes():
    return (meshax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Explicit,) * 2),
            jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2))


def _trimmed(spec):
    """A PartitionSpec's entries without trailing Nones (P('x') and P('x', None) say the same)."""
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


def _both_smap(body, x, spec, jit=False, **kw):
    mesh, jmesh = _meshes()
    with meshax.set_mesh(mesh):
        f = mtop.smap(lambda *a: body(meshax, *a), **kw)
        ours = (meshax.jit(f) if jit else f)(*[meshax.device_put(v, s) for v, s in zip(x, spec)])
        ours_spec = _trimmed(ours.sharding.spec)
    with jax.set_mesh(jmesh):
        g = jax.smap(lambda *a: body(jax, *a), **kw)
        theirs = g(*[jax.device_put(v, jax.sharding.PartitionSpec(*s)) for v, s in zip(x, spec)])
        theirs_spec = _trimmed(theirs.sharding.spec)
    assert_matches(ours, theirs)
    assert ours_spec == theirs_spec


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("in_axes,out_axes,axis,spec", [
    (0, 0, "x", P("x")), (0, None, "x", P("x")), (1, 1, "y", P(None, "y")), (None, None, "x", P()),
    ((0,), 0, "x", P("x"))])
def test_smap_matches_jax(jit, in_axes, out_axes, axis, spec):
    def body(L, a):
        total = L.lax.psum(a, axis)
        if out_axes is None:
            return total if in_axes is not None else a * 2
        return a * L.lax.axis_index(axis) + total

    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    _both_smap(body, (x,), (spec,), jit=jit, in_axes=in_axes, out_axes=out_axes, axis_name=axis)


@pytest.mark.parametrize("spec", [P("x"), P()])
def test_smap_infers_in_axes_on_explicit_axes(spec):
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)
    _both_smap(lambda L, a: a * 2, (x,), (spec,), out_axes=0, axis_name="x")


def test_smap_errors_as_jax():
    x = np.ones((8, 2), np.float32)
    with pytest.raises(ValueError):
        mtop.smap(lambda a: a, in_axes=0, out_axes=0, axis_name="x")(mnp.asarray(x))
    with pytest.raises(ValueError):
        jax.smap(lambda a: a, in_axes=0, out_axes=0, axis_name="x")(x)
    with pytest.raises(TypeError):
        mtop.smap(lambda a: a, in_axes=0, axis_name="x")
    with meshax.set_mesh(meshax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)):
        with pytest.raises(TypeError):
            mtop.smap(lambda a: a, out_axes=0, axis_name="x")(mnp.asarray(x))
    with jax.set_mesh(jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)):
        with pytest.raises(TypeError):
            jax.smap(lambda a: a, out_axes=0, axis_name="x")(x)


def test_version_module():
    import meshax.version

    assert meshax.version.__version__ == meshax.__version__
