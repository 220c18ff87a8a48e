"""Issue 39, assorted JAX-compatibility points, each compared with real JAX: a type's sharding outside any mesh,
lax.reduce_window's optional arguments, random.wrap_key_data(dtype=), jax.scipy.linalg's eigh/qr/svd/det/inv
signatures, Array.device as a property, committed Arrays on different devices, Array.delete, and debug callbacks
re-run by the backward pass of jax.checkpoint."""
from __future__ import annotations

import numpy as np
import pytest

import meshax
import meshax.ad_checkpoint  # noqa: F401
import meshax.numpy as mnp
from meshax import lax as mlax
from meshax.sharding import PartitionSpec as P

jax = pytest.importorskip("jax")
import jax.ad_checkpoint  # noqa: E402,F401
import jax.numpy as jjnp  # noqa: E402
from jax import lax as jlax  # noqa: E402
from jax.sharding import PartitionSpec as JP  # noqa: E402

LIBS = {"meshax": (meshax, mnp), "jax": (jax, jjnp)}


def _spec_entries(spec) -> tuple:
    return tuple(spec)


# ---- 1. jax.typeof(x).sharding outside a mesh ------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 4)])
def test_type_sharding_outside_mesh_has_one_entry_per_dimension(shape):
    ours = meshax.typeof(mnp.ones(shape)).sharding
    theirs = jax.typeof(jjnp.ones(shape)).sharding
    assert _spec_entries(ours.spec) == _spec_entries(theirs.spec) == (None,) * len(shape)
    assert repr(ours.mesh) == repr(theirs.mesh) == "AbstractMesh((), axis_types=())"
    assert ours.mesh.empty and theirs.mesh.empty
    assert ours.memory_kind is theirs.memory_kind is None
    assert ours.replicated_axes == theirs.replicated_axes == frozenset()
    assert ours.is_fully_replicated and theirs.is_fully_replicated
    assert ours.shard_shape(shape) == theirs.shard_shape(shape) == shape


def test_type_sharding_under_jit_and_vmap():
    seen = {}

    def record(lib_name, lib):
        def f(x):
            seen[lib_name] = lib.typeof(x).sharding
            return x
        return f

    for name, (lib, np_mod) in LIBS.items():
        lib.jit(record(name, lib))(np_mod.ones((2, 3)))
        assert _spec_entries(seen[name].spec) == (None, None), name
        lib.vmap(record(name + "-vmap", lib))(np_mod.ones((4, 2, 3)))
        assert _spec_entries(seen[name + "-vmap"].spec) == (None, None), name


def test_type_sharding_update():
    ours = meshax.typeof(mnp.ones((2, 3))).sharding
    theirs = jax.typeof(jjnp.ones((2, 3))).sharding
    for spec in [(None,), (None, None, None), ()]:
        assert _spec_entries(ours.update(spec=P(*spec)).spec) == _spec_entries(theirs.update(spec=JP(*spec)).spec)
    assert ours.update(spec=P(None)).mesh == ours.mesh
    assert ours.update().spec == ours.spec
    with pytest.raises(ValueError, match="Resource axis: a of"):
        theirs.update(spec=JP("a"))
    with pytest.raises(ValueError, match="Resource axis: a of"):
        ours.update(spec=P("a"))


def test_type_sharding_update_onto_a_mesh():
    mesh = meshax.make_mesh((2, 4), ("a", "b"))
    moved = meshax.typeof(mnp.ones((8, 4))).sharding.update(mesh=mesh, spec=P("a"))
    assert isinstance(moved, meshax.sharding.NamedSharding)
    assert moved.mesh == mesh and moved.spec == P("a")
    placed = meshax.device_put(np.ones((8, 4), np.float32), moved)
    np.testing.assert_array_equal(np.asarray(placed), np.ones((8, 4)))


def test_type_sharding_under_a_mesh_in_use():
    seen = []
    for lib, np_mod in LIBS.values():
        mesh = lib.make_mesh((2, 4), ("a", "b"), axis_types=(lib.sharding.AxisType.Auto,) * 2)
        x = lib.device_put(np_mod.ones((8, 4)), lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec()))
        with lib.set_mesh(mesh):
            lib.jit(lambda v, lib=lib: seen.append(lib.typeof(v).sharding) or v)(x)
    for sharding in seen:
        assert _spec_entries(sharding.spec) == (None, None)
        assert sharding.mesh.axis_names == ("a", "b")
    assert repr(seen[0].mesh) == repr(seen[1].mesh)


