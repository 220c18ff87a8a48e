"""meshax.export against jax.export: programs exported from jit, serialized, deserialized and called (eagerly,
under jit and grad) give JAX's values, dtypes, weak types and trees; Exported's attributes and errors are JAX's."""
from __future__ import annotations

import collections
import inspect

import jax
import numpy as np
import pytest

import meshax
import meshax.export
from differential import assert_matches

L_NAMES = ["DisabledSafetyCheck", "Exported", "SymbolicScope", "default_export_platform", "deserialize", "export",
           "is_symbolic_dim", "maximum_supported_calling_convention_version",
           "minimum_supported_calling_convention_version", "register_namedtuple_serialization",
           "register_pytree_node_serialization", "symbolic_args_specs", "symbolic_dim_bounds", "symbolic_shape"]


def _jax_can_serialize() -> bool:
    try:
        import flatbuffers  # noqa: F401  (jax.export's serialization needs it)
        return True
    except ImportError:
        return False


def round_trip(L, exported, vjp_order: int = 0):
    """`deserialize(serialize(exported))` (JAX without flatbuffers installed: the Exported itself)."""
    if L is jax and not _jax_can_serialize():
        return exported
    blob = exported.serialize(vjp_order)
    assert isinstance(blob, bytearray)
    return L.export.deserialize(blob)


def exported_call(L, fun, args, **jit_kwargs):
    exported = L.export.export(L.jit(fun, **jit_kwargs))(*args)
    return round_trip(L, exported).call(*args)


# ---- the programs: case(L) -> (function, arguments) ----

W1 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
W2 = np.linspace(0.5, -0.5, 8, dtype=np.float32).reshape(4, 2)


def mlp(L):
    params = {"w1": W1, "b1": np.full(4, 0.1, np.float32), "w2": W2}

    def f(params, x):
        h = L.nn.relu(x @ params["w1"] + params["b1"])
        return L.nn.log_softmax(h @ params["w2"]), L.numpy.tanh(h).mean()

    return f, (params, np.linspace(-2, 2, 15, dtype=np.float32).reshape(5, 3))


def mlp_closed_over(L):
    def f(x):  # the weights are closed-over constants of the program
        return L.numpy.tanh(x @ W1) @ W2

    return f, (np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),)


def scan_rnn(L):
    def f(h0, xs, w):
        def step(h, x):
            h = L.numpy.tanh(h @ w + x)
            return h, h.sum()
        return L.lax.scan(step, h0, xs)

    xs = np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)
    return f, (np.zeros(4, np.float32), xs, np.eye(4, dtype=np.float32) * 0.5)


def scan_reverse_unrolled(L):
    def f(xs):
        return L.lax.scan(lambda c, x: (c * 0.9 + x, c), np.float32(0.0), xs, reverse=True, unroll=2)

    return f, (np.arange(7, dtype=np.float32),)


def cond_program(L):
    def f(p, x):
        return L.lax.cond(p > 0, lambda v: L.numpy.sin(v) * 2, lambda v: L.numpy.cos(v) - 1, x)

    return f, (np.int32(1), np.linspace(0, 3, 5, dtype=np.float32))


def switch_program(L):
    def f(i, x):
        return L.lax.switch(i, [lambda v: v + 1, lambda v: v * 3, lambda v: -v], x)

    return f, (np.int32(2), np.arange(4, dtype=np.int32))


def while_program(L):
    def f(x):
        return L.lax.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] * 1.5), (np.int32(0), x))

    return f, (np.ones(3, np.float32),)


def fori_program(L):
    def f(x):
        return L.lax.fori_loop(0, 5, lambda i, v: v + i * v, x)

    return f, (np.linspace(1, 2, 4, dtype=np.float32),)


def custom_jvp_program(L):
    @L.custom_jvp
    def softplus(x):
        return L.numpy.log1p(L.numpy.exp(x))

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * L.nn.sigmoid(p[0])))
    return (lambda x: softplus(x * 2.0).sum()), (np.linspace(-3, 3, 7, dtype=np.float32),)


def custom_vjp_program(L):
    @L.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (L.numpy.clip(g, -0.1, 0.1),))
    return (lambda x: (L.numpy.sin(clip_gradient(x * 3.0)) ** 2).sum()), (np.linspace(-1, 1, 5, dtype=np.float32),)


def random_program(L):
    def f(key):
        return L.random.normal(key, (3, 2)), L.random.uniform(L.random.fold_in(key, 3), (4,))

    return f, (np.array([0, 42], np.uint32),)


