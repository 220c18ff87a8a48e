"""JAX 0.12's names in the small modules against real JAX: jax.monitoring, jax.dlpack, jax.errors, jax.debug,
jax.sharding, jax.ad_checkpoint, jax.stages, jax.tree_util / jax.tree, jax.random, jax.nn's scaled products,
jax.profiler's profile data, jax.custom_derivatives and jax.experimental.multihost_utils."""
from __future__ import annotations

import dataclasses
import importlib
import logging
import sys

import jax
import jax.ad_checkpoint
import jax.experimental.multihost_utils
import ml_dtypes
import numpy as np
import pytest

import meshax
import meshax.dlpack
import meshax.monitoring
import meshax.numpy as mnp

from differential import assert_matches

MODULES = ["monitoring", "dlpack", "custom_batching", "debug", "errors", "sharding", "ad_checkpoint", "stages",
           "tree_util", "tree", "custom_derivatives", "random", "nn", "profiler", "experimental.multihost_utils"]
NOT_PUBLIC_API = {"experimental.multihost_utils": {"Any", "P", "ProcessFailureError", "ad", "annotations", "array",
                                                   "batching", "contextlib", "core", "distributed", "dtypes", "jax",
                                                   "jnp", "lru_cache", "mlir", "np", "partial", "pjit_lib", "prng",
                                                   "pxla", "safe_zip", "sharding_impls", "tree_flatten",
                                                   "tree_unflatten", "xla_bridge", "xla_client", "zlib"}}


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_of_jax_module_exists(module):
    theirs = importlib.import_module(f"jax.{module}")
    ours = importlib.import_module(f"meshax.{module}")
    skip = NOT_PUBLIC_API.get(module, set())
    names = [n for n in dir(theirs) if not n.startswith("_") and n not in skip and not n.endswith(("_impl", "_p"))
             or n in ("random_gamma_p", "name_p", "remat_opt_p")]
    missing = [n for n in names if not hasattr(ours, n) and not n.startswith(("gtl_", "ltg_", "global_array_to_host_"
                                                                                         "local_array_", "host_local_"))]
    assert not missing


# ---- jax.monitoring ----------------------------------------------------------------------------------------------


@pytest.fixture
def listeners():
    yield
    meshax.monitoring.clear_event_listeners()
    jax.monitoring.clear_event_listeners()


RECORDS = [("record_event", "register_event_listener", ("e",), {"k": 1}),
           ("record_event_duration_secs", "register_event_duration_secs_listener", ("e", 2.5), {"k": "v"}),
           ("record_event_time_span", "register_event_time_span_listener", ("e", 1.0, 3.0), {}),
           ("record_scalar", "register_scalar_listener", ("e", 7), {"k": 2})]


@pytest.mark.parametrize("record,register,args,kwargs", RECORDS)
def test_monitoring_listeners_get_their_records(listeners, record, register, args, kwargs):
    seen = {"meshax": [], "jax": []}
    for name, module in (("meshax", meshax.monitoring), ("jax", jax.monitoring)):
        for _, other, _, _ in RECORDS:  # every kind of listener, to see that only the right one is called
            getattr(module, other)(lambda *a, _o=other, _n=name, **k: seen[_n].append((_o, a, k)))
        getattr(module, record)(*args, **kwargs)
    assert seen["meshax"] == [s for s in seen["jax"] if s[1][0] == "e"]


UNREGISTER = [("register_event_listener", "unregister_event_listener"),
              ("register_event_duration_secs_listener", "unregister_event_duration_listener"),
              ("register_event_time_span_listener", "unregister_event_time_span_listener"),
              ("register_scalar_listener", "unregister_scalar_listener")]


@pytest.mark.parametrize("register,unregister", UNREGISTER)
def test_monitoring_unregister(listeners, register, unregister):
    for module in (meshax.monitoring, jax.monitoring):
        callback = lambda *a, **k: None  # noqa: E731
        with pytest.raises(AssertionError):
            getattr(module, unregister)(callback)
        getattr(module, register)(callback)
        getattr(module, register)(callback)
        getattr(module, unregister)(callback)
        getattr(module, unregister)(callback)
        with pytest.raises(AssertionError):
            getattr(module, unregister)(callback)


def test_monitoring_clear(listeners):
    seen = []
    meshax.monitoring.register_event_listener(lambda *a, **k: seen.append(a))
    meshax.monitoring.clear_event_listeners()
    meshax.monitoring.record_event("e")
    assert seen == []


