"""Small programs compiled whole (interpreters/numba_program.py): every translated operation gives JAX's values
once the program runs as one compiled function (products, reductions, elementwise chains, shapes, gathers and
scatters, a training step), under jit and in shard_map; a program with an operation that has no translation keeps
running as generated Python; the compiled function is used from the same run on whether or not its compilation
is finished by then."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax._src.interpreters import fusion, numba_program
from meshax.sharding import Mesh, PartitionSpec as P

from compiled_runs import record_compiled_runs
from differential import assert_matches

COMPILER = fusion.EXECUTORS["cpu"].numba.compiler


@pytest.fixture
def whole(monkeypatch):
    """Programs compiled whole from their second run (asked for on the first, compiled then); returns the list
    of runs made by a compiled function."""
    monkeypatch.setattr(numba_program, "ASK_ON_RUN", 1)
    monkeypatch.setattr(numba_program, "USE_FROM_RUN", 2)
    monkeypatch.setattr(numba_program, "MIN_EQUATIONS", 1)
    return record_compiled_runs(monkeypatch)


def check(whole, case, *args, runs=3, **tolerances):
    """`case(L, *args)` jitted in meshax, run `runs` times (the last ones compiled whole), against JAX's."""
    theirs = jax.jit(lambda *xs: case(jax, *xs))(*args)
    ours = meshax.jit(lambda *xs: case(meshax, *xs))
    for _ in range(runs):
        value = ours(*args)
    assert whole, "the program was not run compiled whole"
    assert_matches(value, theirs, **({"rtol": 2e-6, "atol": 1e-6} | tolerances))


RNG = np.random.default_rng(0)