# ---- 2. lax.reduce_window's optional arguments -------------------------------------------------------------------


REDUCE_WINDOW_CASES = [
    dict(),
    dict(window_strides=(1, 2)),
    dict(padding="SAME", window_strides=(1, 1)),
    dict(padding=((1, 0), (0, 1))),
    dict(base_dilation=(2, 1)),
    dict(window_dilation=(1, 2)),
    dict(window_strides=(2, 1), padding="VALID", base_dilation=(1, 2), window_dilation=(2, 1)),
]


@pytest.mark.parametrize("kwargs", REDUCE_WINDOW_CASES, ids=lambda k: ",".join(sorted(k)) or "defaults")
@pytest.mark.parametrize("jitted", [False, True])
def test_reduce_window_defaults(kwargs, jitted):
    x = np.arange(30.0, dtype=np.float32).reshape(5, 6)

    def ours(v):
        return mlax.reduce_window(v, 0.0, mlax.add, (2, 2), **kwargs)

    def theirs(v):
        return jlax.reduce_window(v, 0.0, jlax.add, (2, 2), **kwargs)

    if jitted:
        ours, theirs = meshax.jit(ours), jax.jit(theirs)
    got, want = ours(mnp.asarray(x)), theirs(jjnp.asarray(x))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))


def test_reduce_window_max_without_strides_under_grad_and_vmap():
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)

    def loss(lib, lax_mod, v):
        return lib.numpy.sum(lax_mod.reduce_window(v, -np.inf, lax_mod.max, (2, 2)) ** 2)

    np.testing.assert_allclose(
        np.asarray(meshax.vmap(meshax.grad(lambda v: loss(meshax, mlax, v)))(mnp.asarray(x))),
        np.asarray(jax.vmap(jax.grad(lambda v: loss(jax, jlax, v)))(jjnp.asarray(x))))


# ---- 3. random.wrap_key_data(dtype=) ----------------------------------------------------------------------------


@pytest.mark.parametrize("jitted", [False, True])
def test_wrap_key_data_with_dtype(jitted):
    results = []
    for lib, _ in LIBS.values():
        key = lib.random.key(42)
        data = lib.random.key_data(key)
        wrap = lambda d, lib=lib, dtype=key.dtype: lib.random.wrap_key_data(d, dtype=dtype)  # noqa: E731
        wrapped = lib.jit(wrap)(data) if jitted else wrap(data)
        assert str(wrapped.dtype) == "key<fry>"
        results.append(np.asarray(lib.random.uniform(wrapped, (5,))))
    np.testing.assert_array_equal(*results)


def test_wrap_key_data_dtype_none_and_errors():
    for lib, _ in LIBS.values():
        key = lib.random.key(1)
        data = lib.random.key_data(key)
        assert str(lib.random.wrap_key_data(data, dtype=None).dtype) == "key<fry>"
        with pytest.raises(ValueError, match="Cannot specify both `impl` and `dtype`"):
            lib.random.wrap_key_data(data, impl="threefry2x32", dtype=key.dtype)
        with pytest.raises(TypeError, match="for specifying PRNG implementation"):
            lib.random.wrap_key_data(data, dtype=np.float32)


# ---- 4. jax.scipy.linalg's signatures ----------------------------------------------------------------------------


SYM = np.array([[2.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 1.0]], np.float32)
NONSYM = np.array([[2.0, 5.0, 0.5], [1.0, 3.0, 4.0], [0.0, 0.2, 1.0]], np.float32)


def _both_scipy(fn, *arrays, jitted=False):
    outs = []
    for lib, np_mod in LIBS.values():
        call = (lambda *xs, lib=lib: fn(lib.scipy.linalg, *xs))
        call = lib.jit(call) if jitted else call
        outs.append(call(*[np_mod.asarray(a) for a in arrays]))
    return outs


def _assert_tree_close(ours, theirs, atol=1e-5):
    assert isinstance(ours, tuple) == isinstance(theirs, tuple), (type(ours), type(theirs))
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_tree_close(a, b, atol)
        return
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.abs(np.asarray(ours)), np.abs(np.asarray(theirs)), atol=atol)


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("kwargs", [dict(), dict(eigvals_only=True), dict(lower=False), dict(b=None),
                                    dict(lower=False, eigvals_only=True),
                                    dict(turbo=False, overwrite_a=True, overwrite_b=True, check_finite=False)])