# ---- jax.dlpack ------------------------------------------------------------------------------------------------------

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.bool_, np.complex64, np.complex128, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
          ml_dtypes.int4, np.longdouble, np.clongdouble, np.object_, np.str_, "float32", np.dtype("int8")]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dlpack_is_supported_dtype(dtype):
    assert meshax.dlpack.is_supported_dtype(dtype) == jax.dlpack.is_supported_dtype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.int64, np.uint8, np.bool_, np.complex64])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 3)])
@pytest.mark.parametrize("layout", ["c", "transposed"])
def test_from_dlpack_matches_jax(dtype, shape, layout):
    x = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    if layout == "transposed":
        x = x.T
    assert_matches(meshax.dlpack.from_dlpack(x), jax.dlpack.from_dlpack(x))


@pytest.mark.parametrize("bad", ["list", "strided", "object", "strings"])
def test_from_dlpack_errors_as_jax(bad):
    x = {"list": [1, 2], "strided": np.arange(6.0)[::2], "object": np.array([1, 2], dtype=object),
         "strings": np.array(["a"])}[bad]
    with pytest.raises(Exception) as theirs:
        jax.dlpack.from_dlpack(x)
    with pytest.raises(Exception) as ours:
        meshax.dlpack.from_dlpack(x)
    assert type(ours.value).__name__ == type(theirs.value).__name__


def test_from_dlpack_on_a_device_and_in_jit():
    device = meshax.devices()[3]
    y = meshax.dlpack.from_dlpack(np.ones(3, np.float32), device=device)
    assert y.sharding.device_set == {device}
    assert_matches(meshax.jit(lambda v: v * 2)(meshax.dlpack.from_dlpack(np.arange(3.0))),
                   jax.jit(lambda v: v * 2)(jax.dlpack.from_dlpack(np.arange(3.0))))


# ---- jax.errors --------------------------------------------------------------------------------------------------

ERRORS = ["InconclusiveDimensionOperation", "JAXIndexError", "JAXTypeError", "JaxRuntimeError", "JaxprTypeError",
          "KeyReuseError"]


@pytest.mark.parametrize("name", ERRORS)
def test_error_hierarchy(name):
    ours, theirs = getattr(meshax.errors, name), getattr(jax.errors, name)
    builtin = lambda c: [b.__name__ for b in c.__mro__ if b.__module__ == "builtins"]  # noqa: E731
    assert builtin(ours) == builtin(theirs)
    named = lambda c: [b.__name__ for b in c.__mro__ if b.__name__ in ERRORS]  # noqa: E731
    assert named(ours) == named(theirs)
    assert "boom" in str(ours("boom"))


# ---- jax.debug ---------------------------------------------------------------------------------------------------


def test_debug_effects_are_classes():
    for name in ("DebugEffect", "OrderedDebugEffect"):
        assert isinstance(getattr(meshax.debug, name), type) and isinstance(getattr(jax.debug, name), type)


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("fmt,kind", [("x={x}", "named"), ("y={}", "positional"), ("plain", "none"),
                                      ("x={x}", "two_calls")])
def test_debug_log(caplog, mode, fmt, kind):
    def case(L, x):
        if kind == "two_calls":
            L.debug.log(ordered=True)(fmt, x=x)
        elif kind == "named":
            L.debug.log(fmt, x=x)
        elif kind == "positional":
            L.debug.log(fmt, x)
        else:
            L.debug.log(fmt)
        return x

    with caplog.at_level(logging.INFO):
        for L in (meshax, jax):
            x = L.numpy.arange(3.0)
            (L.jit(lambda v, L=L: case(L, v)) if mode == "jit" else lambda v, L=L: case(L, v))(x)
            L.effects_barrier()
    messages = [r.getMessage() for r in caplog.records if r.name in ("meshax.debug", "jax._src.debugging")]
    assert len(messages) == 2 and messages[0] == messages[1]


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_debug_breakpoint_calls_the_breakpoint_hook(monkeypatch, mode):
    hits = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: hits.append(1))

    def f(x):
        meshax.debug.breakpoint()
        return x + 1

    out = (meshax.jit(f) if mode == "jit" else f)(mnp.ones(2))
    assert hits == [1]
    assert_matches(out, jax.numpy.ones(2) + 1)


