"""meshax.jit: tracing once per signature, static arguments, pytrees, shardings, closures, nesting,
errors on Python control flow over traced values, and lowering to text; checked against real JAX
where the two can be compared."""
from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.sharding import AxisType as JaxAxisType, Mesh as JaxMesh, NamedSharding as JaxNS  # noqa: E402
from jax.sharding import PartitionSpec as JaxP  # noqa: E402


@pytest.fixture(scope="module")
def mesh():
    return meshax.make_mesh((4, 2), ("a", "b"))


@pytest.fixture(scope="module")
def jmesh():
    return JaxMesh(np.array(jax.devices()).reshape(4, 2), ("a", "b"), axis_types=(JaxAxisType.Auto,) * 2)


VALUE = np.arange(32, dtype=np.float32).reshape(8, 4) / 7 - 2


@pytest.fixture()
def x(mesh):
    return meshax.device_put(VALUE, NamedSharding(mesh, P("a", "b")))


@pytest.fixture()
def jx(jmesh):
    return jax.device_put(VALUE, JaxNS(jmesh, JaxP("a", "b")))


class Counter:
    """Counts how many times a function body runs: once per trace under jit."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            self.calls += 1
            return fn(*args, **kwargs)

        return wrapped


# ---- tracing once per signature --------------------------------------------------------------------------------


def test_traces_once_per_signature(x, mesh):
    count = Counter()
    f = meshax.jit(count(lambda a, b: jnp.sin(a) * b + 1))
    first = f(x, 2.0)
    f(x, 3.0)  # a new value of a weakly typed scalar: same signature
    f(meshax.device_put(VALUE + 1, NamedSharding(mesh, P("a", "b"))), 5.0)  # another array, same layout
    assert count.calls == 1
    np.testing.assert_allclose(np.asarray(first), np.sin(VALUE) * 2 + 1, rtol=1e-6)
    f(x, np.float32(2))  # a strongly typed scalar: new signature
    assert count.calls == 2
    f(x.astype(jnp.int32), 2.0)  # new dtype
    assert count.calls == 3
    f(x[:4], 2.0)  # new shape
    assert count.calls == 4
    f(meshax.device_put(VALUE, NamedSharding(mesh, P("b"))), 2.0)  # new layout
    assert count.calls == 5
    f(x, 2.0)
    f(x, b=7.0)  # keyword: a new tree structure
    f(x, b=8.0)
    assert count.calls == 6


def test_results_match_eager_and_jax(x, jx):
    def fn(lib, a):
        return lib.sum(lib.tanh(a) @ a.T, axis=0) + lib.mean(a, axis=1)

    jitted = meshax.jit(lambda a: fn(jnp, a))(x)
    eager = fn(jnp, x)
    reference = jax.jit(lambda a: fn(jjnp, a))(jx)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(reference), rtol=1e-5, atol=1e-5)
    assert jitted.dtype == reference.dtype and jitted.weak_type == reference.weak_type
    assert jitted.sharding == eager.sharding


EAGER_VS_JIT = {
    "reductions": lambda a: (jnp.sum(a, 0), jnp.mean(a, 1), jnp.var(a), jnp.argmax(a, 0), jnp.cumsum(a, 1)),
    "contractions": lambda a: (a @ a.T, jnp.einsum("ij,kj->ik", a, a), jnp.tensordot(a, a, ((0,), (0,)))),
    "shapes": lambda a: (a.reshape(4, 8), a.T, jnp.concatenate([a, a], 1), jnp.pad(a, 1), jnp.roll(a, 2, 0)),
    "indexing": lambda a: (a[1:5, ::-1], a[np.array([0, 7, 7])], a.at[2].set(0.0), a.at[np.array([1, 1])].add(1.0),
                           jnp.take(a, np.array([0, 9]), axis=1)),
    "where": lambda a: (jnp.where(a > 0, a, 0.0), jnp.clip(a, -1, 1), jnp.select([a < 0], [a * 2], 1.0)),
    "promotion": lambda a: (a.astype(jnp.int32) + 1.5, a > 0, (a > 0) + 1, a * 2, jnp.sin(a.astype(jnp.int8))),
    "order statistics": lambda a: (jnp.sort(a, 0), jnp.argsort(a, 1, descending=True), jnp.median(a, 0),
                                   jnp.quantile(a, np.array([0.2, 0.8]), axis=1)),
    "nan reductions": lambda a: (jnp.nanmax(jnp.where(a > 1, jnp.nan, a), 0), jnp.nanmean(jnp.where(a > 1, jnp.nan, a))),
    "nonzero with size": lambda a: jnp.nonzero(a > 0, size=10),
    "nn": lambda a: (meshax.nn.softmax(a), meshax.nn.logsumexp(a, 1), meshax.nn.gelu(a), meshax.nn.one_hot(
        jnp.argmax(a, 1), 4), meshax.nn.dot_product_attention(a[None, :, None], a[None, :, None], a[None, :, None])),
}


@pytest.mark.parametrize("name", list(EAGER_VS_JIT))
def test_jit_matches_eager(x, name):
    fn = EAGER_VS_JIT[name]
    eager = meshax.tree_util.tree_leaves(fn(x))
    jitted = meshax.tree_util.tree_leaves(meshax.jit(fn)(x))
    assert len(eager) == len(jitted)
    for e, j in zip(eager, jitted):
        assert (e.shape, e.dtype, e.weak_type) == (j.shape, j.dtype, j.weak_type)
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-6, atol=1e-6)
        assert j.sharding == e.sharding  # the same primitives with the same rules: the same layouts


def test_side_effects_happen_at_trace_time_only(x):
    log = []

    @meshax.jit
    def f(a):
        log.append(a.shape)
        return a * 2

    for _ in range(3):
        f(x)
    assert log == [(8, 4)]


# ---- static arguments ----------------------------------------------------------------------------------------


def test_static_argnums(x):
    count = Counter()
    f = meshax.jit(count(lambda a, n, axis: jnp.sum(a ** n, axis=axis)), static_argnums=(1, 2))
    np.testing.assert_allclose(np.asarray(f(x, 2, 0)), (VALUE ** 2).sum(0), rtol=1e-5)
    f(x, 2, 0)
    assert count.calls == 1
    np.testing.assert_allclose(np.asarray(f(x, 3, 1)), (VALUE ** 3).sum(1), rtol=1e-5)
    assert count.calls == 2


def test_static_argnums_control_python(x):
    """A static argument can drive Python control flow and shapes."""
    f = meshax.jit(lambda a, n: jnp.stack([a * i for i in range(n)]) if n > 1 else a, static_argnums=1)
    assert f(x, 3).shape == (3, 8, 4)
    assert f(x, 1).shape == (8, 4)


def test_static_argnames(x):
    count = Counter()
    f = meshax.jit(count(lambda a, *, axis, keepdims=False: jnp.max(a, axis=axis, keepdims=keepdims)),
                   static_argnames=("axis", "keepdims"))
    assert f(x, axis=0).shape == (4,)
    assert f(x, axis=0).shape == (4,)
    assert count.calls == 1
    assert f(x, axis=1, keepdims=True).shape == (8, 1)
    assert count.calls == 2
    g = meshax.jit(lambda a, n: a * n, static_argnames="n")
    np.testing.assert_allclose(np.asarray(g(x, 3)), VALUE * 3, rtol=1e-6)  # a static name passed by position
    np.testing.assert_allclose(np.asarray(g(x, n=4)), VALUE * 4, rtol=1e-6)


def test_static_argnums_passed_by_keyword(x):
    f = meshax.jit(lambda a, n: jnp.stack([a] * n), static_argnums=1)
    assert f(x, n=2).shape == (2, 8, 4)


def test_negative_static_argnums(x):
    f = meshax.jit(lambda a, n: a * n, static_argnums=-1)
    np.testing.assert_allclose(np.asarray(f(x, 2)), VALUE * 2)


def test_static_argnums_with_varargs_and_defaults(x, jx):
    count = Counter()
    f = meshax.jit(count(lambda *args: args[0] * args[-1]), static_argnums=-1)  # resolved against each call
    np.testing.assert_allclose(np.asarray(f(x, 3)), VALUE * 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f(x, 1.0, 3)), VALUE * 3, rtol=1e-6)
    assert count.calls == 2
    reference = jax.jit(lambda *args: args[0] * args[-1], static_argnums=-1)(jx, 1.0, 3)
    np.testing.assert_allclose(np.asarray(reference), VALUE * 3, rtol=1e-6)
    g = meshax.jit(lambda a, n=2: jnp.stack([a] * n), static_argnums=1)
    assert g(x).shape == (2, 8, 4) and g(x, n=3).shape == (3, 8, 4) and g(x, 1).shape == (1, 8, 4)


def test_unhashable_static_argument_is_an_error(x):
    f = meshax.jit(lambda a, options: a, static_argnums=1)
    with pytest.raises((TypeError, ValueError), match="hashable"):
        f(x, [1, 2])


# ---- pytrees --------------------------------------------------------------------------------------------------


Pair = collections.namedtuple("Pair", "left right")


@meshax.tree_util.register_dataclass
@dataclasses.dataclass
class Params:
    weight: object
    bias: object


def test_pytrees_in_and_out(x, mesh):
    count = Counter()

    @meshax.jit
    @count
    def step(params, batch):
        out = batch["x"] @ params.weight + params.bias
        return {"out": out, "stats": (jnp.mean(out), [jnp.max(out)]), "pair": Pair(out.T, None)}

    weight = meshax.device_put(np.ones((4, 3), np.float32), NamedSharding(mesh, P("b")))
    params = Params(weight, 0.5)
    result = step(params, {"x": x})
    expected = VALUE @ np.ones((4, 3), np.float32) + 0.5
    np.testing.assert_allclose(np.asarray(result["out"]), expected, rtol=1e-5)
    np.testing.assert_allclose(float(result["stats"][0]), expected.mean(), rtol=1e-5)
    np.testing.assert_allclose(float(result["stats"][1][0]), expected.max(), rtol=1e-5)
    assert isinstance(result["pair"], Pair) and result["pair"].right is None
    assert result["pair"].left.shape == (3, 8)
    step(Params(weight, 1.5), {"x": x})
    assert count.calls == 1


# ---- shardings ------------------------------------------------------------------------------------------------


def test_in_shardings_place_host_inputs(mesh):
    f = meshax.jit(lambda a, b: a + b, in_shardings=(NamedSharding(mesh, P("a")), NamedSharding(mesh, P(None, "b"))))
    ones = np.ones((8, 4), np.float32)
    result = f(ones, ones * 2)
    np.testing.assert_array_equal(np.asarray(result), np.full((8, 4), 3, np.float32))
    assert isinstance(result.sharding, NamedSharding) and result.sharding.mesh == mesh


def test_in_shardings_single(mesh):
    f = meshax.jit(lambda a: a * 2, in_shardings=NamedSharding(mesh, P("b", "a")))
    result = f(VALUE)
    np.testing.assert_allclose(np.asarray(result), VALUE * 2)
    assert result.sharding == NamedSharding(mesh, P("b", "a"))


def test_out_shardings(x, mesh):
    f = meshax.jit(lambda a: (a, {"t": a.T}), out_shardings=(NamedSharding(mesh, P(None, "a")),
                                                               {"t": NamedSharding(mesh, P())}))
    first, second = f(x)
    assert first.sharding == NamedSharding(mesh, P(None, "a"))
    assert second["t"].sharding == NamedSharding(mesh, P())
    np.testing.assert_array_equal(np.asarray(second["t"]), VALUE.T)
    g = meshax.jit(lambda a: jnp.sum(a, axis=0), out_shardings=NamedSharding(mesh, P("b")))
    assert g(x).sharding == NamedSharding(mesh, P("b"))


def test_with_sharding_constraint_under_jit(x, mesh, jx, jmesh):
    target = NamedSharding(mesh, P(None, "a"))
    f = meshax.jit(lambda a: meshax.lax.with_sharding_constraint(a * 2, target) + 1)
    result = f(x)
    np.testing.assert_allclose(np.asarray(result), VALUE * 2 + 1, rtol=1e-6)
    assert result.sharding == target
    reference = jax.jit(lambda a: jax.lax.with_sharding_constraint(a * 2, JaxNS(jmesh, JaxP(None, "a"))) + 1)(jx)
    assert tuple(reference.sharding.spec) == tuple(result.sharding.spec)
    assert "sharding_constraint" in f.lower(x).as_text()


def test_with_sharding_constraint_pytree_and_eager(x, mesh):
    targets = (NamedSharding(mesh, P("b")), NamedSharding(mesh, P()))
    left, right = meshax.lax.with_sharding_constraint((x, x.T), targets)
    assert left.sharding == targets[0] and right.sharding == targets[1]
    np.testing.assert_array_equal(np.asarray(right), VALUE.T)
    with mesh:
        constrained = meshax.jit(lambda a: meshax.lax.with_sharding_constraint(a, P("b", "a")))(x)
    assert constrained.sharding == NamedSharding(mesh, P("b", "a"))


def test_output_sharding_matches_jax(x, jx, mesh, jmesh):
    y = meshax.device_put(VALUE.T.copy(), NamedSharding(mesh, P("b", None)))
    jy = jax.device_put(VALUE.T.copy(), JaxNS(jmesh, JaxP("b", None)))
    result = meshax.jit(lambda a, b: a @ b)(x, y)
    reference = jax.jit(lambda a, b: a @ b)(jx, jy)
    np.testing.assert_allclose(np.asarray(result), np.asarray(reference), rtol=1e-5, atol=1e-5)
    assert result.sharding.spec == P("a")
    assert tuple(reference.sharding.spec) == ("a",)


# ---- closures, constants, nesting --------------------------------------------------------------------------------


def test_closure_over_arrays_and_numpy_constants(x, mesh):
    captured = meshax.device_put(np.full((8, 4), 10, np.float32), NamedSharding(mesh, P("b")))
    table = np.arange(4, dtype=np.float32)
    f = meshax.jit(lambda a: a + captured + table + np.float32(1))
    result = f(x)
    np.testing.assert_allclose(np.asarray(result), VALUE + 10 + np.arange(4) + 1, rtol=1e-6)
    assert result.dtype == np.float32
    text = f.lower(x).as_text()
    assert "f32[8,4]" in text


def test_closure_only_inputs(x):
    f = meshax.jit(lambda s: x * s)
    np.testing.assert_allclose(np.asarray(f(3.0)), VALUE * 3, rtol=1e-6)
    assert f(3.0).sharding == x.sharding


def test_nested_jit(x):
    inner_count, outer_count = Counter(), Counter()
    inner = meshax.jit(inner_count(lambda a: jnp.exp(a) - 1))
    outer = meshax.jit(outer_count(lambda a: inner(a) * inner(a + 1)))
    for _ in range(2):
        result = outer(x)
    np.testing.assert_allclose(np.asarray(result), np.expm1(VALUE) * np.expm1(VALUE + 1), rtol=1e-5)
    assert outer_count.calls == 1
    assert inner_count.calls == 1  # both inner calls have the same signature
    np.testing.assert_allclose(np.asarray(inner(x)), np.expm1(VALUE), rtol=1e-5, atol=1e-6)
    assert meshax.jit(meshax.jit(lambda a: a * 2))(x).shape == (8, 4)


def test_jit_decorator_with_options(x):
    @meshax.jit(static_argnames="power")
    def f(a, power=2):
        return a ** power

    np.testing.assert_allclose(np.asarray(f(x, power=3)), VALUE ** 3, rtol=1e-5)


def test_python_scalar_inputs_are_weak(x):
    f = meshax.jit(lambda a, s: a * s)
    result = f(3, 2)
    assert result.dtype == np.int32 and result.weak_type
    assert f(x, 2).dtype == np.float32 and not f(x, 2).weak_type


# ---- errors --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, what", [
    (lambda a: a if jnp.sum(a) > 0 else -a, "bool"),
    (lambda a: a * int(a[0, 0]), "int"),
    (lambda a: a * float(jnp.max(a)), "float"),
    (lambda a: jnp.asarray(np.asarray(a)), "NumPy"),
    (lambda a: a[: jnp.argmax(a[:, 0])], "index"),
    (lambda a: [a for _ in range(jnp.sum(a > 0))], "index"),
], ids=["if", "int", "float", "np.asarray", "slice bound", "range"])
def test_python_control_flow_on_traced_values_is_a_clear_type_error(x, body, what):
    with pytest.raises(TypeError, match="traced") as info:
        meshax.jit(body)(x)
    assert what in str(info.value)
    assert "static" in str(info.value) or "where" in str(info.value)


def test_boolean_mask_of_traced_values_is_an_error(x):
    with pytest.raises(IndexError, match="concrete"):
        meshax.jit(lambda a: a[a > 0])(x)


def test_non_array_arguments_need_to_be_static(x):
    with pytest.raises(TypeError, match="static"):
        meshax.jit(lambda a, name: a)(x, "name")


# ---- lowering --------------------------------------------------------------------------------------------------------


def test_lower_as_text(x, jx):
    def f(lib, a):
        return lib.sum(lib.sin(a) @ a.T, axis=1)

    text = meshax.jit(lambda a: f(jnp, a)).lower(x).as_text()
    assert isinstance(text, str)
    for name in ("sin", "transpose", "dot_general", "reduce_sum", "f32[8,4]"):
        assert name in text, (name, text)
    reference = jax.jit(lambda a: f(jjnp, a)).lower(jx).as_text()  # the same call works in JAX
    assert "sine" in reference
    lowered = meshax.jit(lambda a, n: a * n, static_argnums=1).lower(x, 3)
    assert "mul" in lowered.as_text()


def test_lower_compile_call(x):
    compiled = meshax.jit(lambda a: a + 1).lower(x).compile()
    np.testing.assert_allclose(np.asarray(compiled(x)), VALUE + 1)


def test_outputs_are_always_arrays():
    result = meshax.jit(lambda a: (a, 1))(2.0)
    assert all(isinstance(r, meshax.Array) for r in result)
    assert result[1].weak_type


def test_device_put_under_jit(x, mesh):
    result = meshax.jit(lambda a: meshax.device_put(a * 2, NamedSharding(mesh, P("b"))))(x)
    assert result.sharding == NamedSharding(mesh, P("b"))
    f = meshax.jit(lambda a: meshax.device_put((a, a + 1), (NamedSharding(mesh, P(None, "a")), None)))
    left, right = f(x)
    assert left.sharding == NamedSharding(mesh, P(None, "a")) and right.sharding == x.sharding
    np.testing.assert_allclose(np.asarray(right), VALUE + 1, rtol=1e-6)
    assert "sharding_constraint" in f.lower(x).as_text()


def test_lowered_and_compiled_programs(x, jx):
    lowered = meshax.jit(lambda a, n, *, scale: a * n * scale, static_argnums=1).lower(x, 3, scale=2.0)
    compiled = lowered.compile()
    assert compiled.as_text() == lowered.as_text()
    np.testing.assert_allclose(np.asarray(compiled(x, scale=0.5)), VALUE * 1.5, rtol=1e-6)  # without the static 3
    reference = jax.jit(lambda a, n, *, scale: a * n * scale, static_argnums=1).lower(jx, 3, scale=2.0).compile()
    np.testing.assert_allclose(np.asarray(reference(jx, scale=0.5)), VALUE * 1.5, rtol=1e-6)
    with pytest.raises(TypeError, match=r"float32\[4\]"):
        compiled(jnp.arange(4.0), scale=0.5)
    with pytest.raises(TypeError):
        reference(jjnp.arange(4.0), scale=0.5)


def test_constant_outputs_are_placed_like_jax(x, jx, mesh):
    def f(a):
        return a, 1, np.arange(3.0), None

    result, reference = meshax.jit(f)(x), jax.jit(f)(jx)
    for r, j in zip(result[:3], reference[:3]):
        assert (r.dtype, r.weak_type, r.committed) == (j.dtype, j.weak_type, j.committed)
        np.testing.assert_array_equal(np.asarray(r), np.asarray(j))
        assert tuple(r.sharding.spec) == tuple(j.sharding.spec)
    assert result[1].sharding == NamedSharding(mesh, P()) and result[3] is None
    uncommitted = meshax.jit(lambda a: (a, 1))(jnp.arange(3.0))
    assert all(isinstance(r.sharding, SingleDeviceSharding) and not r.committed for r in uncommitted)
    assert meshax.jit(lambda a: meshax.jit(lambda b: (b, 1))(a)[1].shape)(x) == ()


def test_uncommitted_inputs_stay_on_one_device():
    result = meshax.jit(lambda a: a * 2)(jnp.arange(4.0))
    assert isinstance(result.sharding, SingleDeviceSharding)
    np.testing.assert_array_equal(np.asarray(result), np.arange(4.0) * 2)


def test_traces_kept_are_bounded(monkeypatch):
    """A function called with ever new shapes keeps at most TRACES_KEPT traces, and retraces a forgotten one."""
    from meshax._src.transforms import jit as jit_module

    monkeypatch.setattr(jit_module, "TRACES_KEPT", 4)
    traces = []

    def double(v):
        traces.append(v.shape)
        return v * 2

    f = meshax.jit(double)
    for n in range(1, 11):
        np.testing.assert_array_equal(np.asarray(f(np.arange(n, dtype=np.float32))), np.arange(n) * 2)
    assert len(f._cache) == 4 and len(traces) == 10
    f(np.arange(10, dtype=np.float32))  # still kept: no new trace
    f(np.arange(1, dtype=np.float32))  # forgotten: traced again
    assert len(traces) == 11 and len(f._cache) == 4