def indexing_program(L):
    def f(x, i):
        y = x.at[i].add(1.0)
        return y[1:, ::2], L.numpy.take(x, i, axis=0), L.numpy.where(x > 0, x, 0).T, L.numpy.cumsum(x, axis=1)

    return f, (np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), np.array([0, 2], np.int32))


def weak_program(L):
    return (lambda x: (x * 2, 3.0, x + 1)), (2.0,)


Point = collections.namedtuple("Point", "x y")
meshax.export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")
jax.export.register_namedtuple_serialization(Point, serialized_name="test_export.Point")


def pytree_program(L):
    def f(tree):
        a, (b, c), d = tree["a"], tree["bc"], tree["d"]
        return [Point(a + b, c.sum()), {"z": d * 2, "none": None}]

    tree = {"a": np.ones(3, np.float32), "bc": (np.arange(3, dtype=np.float32), np.ones((2, 2), np.int32)),
            "d": [np.float32(2.5)]}
    return f, (tree,)


def linalg_program(L):
    def f(a, b):
        return L.numpy.linalg.solve(a, b), L.numpy.linalg.cholesky(a @ a.T + 3 * L.numpy.eye(3))

    a = np.array([[4, 1, 0], [1, 3, 1], [0, 1, 2]], np.float32)
    return f, (a, np.arange(3, dtype=np.float32))


def enum_params_program(L):
    def f(x, m):
        return (L.numpy.fft.rfft(x), L.numpy.dot(m, m, precision=L.lax.Precision.HIGHEST),
                x.at[np.array([0, 9])].get(mode="fill", fill_value=-1),
                L.lax.round(x, L.lax.RoundingMethod.TO_NEAREST_EVEN), L.image.resize(m, (4, 4), "linear"))

    return f, (np.linspace(-2.5, 2.5, 8, dtype=np.float32), np.linspace(0, 1, 9, dtype=np.float32).reshape(3, 3))


def typed_key_program(L):
    return (lambda key: L.random.normal(L.random.split(key)[1], (2, 3))), (L.random.key(7),)


def remat_program(L):
    return L.checkpoint(lambda x: L.numpy.sin(L.numpy.sin(x)) * x), (np.linspace(0, 2, 5, dtype=np.float32),)


def shard_map_program(L):
    P = L.sharding.PartitionSpec
    mesh = L.make_mesh((8,), ("i",), axis_types=(L.sharding.AxisType.Auto,))

    def block(b):
        return L.lax.psum(b * 2, "i"), L.lax.pmax(L.numpy.sin(b).max(), "i")

    x = L.device_put(np.arange(16, dtype=np.float32), L.sharding.NamedSharding(mesh, P("i")))
    return L.shard_map(block, mesh=mesh, in_specs=P("i"), out_specs=(P(), P())), (x,)


PROGRAMS = [mlp, mlp_closed_over, scan_rnn, scan_reverse_unrolled, cond_program, switch_program, while_program,
            fori_program, custom_jvp_program, custom_vjp_program, random_program, indexing_program, weak_program,
            pytree_program, linalg_program, typed_key_program, remat_program, shard_map_program, enum_params_program]




@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_round_trip_call_matches_jax(program) -> None:
    ours = exported_call(meshax, *program(meshax))
    theirs = exported_call(jax, *program(jax))
    # JAX's deserialized Exported has strong types; without flatbuffers JAX's side is not serialized
    assert_matches(ours, theirs, rtol=2e-5, atol=2e-6, check_weak=_jax_can_serialize())


def test_deserialized_types_are_strong() -> None:
    """As JAX's (checked against it in test_exported_attributes_match_jax when flatbuffers is installed): weak
    types are not serialized, so a deserialized Exported takes and returns strongly typed values."""
    fun, args = weak_program(meshax)
    original = meshax.export.export(meshax.jit(fun))(*args)
    assert [a.weak_type for a in original.out_avals] == [True, True, True]
    assert [v.weak_type for v in original.call(*args)] == [True, True, True]
    exported = meshax.export.deserialize(original.serialize())
    assert [a.weak_type for a in exported.in_avals + exported.out_avals] == [False] * 4
    assert [v.weak_type for v in exported.call(*args)] == [False, False, False]


@pytest.mark.parametrize("program", [mlp, scan_rnn, cond_program, indexing_program, linalg_program],
                         ids=lambda p: p.__name__)