def test_inspect_array_sharding():
    mesh = meshax.make_mesh((8,), ("x",))
    x = meshax.device_put(mnp.arange(8.0), meshax.NamedSharding(mesh, meshax.P("x")))
    seen = []
    meshax.debug.inspect_array_sharding({"a": x, "b": mnp.ones(2)}, callback=seen.append)
    assert seen[0] == x.sharding and len(seen) == 2
    explicit = meshax.make_mesh((8,), ("x",), axis_types=(meshax.sharding.AxisType.Explicit,))
    with meshax.set_mesh(explicit):
        y = meshax.device_put(mnp.arange(8.0), meshax.P("x"))
        meshax.jit(lambda v: meshax.debug.inspect_array_sharding(v, callback=seen.append) or v)(y)
    assert tuple(seen[-1].spec) == ("x",)
    jseen = []
    jax.debug.inspect_array_sharding(jax.numpy.ones(2), callback=jseen.append)
    assert type(seen[1]).__name__ == type(jseen[0]).__name__ == "SingleDeviceSharding"


# ---- jax.sharding ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("cpu", 2, "cpu"), ("tpu v5", None, "tpu")])
def test_abstract_device(args):
    ours, theirs = meshax.sharding.AbstractDevice(*args), jax.sharding.AbstractDevice(*args)
    assert repr(ours) == repr(theirs)
    assert ours == meshax.sharding.AbstractDevice(*args) and hash(ours) == hash(meshax.sharding.AbstractDevice(*args))
    assert (ours.device_kind, ours.num_cores, ours.platform) == (theirs.device_kind, theirs.num_cores, theirs.platform)


def test_unreduced_kind():
    assert [(m.name, m.value) for m in meshax.sharding.UnreducedKind] == \
        [(m.name, m.value) for m in jax.sharding.UnreducedKind]


MATS = [{}, {"varying": {"x"}}, {"varying": frozenset({"x"}), "unreduced": {"y"}}, {"reduced": {"x", "y"}},
        {"varying": {"x"}, "unreduced": {"x"}}, {"unreduced": {"y"}, "reduced": {"y"}}]


@pytest.mark.parametrize("kwargs", MATS)
def test_manual_axis_type(kwargs):
    try:
        theirs = jax.sharding.ManualAxisType(**kwargs)
    except Exception as error:
        with pytest.raises(type(error)):
            meshax.sharding.ManualAxisType(**kwargs)
        return
    ours = meshax.sharding.ManualAxisType(**kwargs)
    assert repr(ours).replace("UnreducedKind.", "") == repr(theirs).replace("UnreducedKind.", "")
    assert ours.empty == theirs.empty and ours.vur == theirs.vur
    assert ours == meshax.sharding.ManualAxisType(**kwargs)
    assert repr(ours.update(varying=frozenset())) .replace("UnreducedKind.", "") == \
        repr(theirs.update(varying=frozenset())).replace("UnreducedKind.", "")


@pytest.mark.parametrize("index", [0, 5])
def test_make_single_device_sharding(index):
    sharding = meshax.sharding.make_single_device_sharding(meshax.devices()[index])
    assert type(sharding).__name__ == type(jax.sharding.make_single_device_sharding(jax.devices()[0])).__name__
    x = meshax.device_put(mnp.arange(3.0), sharding)
    assert x.sharding.device_set == {meshax.devices()[index]}


# ---- jax.ad_checkpoint -------------------------------------------------------------------------------------------


def test_policy_answers():
    assert meshax.ad_checkpoint.Offloadable("device", "pinned_host") == ("device", "pinned_host")
    assert meshax.ad_checkpoint.Offloadable._fields == jax.ad_checkpoint.Offloadable._fields
    assert repr(meshax.ad_checkpoint.Offloadable("a", "b")) == repr(jax.ad_checkpoint.Offloadable("a", "b"))
    assert meshax.ad_checkpoint.name_p.name == jax.ad_checkpoint.name_p.name


