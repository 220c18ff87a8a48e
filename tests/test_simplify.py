"""Simplification of executed jaxprs (interpreters/simplify.py): dead code, repeated work, scalar constants and
identities are gone from the program that runs, its values are unchanged, side effects stay, and it is made once
per trace."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from mlp_step import sgd_step
from meshax._src.core.core import impl_rules
from meshax._src.interpreters import fusion, numpy_eval
from meshax._src.interpreters.fusion import executable, fused_p
from meshax._src.interpreters.simplify import simplify

from oracle import assert_same_tree


def traced(function, *args):
    return meshax.make_jaxpr(function)(*args).jaxpr


def names(jaxpr):
    return [eq.primitive.name for eq in jaxpr.equations]


def executed_names(jaxpr):
    """The primitives the executable program runs, clusters opened up."""
    found = []
    for eq in executable(jaxpr).equations:
        found.extend(names(eq.params["cluster"].jaxpr) if eq.primitive is fused_p else [eq.primitive.name])
    return found


def count_impl_calls(monkeypatch, function, *args):
    """How many primitive implementations one call of jit(function) runs on one device, and its result."""
    calls = []
    for primitive, impl in list(impl_rules.items()):
        monkeypatch.setitem(impl_rules, primitive, (lambda p, f: lambda *a, **k: (calls.append(p.name), f(*a, **k))[1])(
            primitive, impl))
    jitted = meshax.jit(function)
    jitted(*args)  # trace first
    calls.clear()
    out = jitted(*args)
    return calls, out


X = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)


def test_dead_code_is_not_run(monkeypatch):
    def f(x):
        unused = mnp.sin(x) * 2.0  # noqa: F841 - computed, never used
        _ = mnp.exp(x).sum()
        return x + 1.0

    assert {"sin", "exp", "reduce_sum"} <= set(names(traced(f, X)))
    assert executed_names(traced(f, X)) == ["add"]
    calls, out = count_impl_calls(monkeypatch, f, meshax.device_put(X, meshax.devices()[0]))
    assert "sin" not in calls and "exp" not in calls
    np.testing.assert_array_equal(np.asarray(out), X + 1)


def test_repeated_work_runs_once(monkeypatch):
    def f(x):
        return mnp.exp(x) * 2.0 + mnp.exp(x) * 2.0 + mnp.tanh(x) - mnp.tanh(x)

    assert names(traced(f, X)).count("exp") == 2
    assert executed_names(traced(f, X)).count("exp") == 1
    assert executed_names(traced(f, X)).count("tanh") == 1
    calls, out = count_impl_calls(monkeypatch, f, meshax.device_put(X, meshax.devices()[0]))
    assert calls.count("exp") == 1 and calls.count("tanh") == 1
    assert_same_tree(out, jax.jit(lambda x: jjnp.exp(x) * 2.0 + jjnp.exp(x) * 2.0 + jjnp.tanh(x) - jjnp.tanh(x))(X))


def test_scalar_constants_fold_and_identities_vanish():
    def f(x):
        scale = (np.float32(1.0) / np.float32(4.0)) * -1.0  # scalar arithmetic on constants
        y = meshax.lax.convert_element_type(x, np.float32) * 1.0 - 0.0
        return -(-(y * scale)) / 1.0

    jaxpr = traced(f, X)
    program = simplify(jaxpr)
    assert names(program) == ["mul"], names(program)
    with np.errstate(all="ignore"):
        assert np.asarray(numpy_eval.run(jaxpr, [], [X])[0]).tobytes() == (X * np.float32(-0.25)).tobytes()


def test_inexact_identities_are_kept():
    """x + 0.0 is not x for x = -0.0, and x * 0 is not 0 for inf or NaN: those stay."""
    x = np.array([-0.0, np.inf, np.nan, 1.0], np.float32)
    jaxpr = traced(lambda x: (x + 0.0, x * 0.0), x)
    assert names(simplify(jaxpr)) == ["add", "mul"]
    ours = meshax.jit(lambda x: (x + 0.0, x * 0.0))(x)
    with np.errstate(invalid="ignore"):
        expected = (x + np.float32(0.0), x * np.float32(0.0))  # (XLA itself rewrites x + 0.0 as x)
    for a, b in zip(ours, expected):
        assert np.asarray(a).tobytes() == b.tobytes()


def test_relu_derivative_is_one_select():
    def loss(x):
        return mnp.sum(meshax.nn.relu(x) * 3.0)

    jaxpr = traced(meshax.grad(loss), X)
    ran = executed_names(jaxpr)
    assert ran.count("select") == 1 and "eq" not in ran and ran.count("gt") == 1, ran
    x = np.array([-1.0, 0.0, 2.0, np.nan], np.float32)
    np.testing.assert_array_equal(np.asarray(meshax.jit(meshax.grad(loss))(x)),
                                  np.asarray(jax.jit(jax.grad(lambda x: jjnp.sum(jax.nn.relu(x) * 3.0)))(x)))


def test_mlp_step_runs_fewer_equations():
    """The training step of the examples' MLP: fewer executed equations than traced ones, the same values."""
    rng = np.random.default_rng(0)
    params = [{"w": rng.standard_normal((8, 16)).astype(np.float32), "b": np.zeros(16, np.float32)},
              {"w": rng.standard_normal((16, 4)).astype(np.float32), "b": np.zeros(4, np.float32)}]
    x, labels = rng.standard_normal((32, 8)).astype(np.float32), rng.integers(0, 4, 32).astype(np.int32)

    jaxpr = traced(sgd_step(meshax, mnp), params, x, labels)
    assert len(simplify(jaxpr).equations) < len(jaxpr.equations)
    assert len(executable(jaxpr).equations) < len(jaxpr.equations) * 3 // 4
    ours = meshax.jit(sgd_step(meshax, mnp))(params, x, labels)
    theirs = jax.jit(sgd_step(jax, jjnp))(params, x, labels)
    assert_same_tree(ours, theirs)