def floats(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def test_products_with_their_operands_transposed_batched_or_vectors(whole):
    a, b, c, d = floats(6, 5), floats(5, 7), floats(3, 4, 5), floats(3, 5, 2)

    def case(L, a, b, c, d):  # one program (one compilation) holding every kind of product
        return (L.nn.relu(a @ b + 1.0), a.T @ a + 0.5, (b @ b.T) * 2.0, L.numpy.einsum("bij,bjk->bik", c, d) - 1.0,
                L.numpy.dot(a[0], a[1]) * a, (a @ b[:, 0]) + 2.0, L.numpy.einsum("bij,bij->j", c, c) * 3.0)
    check(whole, case, a, b, c, d, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod", "mean"])
def test_reductions_over_any_axes(whole, kind):
    x = floats(4, 5, 3)
    if kind in ("max", "min"):
        x[1, 2, 0] = np.nan

    def case(L, x):  # every axes and keepdims in one program
        reduce = getattr(L.numpy, kind)
        return [reduce(x * 1.5, axis=axes, keepdims=keepdims) + 1.0 for axes in (0, 1, (0, 2), None)
                for keepdims in (False, True)]
    check(whole, case, x, rtol=1e-5, atol=1e-6)


def test_boolean_and_integer_reductions(whole):
    x = RNG.integers(-5, 5, (6, 4)).astype(np.int32)
    check(whole, lambda L, x: (L.numpy.any(x > 3, axis=0), L.numpy.all(x > -4, axis=1), L.numpy.sum(x * 3, axis=1),
                               L.numpy.max(x - 1, axis=0), L.numpy.min(x + 1)), x)


def test_elementwise_functions(whole):
    x, positive = floats(5, 6, scale=2.0), np.abs(floats(5, 6)) + 0.1

    def case(L, x, positive):
        np_ = L.numpy
        return ([f(x * 0.5) + x for f in (np_.exp, np_.tanh, L.nn.sigmoid, np_.sin, np_.expm1, L.scipy.special.erf,
                                          np_.floor, np_.ceil, np_.sign, np_.abs, np_.square, np_.reciprocal)] +
                [f(positive) * 2.0 for f in (np_.log, np_.sqrt, np_.log1p)])
    check(whole, case, x, positive, rtol=4e-6, atol=1e-6)


def test_powers_selects_comparisons_and_conversions(whole):
    x, y = floats(4, 5), np.abs(floats(4, 5)) + 0.5
    def case(L, x, y):
        np_ = L.numpy
        return (y ** x, x ** 3, y ** -2, np_.where(x > 0, x, 2 * y), (x >= y).astype(np_.float32) + x,
                np_.maximum(x, y), np_.minimum(x, np_.nan), (x < 0) & (y > 1), ~(x < 0), np_.isnan(x / 0.0))
    check(whole, case, x, y, rtol=4e-6, atol=1e-6)


def test_integer_arithmetic_wraps_as_jax(whole):
    x = RNG.integers(-2**31, 2**31 - 1, (5, 4), dtype=np.int64).astype(np.int32)
    y = RNG.integers(-1000, 1000, (5, 4)).astype(np.int32)
    check(whole, lambda L, x, y: (x * y + 7, x - y * 3, -x, L.numpy.abs(y) ** 2, x ^ y, (x > y).astype(L.numpy.int32),
                                  y.astype(L.numpy.float32) * 0.5), x, y)


def test_shapes_reshape_transpose_broadcast_slice_pad_concatenate_iota(whole):
    x = floats(4, 6, 2)
    def case(L, x):
        np_ = L.numpy
        y = x.reshape(8, 6) * 2.0
        return (np_.transpose(x, (2, 0, 1)) + 1.0, np_.broadcast_to(x[:, :1, :], (4, 6, 2)) * x, y[::2, 1:5:3] - 1.0,
                x[None, 1] + 1.0, np_.concatenate([y, y * 2.0], axis=1), np_.pad(y, ((1, 2), (0, 3)), constant_values=-1.0),
                np_.arange(12, dtype=np_.int32).reshape(3, 4) * 2, x[2, 3, 1] * y)
    check(whole, case, x)


def test_take_along_axis_clamps_and_fills_as_jax(whole):
    x = floats(6, 5)
    idx = np.array([[0], [4], [-1], [7], [-9], [2]], np.int32)
    check(whole, lambda L, x, i: (L.numpy.take_along_axis(x * 2.0, i, axis=1),
                                  L.numpy.take_along_axis(x + 1.0, i, axis=1, mode="clip")), x, idx)


def test_scatters_drop_updates_outside_and_sum_duplicates(whole):
    x, y = floats(6, 4), floats(5, 4)
    idx = np.array([1, 3, 1, -2, 9], np.int32)

    def case(L, x, y, i):
        return [(getattr((x * 1.0).at[i], mode)(y * 2.0, mode="drop"),
                 getattr((x + 1.0).at[1:5:2], mode)(y[:2] * 3.0)) for mode in ("add", "set", "max", "min", "multiply")]
    check(whole, case, x, y, idx)


def test_a_training_step_with_adam_matches_jax_over_steps(whole):
    sizes = [(8, 16), (16, 16), (16, 3)]
    params = [(floats(a, b, scale=0.3), np.zeros(b, np.float32)) for a, b in sizes]
    x, labels = floats(12, 8), RNG.integers(0, 3, 12).astype(np.int32)

    def step(L, params, mu, nu, count, x, labels):
        def loss(params):
            h = x
            for w, b in params[:-1]:
                h = L.nn.relu(h @ w + b)
            w, b = params[-1]
            logp = L.nn.log_softmax(h @ w + b)
            return -L.numpy.mean(L.numpy.take_along_axis(logp, labels[:, None], axis=1))
        value, grads = L.value_and_grad(loss)(params)
        count = count + 1
        mu = L.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, mu, grads)
        nu = L.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, nu, grads)
        c1, c2 = 1 - 0.9 ** count.astype(L.numpy.float32), 1 - 0.999 ** count.astype(L.numpy.float32)
        params = L.tree_util.tree_map(lambda p, m, v: p - 0.01 * (m / c1) / (L.numpy.sqrt(v / c2) + 1e-8),
                                      params, mu, nu)
        return params, mu, nu, count, value

    def run(L):
        jitted = L.jit(lambda *a: step(L, *a))
        state = (params, L.tree_util.tree_map(np.zeros_like, params), L.tree_util.tree_map(np.zeros_like, params),
                 np.int32(0))
        losses = []
        for _ in range(6):
            *state, value = jitted(*state, x, labels)
            losses.append(float(value))
        return losses, state[0]

    theirs, ours = run(jax), run(meshax)
    assert whole
    assert_matches(ours, theirs, rtol=1e-5, atol=1e-6)