@pytest.mark.parametrize("answer", ["Recompute", "Saveable", "Offloadable"])
def test_policy_answers_decide_what_is_saved(answer):
    def run(L):
        value = getattr(L.ad_checkpoint, answer)
        value = value("device", "pinned_host") if answer == "Offloadable" else value

        def policy(prim, *_, **params):
            return value if params.get("name") == "h" else L.ad_checkpoint.Recompute

        def f(x):
            return L.numpy.sin(L.ad_checkpoint.checkpoint_name(L.numpy.cos(x), "h")).sum()

        g = L.checkpoint(f, policy=policy)
        saved = (L._src.ad_checkpoint if L is jax else L.ad_checkpoint).saved_residuals
        return saved(g, L.numpy.ones(3)), L.grad(g)(L.numpy.ones(3))

    (ours, ours_grad), (theirs, theirs_grad) = run(meshax), run(jax)
    assert_matches(ours_grad, theirs_grad)
    assert any("h" in str(r[1]) for r in ours) == any("h" in str(r[1]) for r in theirs)


@pytest.mark.parametrize("mode", ["eager", "jit", "grad"])
def test_checkpoint_name_fwd(mode):
    def case(L, x):
        f = lambda v: L.ad_checkpoint.checkpoint_name_fwd(v * 2, "a").sum()  # noqa: E731
        return {"eager": f, "jit": L.jit(f), "grad": L.grad(f)}[mode](x)

    assert_matches(case(meshax, mnp.arange(3.0)), case(jax, jax.numpy.arange(3.0)))


# ---- jax.stages --------------------------------------------------------------------------------------------------


def test_stages_names():
    assert meshax.stages.CompilerOptions == jax.stages.CompilerOptions
    assert isinstance(meshax.jit(lambda x: x), meshax.stages.Wrapped)
    assert isinstance(jax.jit(lambda x: x), jax.stages.Wrapped)
    assert not isinstance(lambda x: x, meshax.stages.Wrapped)


# ---- jax.tree_util / jax.tree ------------------------------------------------------------------------------------

TREES = [[1, (2, 3)], {"b": 1, "a": (2,)}, None, (1,), (), {"x": None}, [], 1, "a", 2.5]


@pytest.mark.parametrize("tree", TREES, ids=repr)
@pytest.mark.parametrize("name", ["flatten_one_level", "flatten_one_level_with_keys"])
def test_flatten_one_level(tree, name):
    try:
        theirs = getattr(jax.tree_util, name)(tree)
    except ValueError:
        with pytest.raises(ValueError):
            getattr(meshax.tree_util, name)(tree)
        return
    ours = getattr(meshax.tree_util, name)(tree)
    assert repr(ours) == repr(theirs)


def test_flatten_one_level_of_arrays_and_namedtuples():
    with pytest.raises(ValueError):
        meshax.tree_util.flatten_one_level(mnp.ones(2))
    point = type("Point", (), {})
    import collections

    nt = collections.namedtuple("Nt", "a b")
    assert meshax.tree_util.flatten_one_level(nt(1, 2))[0] == jax.tree_util.flatten_one_level(nt(1, 2))[0]
    del point


@pytest.mark.parametrize("typ", [list, tuple, dict, type(None), int, str, float, object])
def test_is_tree_node(typ):
    assert meshax.tree_util.is_tree_node(typ) == jax.tree_util.is_tree_node(typ)


@pytest.mark.parametrize("prefix,full", [([1, {"a": 2}], [(3, 4), {"a": [5, 6]}]), (1, [1, 2, (3,)]),
                                         ([1, 2, 3], [1, 2]), ({"a": 1}, {"b": 1})])
def test_tree_broadcast(prefix, full):
    try:
        theirs = jax.tree_util.tree_broadcast(prefix, full)
    except ValueError:
        with pytest.raises(ValueError):
            meshax.tree_util.tree_broadcast(prefix, full)
        return
    assert meshax.tree_util.tree_broadcast(prefix, full) == theirs == jax.tree.broadcast(prefix, full)
    assert meshax.tree.broadcast(prefix, full) == theirs


@pytest.mark.parametrize("count", range(0, 9))
def test_tree_reduce_associative(count):
    leaves = list(range(count))
    if count == 0:
        with pytest.raises(TypeError):
            meshax.tree_util.tree_reduce_associative(lambda a, b: (a, b), leaves)
        with pytest.raises(TypeError):
            jax.tree_util.tree_reduce_associative(lambda a, b: (a, b), leaves)
        assert meshax.tree_util.tree_reduce_associative(lambda a, b: a, leaves, identity=0) == 0
        return
    for ours in (meshax.tree_util.tree_reduce_associative, meshax.tree.reduce_associative):
        assert ours(lambda a, b: (a, b), leaves) == jax.tree_util.tree_reduce_associative(lambda a, b: (a, b), leaves)