def test_transposed_product_comes_out_in_order():
    """A weight's gradient, transpose(dot_general(g, x)), runs as one product of the swapped operands: a row-major
    result, the transposed product's value (the swapped product's bits: OpenBLAS's Haswell kernels round the two
    differently), as JAX's value on one device, over a mesh and in shard_map."""
    rng = np.random.default_rng(3)
    g, x = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((64, 40)).astype(np.float32)

    def f(lib):
        return lambda g, x: lib.lax.dot_general(g, x, (((0,), (0,)), ((), ()))).T * 2.0

    jaxpr = traced(f(meshax), g, x)
    assert "transpose" in names(jaxpr) and "transpose" not in executed_names(jaxpr)
    expected = (np.matmul(g.T, x).T * np.float32(2.0))
    ours = np.asarray(meshax.jit(f(meshax))(g, x))
    assert ours.tobytes() == (np.matmul(x.T, g) * np.float32(2.0)).tobytes() and ours.flags.c_contiguous
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours, np.asarray(jax.jit(f(jax))(g, x)), rtol=1e-5, atol=1e-5)
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("d",))
    P = meshax.sharding.PartitionSpec
    rows = meshax.sharding.NamedSharding(mesh, P("d"))
    over_mesh = meshax.jit(f(meshax))(meshax.device_put(g, rows), meshax.device_put(x, rows))
    np.testing.assert_allclose(np.asarray(over_mesh), expected, rtol=1e-5, atol=1e-5)
    mapped = meshax.jit(meshax.shard_map(f(meshax), mesh=mesh, in_specs=(P("d"), P("d")), out_specs=P("d")))(g, x)
    theirs = jax.jit(jax.shard_map(f(jax), mesh=jax.sharding.Mesh(np.array(jax.devices()[:2]), ("d",)),
                                   in_specs=(jax.P("d"), jax.P("d")), out_specs=jax.P("d")))(g, x)
    np.testing.assert_allclose(np.asarray(mapped), np.asarray(theirs), rtol=1e-5, atol=1e-5)
    # a transpose that does not swap the free dimensions, or a product read elsewhere too, is kept
    kept = traced(lambda g, x: (lambda p: (p.T, p))(meshax.lax.dot_general(g, x, (((0,), (0,)), ((), ())))), g, x)
    assert "transpose" in executed_names(kept)