def test_call_under_outer_jit_matches_jax(program) -> None:
    def run(L):
        fun, args = program(L)
        exported = round_trip(L, L.export.export(L.jit(fun))(*args))
        return L.jit(lambda *a: exported.call(*a))(*args)

    assert_matches(run(meshax), run(jax), rtol=2e-5, atol=2e-6)


def _first_float_output(L, fun):
    def scalar(*args):
        leaves = [x for x in L.tree_util.tree_leaves(fun(*args)) if L.numpy.issubdtype(x.dtype, L.numpy.floating)]
        return leaves[0].sum()
    return scalar


@pytest.mark.parametrize("program", [mlp, mlp_closed_over, scan_rnn, cond_program, custom_jvp_program,
                                     custom_vjp_program, linalg_program, remat_program], ids=lambda p: p.__name__)
def test_grad_of_call_with_serialized_vjp_matches_jax(program) -> None:
    def run(L):
        fun, args = program(L)
        exported = round_trip(L, L.export.export(L.jit(fun))(*args), vjp_order=1)
        assert exported.has_vjp()
        argnums = 1 if program is cond_program else 0  # its first argument is an integer
        return L.grad(_first_float_output(L, exported.call), argnums=argnums)(*args)

    assert_matches(run(meshax), run(jax), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("L", [meshax, jax], ids=["meshax", "jax"])
def test_grad_without_vjp_raises(L) -> None:
    if L is jax and not _jax_can_serialize():
        pytest.skip("jax.export's serialization needs flatbuffers")
    fun, args = mlp_closed_over(L)
    exported = L.export.deserialize(L.export.export(L.jit(fun))(*args).serialize())
    assert not exported.has_vjp()
    with pytest.raises(ValueError, match="No VJP is available"):
        L.grad(lambda x: exported.call(x).sum())(*args)


@pytest.mark.parametrize("L", [meshax, jax], ids=["meshax", "jax"])
def test_vmap_of_call_raises_not_implemented(L) -> None:
    fun, args = mlp_closed_over(L)
    exported = L.export.export(L.jit(fun))(*args)
    with pytest.raises(NotImplementedError):
        L.vmap(exported.call)(np.stack([args[0], args[0]]))


DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint8, np.bool_, np.complex64, "bfloat16"]
SHAPES = [(), (3,), (2, 3), (2, 1, 4)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_dtypes_and_shapes_round_trip(dtype, shape) -> None:
    import ml_dtypes

    dtype = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    x = (np.arange(int(np.prod(shape))) % 5 - 2).reshape(shape).astype(dtype)

    def run(L):
        def f(x):
            return x, L.numpy.sum(x, axis=-1) if x.ndim else x, (x == x[()] if not x.ndim else x[..., :1] == x[..., :1])
        return exported_call(L, f, (x,))

    assert_matches(run(meshax), run(jax))


@pytest.mark.parametrize("program", [mlp, pytree_program, weak_program, random_program], ids=lambda p: p.__name__)
def test_exported_attributes_match_jax(program) -> None:
    def attributes(L):
        fun, args = program(L)
        original = L.export.export(L.jit(fun))(*args)
        exported = round_trip(L, original)
        return [(e.fun_name, str(e.in_tree), str(e.out_tree),
                 [(a.shape, a.dtype, a.weak_type) for a in e.in_avals],
                 [(a.shape, a.dtype, a.weak_type) for a in e.out_avals], e.nr_devices, e.platforms,
                 e.calling_convention_version, e.module_kept_var_idx, e.in_shardings_hlo, e.out_shardings_hlo,
                 e.in_shardings_jax(), e.ordered_effects, e.unordered_effects, tuple(e.disabled_safety_checks),
                 e.uses_global_constants) for e in (original, exported)]

    if not _jax_can_serialize():
        assert attributes(meshax)[0] == attributes(jax)[0]
    else:
        assert attributes(meshax) == attributes(jax)


def test_public_names_and_signatures_match_jax() -> None:
    public = sorted(n for n in dir(jax.export) if not n.startswith("_"))
    assert public == L_NAMES
    assert sorted(n for n in dir(meshax.export) if not n.startswith("_") and n in L_NAMES) == L_NAMES
    for name in L_NAMES:
        ours, theirs = getattr(meshax.export, name), getattr(jax.export, name)
        if isinstance(theirs, int):
            assert ours == theirs, name
        elif inspect.isfunction(theirs):
            assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
    for method in ("call", "serialize", "mlir_module", "in_shardings_jax", "out_shardings_jax", "has_vjp", "vjp"):
        ours, theirs = getattr(meshax.export.Exported, method), getattr(jax.export.Exported, method)
        assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), method
    assert meshax.export.default_export_platform() == jax.export.default_export_platform() == "cpu"