def test_default_registry():
    registry = meshax.tree_util.default_registry
    leaves, treedef = registry.flatten([1, (2,)])
    assert leaves == jax.tree_util.default_registry.flatten([1, (2,)])[0] and treedef.num_leaves == 2
    assert registry.is_node(list) == jax.tree_util.default_registry.is_node(list) is True

    class Box:
        def __init__(self, v):
            self.v = v

    registry.register_node(Box, lambda b: ((b.v,), None), lambda _, c: Box(*c))
    assert meshax.tree_util.tree_leaves(Box(3)) == [3]


def test_tree_static():
    for L in (meshax, jax):
        @L.tree_util.register_dataclass
        @dataclasses.dataclass
        class Op:
            x: object
            op: str = L.tree.static(default="add")

        leaves, treedef = L.tree.flatten(Op(L.numpy.ones(2)))
        assert len(leaves) == 1 and L.tree.unflatten(treedef, leaves).op == "add"
        assert dataclasses.fields(Op)[1].metadata["static"] is True


# ---- jax.random --------------------------------------------------------------------------------------------------


def test_random_key_type():
    assert meshax.random.Key(3) == jax.random.Key(3) == 3
    assert meshax.random.Key.__name__ == jax.random.Key.__name__ == "Key"


# ---- jax.nn ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["mxfp8", "mxfp4", "nvfp4"])
def test_get_scaled_dot_general_config(mode):
    ours, theirs = meshax.nn.get_scaled_dot_general_config(mode), jax.nn.get_scaled_dot_general_config(mode)
    for field in ("mode", "block_size", "data_type", "scale_type", "infer_only"):
        assert getattr(ours, field) == getattr(theirs, field)
    assert (ours.global_scale is None) == (theirs.global_scale is None)
    with pytest.raises(ValueError):
        meshax.nn.get_scaled_dot_general_config("int8")


@pytest.mark.parametrize("shapes", [((1, 4, 64), (1, 3, 64), 2), ((2, 3, 32), (2, 5, 32), 1), ((1, 2, 4), (1, 3, 4), 4)])
@pytest.mark.parametrize("dtypes", [(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu), (np.float32, np.float32)])
@pytest.mark.parametrize("out", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_scaled_matmul(shapes, dtypes, out, mode):
    (a_shape, b_shape, blocks), (data, scale) = shapes, dtypes
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=a_shape).astype(data), rng.normal(size=b_shape).astype(data)
    sa = (2.0 ** rng.integers(-2, 3, size=a_shape[:2] + (blocks,))).astype(scale)
    sb = (2.0 ** rng.integers(-2, 3, size=b_shape[:2] + (blocks,))).astype(scale)

    def case(L, *xs):
        return L.nn.scaled_matmul(*xs, preferred_element_type=out)

    ours = (meshax.jit(lambda *v: case(meshax, *v)) if mode == "jit" else lambda *v: case(meshax, *v))(a, b, sa, sb)
    assert_matches(ours, case(jax, a, b, sa, sb), rtol=1e-2 if out != np.float32 else 2e-6, atol=1e-5)


@pytest.mark.parametrize("bad", [((2, 3), (3, 4), (2, 1), (3, 1)), ((1, 2, 4), (1, 3, 4), (1, 2, 2), (1, 3, 1))])
def test_scaled_matmul_errors(bad):
    arrays = [np.ones(s, np.float32) for s in bad]
    with pytest.raises(ValueError):
        jax.nn.scaled_matmul(*arrays)
    with pytest.raises(ValueError):
        meshax.nn.scaled_matmul(*arrays)


@pytest.mark.parametrize("dims", [(((1,), (0,)), ((), ())), (((2,), (1,)), ((0,), (0,)))])
def test_scaled_dot_general_without_configs_is_dot_general(dims):
    shapes = {(): ((2, 3), (3, 4)), (0,): ((2, 3, 4), (2, 4, 5))}[dims[1][0]]
    a, b = (np.arange(np.prod(s), dtype=np.float32).reshape(s) for s in shapes)
    assert_matches(meshax.nn.scaled_dot_general(a, b, dims), jax.nn.scaled_dot_general(a, b, dims))


# ---- jax.profiler ------------------------------------------------------------------------------------------------