def test_float32_exp_tanh_and_logistic_of_many_elements_are_compiled_and_match_jax(whole):
    x = floats(200, 100, scale=4.0)  # 20,000 of each: numba_math's forms vectorize, so the program is compiled

    def case(L, x):
        return L.numpy.tanh(x) + L.numpy.exp(x * 0.25) + L.nn.sigmoid(x * 2.0)
    check(whole, case, x, rtol=1e-6, atol=1e-6)


def test_in_shard_map_on_one_device(whole):
    mesh = Mesh(np.array(meshax.devices()[:1]), ("x",))
    x = floats(4, 6)
    placed = meshax.device_put(x, meshax.sharding.NamedSharding(mesh, P("x")))
    body = lambda x: meshax.numpy.exp(x @ x.T * 0.1).sum(axis=1, keepdims=True) * x
    f = meshax.jit(meshax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    for _ in range(3):
        value = f(placed)
    assert whole
    np.testing.assert_allclose(np.asarray(value), np.exp(x @ x.T * 0.1).sum(axis=1, keepdims=True) * x, rtol=2e-6)


def test_a_program_with_an_untranslated_operation_runs_as_python(whole):
    x = floats(5, 4)
    f = meshax.jit(lambda x: mnp.sort(x * 2.0, axis=1) + mnp.exp(x) - 1.0)
    for _ in range(4):
        value = f(x)
    assert not whole
    np.testing.assert_allclose(np.asarray(value), np.sort(x * 2.0, axis=1) + np.exp(x) - 1.0, rtol=1e-6)


def test_the_compiled_function_is_used_from_the_same_run_whether_compiled_by_then_or_not(whole, monkeypatch):
    monkeypatch.setattr(numba_program, "USE_FROM_RUN", 4)
    monkeypatch.setattr(COMPILER, "background", True)
    x = floats(7, 3)
    f = meshax.jit(lambda x: mnp.tanh(x @ x.T + 1.0).sum(axis=0) * 0.5)
    for run in range(1, 7):
        value = f(x)
        assert len(whole) == max(0, run - 3), f"run {run}"
    np.testing.assert_allclose(np.asarray(value), np.tanh(x @ x.T + 1.0).sum(axis=0) * 0.5, rtol=2e-6)


def test_a_scan_inside_a_small_program_runs_as_a_loop_of_its_body(whole):
    w, xs, h0 = floats(4, 4), floats(6, 3, 4), floats(3, 4)

    def case(L, w, xs, h0):
        def cell(h, x):
            h = h @ w * 0.5 + x
            return h, (h.sum(axis=1), h * 2.0)
        return L.lax.scan(cell, h0, xs), L.lax.scan(cell, h0, xs, reverse=True)
    check(whole, case, w, xs, h0, rtol=1e-5, atol=1e-6)


def test_a_program_computing_many_transcendentals_runs_as_python(whole):
    x = floats(200, 100)  # 20,000 sin: NumPy's vectorized kernel is faster than numba's libm calls
    f = meshax.jit(lambda x: mnp.sin(x * 0.5) * 2.0 + 1.0)
    for _ in range(4):
        value = f(x)
    assert not whole
    np.testing.assert_allclose(np.asarray(value), np.sin(x * 0.5) * 2.0 + 1.0, rtol=2e-6, atol=1e-6)