def test_side_effects_stay(capsys):
    def f(x):
        meshax.debug.print("seen {}", x.sum())
        meshax.debug.callback(lambda v: print("callback", v), x[0, 0])
        return x * 2.0

    out = meshax.jit(f)(X)
    printed = capsys.readouterr().out
    assert "seen" in printed and "callback" in printed
    np.testing.assert_array_equal(np.asarray(out), X * 2)


def test_simplified_once_per_trace(monkeypatch):
    made = []
    original = fusion.simplify
    monkeypatch.setattr(fusion, "simplify", lambda j: (made.append(1), original(j))[1])
    jitted = meshax.jit(lambda x: mnp.exp(x) + mnp.exp(x))
    x = meshax.device_put(X + 100.0, meshax.devices()[0])  # a fresh trace (new constants)
    for _ in range(3):
        jitted(x)
    assert len(made) == 1


@pytest.mark.parametrize("where", ["one_device", "mesh", "shard_map"])
def test_simplified_program_matches_jax_everywhere(where):
    def f(lib, np_):
        return lambda x: np_.exp(x) * 1.0 + np_.exp(x) - (-(-x)) + (np_.float32(2.0) * np_.float32(3.0))

    if where == "one_device":
        ours = meshax.jit(f(meshax, mnp))(meshax.device_put(X, meshax.devices()[0]))
    elif where == "mesh":
        mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("d",))
        xs = meshax.device_put(X, meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec("d")))
        ours = meshax.jit(f(meshax, mnp))(xs)
    else:
        mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("d",))
        P = meshax.sharding.PartitionSpec
        ours = meshax.jit(meshax.shard_map(f(meshax, mnp), mesh=mesh, in_specs=P("d"), out_specs=P("d")))(X)
    assert_same_tree(ours, jax.jit(f(jax, jjnp))(X))


@pytest.mark.parametrize("where", ["one_device", "mesh", "shard_map"])
def test_gradients_of_slices_tiling_an_axis_are_one_concatenate(where):
    """The gradient of a value read as slices that tile one axis (a GRU's gates) is the slices' gradients side by
    side: one concatenate, no zero fill or scatter, JAX's values; slices that leave a gap stay scatters."""
    def loss(lib, np_):
        return lambda g: np_.sum(lib.nn.sigmoid(g[:, :4]) * g[:, 4:8] + np_.tanh(g[:, 8:]) * 3.0)

    g = np.linspace(-2, 2, 48, dtype=np.float32).reshape(4, 12)
    jaxpr = traced(meshax.grad(loss(meshax, mnp)), g)
    ran = executed_names(jaxpr)
    assert "concatenate" in ran and "scatter" not in ran, ran
    gap = traced(meshax.grad(lambda g: mnp.sum(g[:, :4] * g[:, 6:10])), g)
    assert "scatter" in executed_names(gap)
    grad = meshax.jit(meshax.grad(loss(meshax, mnp)))
    if where == "one_device":
        ours = grad(meshax.device_put(g, meshax.devices()[0]))
    elif where == "mesh":
        mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("d",))
        ours = grad(meshax.device_put(g, meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec("d"))))
    else:
        mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("d",))
        P = meshax.sharding.PartitionSpec
        ours = meshax.jit(meshax.shard_map(grad, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(g)
    theirs = jax.jit(jax.grad(loss(jax, jjnp)))(g)
    if where == "shard_map":  # each device's rows: the sum's gradient is per device, the same values
        theirs = np.concatenate([np.asarray(jax.grad(loss(jax, jjnp))(part)) for part in np.split(g, 2)])
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-6, atol=1e-7)