def test_profile_session_and_data(tmp_path):
    session = meshax.profiler.ProfileSession()
    with session:
        (mnp.ones(8) * 2).block_until_ready()
    data = session.profile_data
    planes = list(data.planes)
    assert planes and data.find_plane_with_name(planes[0].name) is planes[0]
    assert data.find_plane_with_name("no such plane") is None
    events = [e for plane in planes for line in plane.lines for e in line.events]
    assert any(e.name == "mul" for e in events)
    assert all(e.end_ns >= e.start_ns and e.duration_ns >= 0 for e in events)
    with pytest.raises(RuntimeError):
        session.stop()
    meshax.profiler.export_profile_data(session, tmp_path, session_id="run1")
    files = list(tmp_path.rglob("*.trace.json.gz"))
    assert len(files) == 1 and files[0].parent.name == "run1"
    again = meshax.profiler.ProfileData.from_file(str(files[0]))
    assert [p.name for p in again.planes] == [p.name for p in planes]


def test_profile_session_with_log_dir_and_errors(tmp_path):
    with meshax.profiler.ProfileSession(tmp_path):
        mnp.ones(2).block_until_ready()
    assert list(tmp_path.rglob("*.trace.json.gz"))
    running = meshax.profiler.ProfileSession().start()
    with pytest.raises(RuntimeError):
        meshax.profiler.export_profile_data(running, tmp_path)
    with pytest.raises(RuntimeError):
        meshax.profiler.ProfileSession().start()
    running.stop()
    with pytest.raises(RuntimeError):
        meshax.profiler.export_profile_data(meshax.profiler.ProfileSession(), tmp_path)
    with pytest.raises(RuntimeError):
        meshax.profiler.register_subprocess(1, 1)


# ---- jax.custom_derivatives --------------------------------------------------------------------------------------


def test_custom_derivatives_names():
    assert meshax.custom_derivatives.remat_opt_p.multiple_results == jax.custom_derivatives.remat_opt_p.multiple_results
    assert meshax.custom_derivatives.remat_opt_p.name == jax.custom_derivatives.remat_opt_p.name


@pytest.mark.parametrize("use_values", [True, False])
def test_custom_vjp_primal_tree_values(use_values):
    def run(L):
        @L.custom_vjp
        def f(x, y):
            return x * y

        def fwd(x, y):
            values = L.custom_derivatives.custom_vjp_primal_tree_values((x, y)) if use_values else (x.value, y.value)
            return values[0] * values[1], values

        def bwd(res, g):
            return g * res[1], g * res[0]

        f.defvjp(fwd, bwd, symbolic_zeros=True)
        return L.grad(f, argnums=(0, 1))(2.0, 3.0)

    assert_matches(run(meshax), run(jax))


def _linear_call_cases(L):
    def f(r, x):
        return x / r

    def t(r, ct):
        return ct / r

    def div_add(x, denom):
        return x + L.custom_derivatives.linear_call(f, t, denom, x)

    def custom_id(x):
        return L.custom_derivatives.linear_call(lambda _, v: v, lambda _, ct: 7.0 * ct, (), x)

    def transpose(fun, example):
        return lambda y: L.linear_transpose(fun, example)(y)[0]

    return [div_add(9.0, 3.0), transpose(lambda x: div_add(x, 3.0), 1.0)(18.0), custom_id(1.0),
            transpose(custom_id, 1.0)(1.0), transpose(transpose(custom_id, 1.0), 1.0)(1.0),
            L.grad(lambda x: div_add(x, 4.0))(2.0), L.jit(lambda x: div_add(x, 3.0))(9.0)]


def test_linear_call():
    ours, theirs = _linear_call_cases(meshax), _linear_call_cases(jax)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))


# ---- jax.experimental.multihost_utils ------------------------------------------------------------------------


@pytest.mark.parametrize("step", [0, 5])
def test_reached_preemption_sync_point(step):
    from jax.experimental import multihost_utils as jmh

    from meshax.experimental import multihost_utils as mh

    assert mh.reached_preemption_sync_point(step) is jmh.reached_preemption_sync_point(step) is False


def test_live_devices_without_distributed_raises_as_jax():
    from jax.experimental import multihost_utils as jmh

    from meshax.experimental import multihost_utils as mh

    with pytest.raises(RuntimeError):
        with jmh.live_devices(jax.devices()):
            pass
    with pytest.raises(RuntimeError):
        with mh.live_devices(meshax.devices()):
            pass
