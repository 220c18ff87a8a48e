"""A jitted function's repeated calls (transforms/jit_fast.py): once a call ran directly on one device, the next
calls with arguments of the same structure, types, shardings and commitment skip the general path and give the
same results (values, shardings, commitment, read-only buffers); any other call takes the general path, with its
values and errors."""
from __future__ import annotations

import numpy as np
import pytest

import meshax
import meshax.numpy as mnp
from meshax._src.transforms import jit_fast


@pytest.fixture
def fast_calls(monkeypatch):
    """The FastCalls' answers (True: ran the call, False: MISS), in order."""
    answers = []
    original = jit_fast.FastCall.__call__

    def call(self, args):
        result = original(self, args)
        answers.append(result is not jit_fast.MISS)
        return result

    monkeypatch.setattr(jit_fast.FastCall, "__call__", call)
    return answers


def step(params, batch, scale=1.0):
    w, b = params["w"], params["b"]
    y = mnp.tanh(batch @ w + b) * scale
    return {"w": w - 0.1 * (batch.T @ y), "b": b - 0.1 * y.sum(axis=0)}, (y ** 2).mean()


def reference(params, batch, scale=1.0):
    y = np.tanh(batch @ params["w"] + params["b"]) * scale
    return {"w": params["w"] - 0.1 * (batch.T @ y), "b": params["b"] - 0.1 * y.sum(axis=0)}, (y ** 2).mean()


def arrays(rng, n=4):
    params = {"w": rng.standard_normal((3, 2)).astype(np.float32), "b": np.zeros(2, np.float32)}
    batch = rng.standard_normal((n, 3)).astype(np.float32)
    return meshax.device_put(params), meshax.device_put(batch)


def warmed(seed, function=step):
    """`function` jitted and called twice (the second call by its FastCall) on arrays made from `seed`."""
    params, batch = arrays(np.random.default_rng(seed))
    f = meshax.jit(function)
    f(params, batch)
    f(params, batch)
    return f, params, batch


def on_host(params):
    return {k: np.asarray(v) for k, v in params.items()}


def assert_close(ours, theirs):
    for a, b in zip(meshax.tree_util.tree_leaves(ours), meshax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_repeated_calls_run_fast_with_the_general_paths_results(fast_calls):
    rng = np.random.default_rng(0)
    params, batch = arrays(rng)
    f = meshax.jit(step)
    expected_params = on_host(params)
    first = f(params, batch)
    for _ in range(4):
        params, loss = f(params, batch)
        expected_params, expected_loss = reference(expected_params, np.asarray(batch))
    assert fast_calls and all(fast_calls[1:]), fast_calls
    assert_close((params, loss), (expected_params, expected_loss))
    general = first[0]["w"]
    for ours in (params["w"], loss):
        assert ours.sharding == general.sharding and ours.committed == general.committed
        assert not np.asarray(ours).flags.writeable


def test_calls_that_differ_take_the_general_path(fast_calls):
    f, params, batch = warmed(1)
    assert fast_calls == [True]
    _, bigger = arrays(np.random.default_rng(5), n=6)
    assert_close(f(params, bigger), reference(on_host(params), np.asarray(bigger)))
    host = np.asarray(batch)  # a NumPy argument, then an uncommitted Array
    assert_close(f(params, host), reference(on_host(params), host))
    assert_close(f(params, mnp.asarray(host)), reference(on_host(params), host))
    assert_close(f(params, batch, scale=2.0), reference(on_host(params), host, 2.0))
    with pytest.raises(TypeError):
        f([params["w"], params["b"]], batch)  # another structure: the general path's error
    assert False in fast_calls


def test_a_deleted_argument_raises_as_in_the_general_path(fast_calls):
    f, params, batch = warmed(2)
    batch.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        f(params, batch)


def test_under_a_transformation_the_call_is_traced(fast_calls):
    rng = np.random.default_rng(3)
    params, batch = arrays(rng)
    f = meshax.jit(lambda w, x: mnp.sum(mnp.tanh(x @ w)))
    f(params["w"], batch)
    f(params["w"], batch)
    fast_calls.clear()
    gradient = meshax.grad(f)(params["w"], batch)
    expected = np.asarray(batch).T @ (1 - np.tanh(np.asarray(batch) @ np.asarray(params["w"])) ** 2)
    np.testing.assert_allclose(np.asarray(gradient), expected, rtol=1e-5)
    assert fast_calls == [False]
    inside = meshax.jit(lambda w, x: f(w, x) * 2.0)(params["w"], batch)
    np.testing.assert_allclose(float(inside), 2 * np.tanh(np.asarray(batch) @ np.asarray(params["w"])).sum(), rtol=1e-5)