@pytest.mark.parametrize("matrix", [SYM, NONSYM], ids=["symmetric", "not-symmetric"])
def test_scipy_eigh(kwargs, jitted, matrix):
    ours, theirs = _both_scipy(lambda sl, a: sl.eigh(a, **kwargs), matrix, jitted=jitted)
    _assert_tree_close(ours, theirs)


@pytest.mark.parametrize("kwargs, message", [(dict(eigvals=(0, 1)), "eigvals=None")])  # JAX 0.12 solves b= and type=
def test_scipy_eigh_unsupported(kwargs, message):
    for lib, np_mod in LIBS.values():
        extra = {k: np_mod.asarray(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        with pytest.raises(NotImplementedError, match=message):
            lib.scipy.linalg.eigh(np_mod.asarray(SYM), **extra)


def test_scipy_eigh_under_grad():
    grads = [lib.grad(lambda a, lib=lib: lib.scipy.linalg.eigh(a, eigvals_only=True).sum())(np_mod.asarray(SYM))
             for lib, np_mod in LIBS.values()]
    np.testing.assert_allclose(np.asarray(grads[0]), np.asarray(grads[1]), atol=1e-5)


@pytest.mark.parametrize("mode", ["full", "economic", "r"])
def test_scipy_qr_modes(mode):
    tall = np.arange(12.0, dtype=np.float32).reshape(4, 3) + np.eye(4, 3, dtype=np.float32)
    ours, theirs = _both_scipy(lambda sl, a: sl.qr(a, mode=mode, overwrite_a=True, check_finite=False), tall)
    _assert_tree_close(ours, theirs, atol=1e-4)


def test_scipy_qr_bad_mode():
    for lib, np_mod in LIBS.values():
        with pytest.raises(ValueError, match="Unsupported QR decomposition mode 'raw'"):
            lib.scipy.linalg.qr(np_mod.asarray(SYM), mode="raw")


@pytest.mark.parametrize("kwargs", [dict(), dict(full_matrices=False), dict(compute_uv=False),
                                    dict(lapack_driver="gesvd", overwrite_a=True, check_finite=False)])
def test_scipy_svd(kwargs):
    tall = np.arange(12.0, dtype=np.float32).reshape(4, 3) + np.eye(4, 3, dtype=np.float32)
    ours, theirs = _both_scipy(lambda sl, a: sl.svd(a, **kwargs), tall)
    _assert_tree_close(ours, theirs, atol=1e-4)


def test_scipy_det_inv_flags():
    for name in ("det", "inv"):
        ours, theirs = _both_scipy(lambda sl, a: getattr(sl, name)(a, overwrite_a=True, check_finite=False), SYM)
        _assert_tree_close(ours, theirs)


# ---- 5. Array.device is a property (and callable, as the seeds use it) ----------------------------------------------------------------


def test_array_device_is_a_property_that_the_seeds_also_call():
    """A README difference: the seeds call `a.device()`, which JAX 0.10 refuses (a Device is not callable)."""
    ours, theirs = mnp.ones(3), jjnp.ones(3)
    assert ours.device == meshax.devices()[0] and theirs.device == jax.devices()[0]
    with pytest.raises(TypeError, match="not callable"):
        theirs.device()
    assert ours.device() is ours.device


# ---- 6. committed Arrays on different devices ------------------------------------------------------------------


def _committed_pair(lib):
    devices = lib.devices()
    return (lib.device_put(np.ones(4, np.float32), devices[0]), lib.device_put(np.ones(4, np.float32), devices[1]))


def test_check_committed_devices_message_matches_jax():
    from meshax._src.arrays.placement import check_committed_devices

    a, b = _committed_pair(meshax)
    ja, jb = _committed_pair(jax)
    with pytest.raises(ValueError) as theirs:
        jnp_sub = jjnp.subtract
        jnp_sub(ja, jb)
    with pytest.raises(ValueError) as ours:
        check_committed_devices([a, b], "subtract", ["x", "y"])
    assert str(ours.value) == str(theirs.value)
    check_committed_devices([a, mnp.ones(4), 3.0, a], "add")  # uncommitted and host values go anywhere
    mesh = meshax.make_mesh((8,), ("i",))
    spread = meshax.device_put(np.ones(8, np.float32), meshax.sharding.NamedSharding(mesh, P("i")))
    with pytest.raises(ValueError, match=r"device ids \[0\] on platform CPU and argument args\[1\] of add with "
                                         r"shape float32\[8\] and with device ids \[0, 1, 2, 3, 4, 5, 6, 7\]"):
        check_committed_devices([meshax.device_put(np.ones(8, np.float32), meshax.devices()[0]), spread], "add")


@pytest.mark.parametrize("op", ["add", "multiply", "stack", "jit"])
def test_committed_arrays_on_different_devices_refused(op):
    for lib, np_mod in LIBS.values():
        a, b = _committed_pair(lib)
        run = {"add": lambda: a + b, "multiply": lambda: np_mod.multiply(a, b),
               "stack": lambda: np_mod.stack([a, b]), "jit": lambda: lib.jit(lambda p, q: p + q)(a, b)}[op]
        with pytest.raises(ValueError, match="Received incompatible devices for jitted computation"):
            run()


def test_uncommitted_arrays_move_freely():
    for lib, np_mod in LIBS.values():
        a, b = _committed_pair(lib)
        free = np_mod.full(4, 2.0, dtype=np.float32)
        assert (a + free).sharding.device_set == {lib.devices()[0]}
        assert (free + b).sharding.device_set == {lib.devices()[1]}
        assert lib.jit(lambda p, q: p * q)(free, b).sharding.device_set == {lib.devices()[1]}
        closed = lib.jit(lambda p: p + b)(a)  # a closed-over value is a constant: it moves
        np.testing.assert_array_equal(np.asarray(closed), np.full(4, 2.0))


# ---- 7. Array.delete ------------------------------------------------------------------------------------------


def _deleted(lib, np_mod, value):
    x = np_mod.asarray(value)
    x.delete()
    return x


READS = {
    "asarray": lambda lib, np_mod, x: np.asarray(x),
    "repr": lambda lib, np_mod, x: repr(x),
    "str": lambda lib, np_mod, x: str(x),
    "format": lambda lib, np_mod, x: f"{x}",
    "add": lambda lib, np_mod, x: x + 1,
    "jit": lambda lib, np_mod, x: lib.jit(lambda a: a * 2)(x),
    "index": lambda lib, np_mod, x: x[0],
    "tolist": lambda lib, np_mod, x: x.tolist(),
    "item": lambda lib, np_mod, x: x.item(0),
    "shards": lambda lib, np_mod, x: x.addressable_shards,
    "global_shards": lambda lib, np_mod, x: x.global_shards,
    "addressable_data": lambda lib, np_mod, x: x.addressable_data(0),
    "device_put": lambda lib, np_mod, x: lib.device_put(x, lib.devices()[1]),
    "device_get": lambda lib, np_mod, x: lib.device_get(x),
    "copy": lambda lib, np_mod, x: np.asarray(np_mod.copy(x)),
    "devices": lambda lib, np_mod, x: x.devices(),
    "device": lambda lib, np_mod, x: x.device,
    "copy_to_host_async": lambda lib, np_mod, x: x.copy_to_host_async(),
    "grad": lambda lib, np_mod, x: lib.grad(lambda a: a.sum())(x),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_reading_a_deleted_array_raises(read):
    messages = []
    for lib, np_mod in LIBS.values():
        x = _deleted(lib, np_mod, np.arange(3.0, dtype=np.float32))
        with pytest.raises(RuntimeError) as caught:
            READS[read](lib, np_mod, x)
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == "Array has been deleted with shape=float32[3]."


def test_block_until_ready_on_a_deleted_array():
    for lib, np_mod in LIBS.values():
        x = _deleted(lib, np_mod, np.arange(3.0, dtype=np.float32))
        with pytest.raises(RuntimeError, match=r"BlockHostUntilReady\(\) called on deleted or donated buffer"):
            x.block_until_ready()


@pytest.mark.parametrize("value", [np.float32(1.0), 1.0, np.ones((2, 3), np.int32), np.ones(4, jjnp.bfloat16)],
                         ids=["f32-scalar", "weak-scalar", "int32-matrix", "bf16"])
def test_deleted_message_names_the_type(value):
    messages = []
    for lib, np_mod in LIBS.values():
        x = _deleted(lib, np_mod, value)
        with pytest.raises(RuntimeError) as caught:
            np.asarray(x)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_deleted_sharded_array():
    messages = []
    for lib, np_mod in LIBS.values():
        mesh = lib.make_mesh((8,), ("i",), axis_types=(lib.sharding.AxisType.Auto,))
        x = lib.device_put(np.ones((8, 2), np.int32), lib.sharding.NamedSharding(mesh, lib.sharding.PartitionSpec("i")))
        x.delete()
        for read in (lambda: np.asarray(x), lambda: x + 1, lambda: repr(x)):
            with pytest.raises(RuntimeError) as caught:
                read()
            messages.append(str(caught.value))
    assert set(messages) == {"Array has been deleted with shape=int32[8,2]."}


def test_metadata_of_a_deleted_array_still_reads():
    for lib, np_mod in LIBS.values():
        x = _deleted(lib, np_mod, np.arange(3.0, dtype=np.float32))
        assert x.shape == (3,) and x.dtype == np.float32 and x.ndim == 1 and x.size == 3 and x.nbytes == 12
        assert len(x) == 3
        assert str(lib.typeof(x)) == "float32[3]"
        assert x.sharding.device_set == {lib.devices()[0]}
        x.delete()  # deleting twice is allowed


def test_deleting_leaves_other_arrays_alone():
    x = mnp.arange(3.0)
    y = x + 1
    z = mnp.asarray(x)  # the same Array, as in JAX
    x.delete()
    np.testing.assert_array_equal(np.asarray(y), [1.0, 2.0, 3.0])
    assert z is x
    assert all(a is not x for a in meshax.live_arrays())


def test_is_deleted():
    for lib, np_mod in LIBS.values():
        x = np_mod.arange(3.0)
        shard = x.addressable_shards[0].data
        assert not x.is_deleted()
        x.delete()
        assert x.is_deleted() and shard.is_deleted()


def test_shard_data_deleted_with_its_array():
    for lib, np_mod in LIBS.values():
        x = np_mod.arange(3.0)
        shard = x.addressable_shards[0].data
        x.delete()
        with pytest.raises(RuntimeError, match="Array has been deleted"):
            np.asarray(shard)


# ---- 8. debug callbacks re-run by jax.checkpoint's backward pass ------------------------------------------------


def printed(capsys, run) -> list[str]:
    capsys.readouterr()
    run()
    jax.effects_barrier()
    return capsys.readouterr().out.splitlines()


def _policy(lib, name):
    if name is None:
        return None
    if name == "save_anything_except_these_names":
        return lib.checkpoint_policies.save_anything_except_these_names("y")
    return getattr(lib.checkpoint_policies, name)


def _programs(lib, np_mod, policy_name):
    policy = _policy(lib, policy_name)

    def direct(x):
        lib.debug.print("x={x}", x=x)
        return np_mod.sin(x) * 2

    def intermediate(x):
        y = np_mod.sin(x)
        lib.debug.print("y={y}", y=y)
        return y * x

    def callback(x):
        lib.debug.callback(lambda v: print("cb", v), x)
        return np_mod.sin(x) * 2

    def named(x):
        y = lib.ad_checkpoint.checkpoint_name(np_mod.sin(x), "y")
        lib.debug.print("named y={y}", y=y)
        return np_mod.cos(y) * x

    def nested(x):
        lib.debug.print("outer {x}", x=x)
        return lib.checkpoint(direct)(x) + 1

    def constant(x):
        lib.debug.print("constant")
        return x * 2

    kwargs = {} if policy is None else {"policy": policy}
    return {name: lib.checkpoint(f, **kwargs) for name, f in
            [("direct", direct), ("intermediate", intermediate), ("callback", callback), ("named", named),
             ("nested", nested), ("constant", constant)]}


TRANSFORMS = {
    "grad": lambda lib, f: lib.grad(f)(1.0),
    "jit-grad": lambda lib, f: lib.jit(lib.grad(f))(1.0),
    "value_and_grad": lambda lib, f: lib.value_and_grad(f)(1.0),
    "vjp": lambda lib, f: lib.vjp(f, 1.0)[1](1.0),
    "jvp": lambda lib, f: lib.jvp(f, (1.0,), (1.0,)),
    "forward": lambda lib, f: f(1.0),
    "vmap-grad": lambda lib, f: lib.vmap(lib.grad(f))(lib.numpy.ones(2)),
}


@pytest.mark.parametrize("policy", [None, "nothing_saveable", "everything_saveable", "dots_saveable",
                                    "save_anything_except_these_names"])
@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_debug_print_in_checkpoint(capsys, policy, transform):
    for name in ("direct", "intermediate", "callback", "named", "nested", "constant"):
        outputs = []
        for lib, np_mod in LIBS.values():
            program = _programs(lib, np_mod, policy)[name]
            outputs.append(printed(capsys, lambda: TRANSFORMS[transform](lib, program)))
        if transform.startswith("jit"):  # unordered callbacks of a compiled program: JAX promises no order
            outputs = [sorted(lines) for lines in outputs]
        assert outputs[0] == outputs[1], (name, outputs)


def test_save_anything_except_these_names_saves_everything_as_jax():
    from jax._src.ad_checkpoint import name_p as jax_name_p

    from meshax._src.transforms.remat import name_p

    for lib, primitive in ((meshax, name_p), (jax, jax_name_p)):
        policy = lib.checkpoint_policies.save_anything_except_these_names("y")
        assert policy(primitive, lib.ShapeDtypeStruct((3,), np.float32), name="y") is True


def test_remat_alias_prints_twice_under_grad(capsys):
    counts = []
    for lib, np_mod in LIBS.values():
        def f(x, lib=lib, np_mod=np_mod):
            lib.debug.print("x={x}", x=x)
            return np_mod.sin(x)
        counts.append(printed(capsys, lambda: lib.grad(lib.remat(f))(1.0)))
    assert counts[0] == counts[1] == ["x=1.0", "x=1.0"]


@pytest.mark.parametrize("by", ["argnums", "argnames", "keyword"])
def test_donated_arguments_are_deleted_after_the_call(by):
    """jit(donate_argnums=/donate_argnames=): reading a donated Array afterwards raises JAX's RuntimeError; an
    argument not donated, and a donated one the call returns unchanged, stay readable."""
    for lib, np_mod in LIBS.values():
        donate = {"argnums": {"donate_argnums": 0}, "argnames": {"donate_argnames": "x"},
                  "keyword": {"donate_argnums": 0}}[by]
        step = lib.jit(lambda x, y: (x + y, y), **donate)
        x, y = np_mod.ones(3), np_mod.arange(3.0)
        out, same = step(x=x, y=y) if by == "keyword" else step(x, y)
        np.testing.assert_array_equal(np.asarray(out), [1.0, 2.0, 3.0])
        with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[3\]"):
            np.asarray(x)
        assert x.is_deleted() and not y.is_deleted()
        np.testing.assert_array_equal(np.asarray(same), [0.0, 1.0, 2.0])


def test_reshard_and_host_local_arrays_take_specs_as_a_tree_prefix():
    """A tree of specs that is a prefix of the values' tree covers each subtree (never zipped by leaf position);
    one that is no prefix raises ValueError, as in JAX."""
    seen = []
    for lib, np_mod in LIBS.values():
        sharding = lib.sharding
        mesh = lib.make_mesh((8,), ("i",), axis_types=(sharding.AxisType.Explicit,))
        tree = {"a": (np_mod.zeros((8, 2)), np_mod.zeros(8)), "b": np_mod.zeros(8)}
        with lib.set_mesh(mesh):
            out = sharding.reshard(tree, {"a": sharding.PartitionSpec("i"), "b": sharding.PartitionSpec()})
            with pytest.raises(ValueError):
                sharding.reshard(tree, {"a": sharding.PartitionSpec("i"), "c": sharding.PartitionSpec()})
        auto = lib.make_mesh((8,), ("i",), axis_types=(sharding.AxisType.Auto,))
        local = {"a": (np.zeros((8, 2)), np.zeros(8)), "b": np.zeros(8)}
        from importlib import import_module
        utils = import_module(f"{lib.__name__}.experimental.multihost_utils")
        placed = utils.host_local_array_to_global_array(local, auto, {"a": sharding.PartitionSpec("i"),
                                                                      "b": sharding.PartitionSpec()})
        seen.append([tuple(x.sharding.spec) for x in lib.tree.leaves(out)]
                    + [(x.shape, tuple(x.sharding.spec)) for x in lib.tree.leaves(placed)])
    assert seen[0] == seen[1]


def test_copies_outlive_a_donated_original_and_ndmin_applies_to_arrays():
    """jnp.array(x) and jnp.copy(x) are new Arrays (donating x leaves them readable); asarray(x) is x; ndmin
    pads the rank of Arrays and traced values too."""
    for lib, np_mod in LIBS.values():
        x = np_mod.ones(3)
        copies = [np_mod.copy(x), np_mod.array(x), np_mod.array(x, copy=True)]
        assert np_mod.asarray(x) is x and all(c is not x for c in copies)
        assert np_mod.array(x, ndmin=3).shape == (1, 1, 3)
        assert lib.jit(lambda a: np_mod.array(a, ndmin=2))(x).shape == (1, 3)
        lib.jit(lambda a: a + 1, donate_argnums=0)(x)
        for c in copies:
            np.testing.assert_array_equal(np.asarray(c), [1.0, 1.0, 1.0])