def test_mlir_module_is_the_program_text() -> None:
    fun, args = mlp(meshax)
    exported = meshax.export.export(meshax.jit(fun))(*args)
    text = exported.mlir_module()
    assert "dot_general" in text and "custom_jvp_call" in text  # relu's rule
    text = meshax.export.deserialize(exported.serialize()).mlir_module()
    assert "dot_general" in text and "custom_jvp_call" not in text  # serialized: the primal program only


def _errors(L, call):
    try:
        call(L)
    except Exception as error:  # noqa: BLE001 - the class is what the test compares
        return type(error)
    return None


@pytest.mark.parametrize("bad_call", ["dtype", "rank", "shape", "structure", "kwargs"])
def test_call_with_wrong_arguments_raises_as_jax(bad_call) -> None:
    x = np.ones((2, 3), np.float32)
    wrong = {"dtype": ((x.astype(np.int32), 2.0), {}), "rank": ((x[0], 2.0), {}), "shape": ((x[:1], 2.0), {}),
             "structure": ((x,), {}), "kwargs": ((x, 2.0), {"extra": x})}[bad_call]

    def run(L):
        exported = L.export.export(L.jit(lambda a, b: a * b))(x, 2.0)
        exported.call(*wrong[0], **wrong[1])

    ours, theirs = _errors(meshax, run), _errors(jax, run)
    assert theirs is not None and ours is theirs, (ours, theirs)


@pytest.mark.parametrize("case", ["not_jitted", "platform", "platform_disabled"])
def test_export_errors_as_jax(case) -> None:
    x = np.ones(3, np.float32)

    def run(L):
        if case == "not_jitted":
            L.export.export(lambda a: a)(x)
        elif case == "platform":
            L.export.export(L.jit(lambda a: a + 1), platforms=["tpu"])(x).call(x)
        else:
            checks = [L.export.DisabledSafetyCheck.platform()]
            exported = L.export.export(L.jit(lambda a: a + 1), platforms=["tpu"], disabled_checks=checks)(x)
            assert exported.platforms == ("tpu",)
            np.testing.assert_array_equal(np.asarray(exported.call(x)), x + 1)

    assert _errors(meshax, run) is _errors(jax, run)


@pytest.mark.parametrize("case", ["host_callback", "unregistered_result_namedtuple"])
def test_unserializable_programs_raise_as_jax(case) -> None:
    x = np.eye(3, dtype=np.float32)

    def run(L):
        if case == "host_callback":
            fun = lambda v: L.pure_callback(lambda a: np.asarray(a) * 2, L.ShapeDtypeStruct((3, 3), np.float32), v)
        else:
            fun = lambda v: L.numpy.linalg.eigh(v)  # EighResult: a namedtuple not registered for serialization
        L.export.export(L.jit(fun))(x).serialize()

    expected = {"host_callback": NotImplementedError, "unregistered_result_namedtuple": ValueError}[case]
    assert _errors(meshax, run) is expected
    if _jax_can_serialize():
        assert _errors(jax, run) is expected


def test_exported_vjp_matches_jax() -> None:
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

    def run(L):
        vjp = L.export.export(L.jit(lambda a, b: (L.numpy.sin(a) * b, a.sum())))(x, x).vjp()
        types = [(a.shape, a.dtype) for a in vjp.in_avals + vjp.out_avals]
        values = vjp.call(x, x, np.ones_like(x), np.float32(1))
        return (vjp.fun_name, str(vjp.in_tree), str(vjp.out_tree), types), values

    (ours, our_values), (theirs, their_values) = run(meshax), run(jax)
    assert ours == theirs
    assert_matches(our_values, their_values)


@pytest.mark.parametrize("n", [1, 3])
def test_static_arguments_are_not_exported_inputs(n) -> None:
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)

    def run(L):
        f = lambda a, n, *, scale: (a ** n * scale).sum(0)
        exported = round_trip(L, L.export.export(L.jit(f, static_argnums=1, static_argnames="scale"))(x, n, scale=2.0))
        return str(exported.in_tree), exported.call(x)

    ours, theirs = run(meshax), run(jax)
    assert ours[0] == theirs[0]
    assert_matches(ours[1], theirs[1], check_weak=False)
