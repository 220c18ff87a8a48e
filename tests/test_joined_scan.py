"""A scan over several devices of one process whose body keeps each device's rows its own runs as one loop over the
whole values (lax/joined_scan.py): a GRU's forward and backward loops over a batch split on 2 and 4 devices, with
JAX's values and the per-iteration path's values and shardings; loops whose rows mix run as before."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from meshax._src.lax import joined_scan

_rng = np.random.default_rng(5)
STEPS, BATCH, INPUTS, HIDDEN = 12, 8, 6, 10
PARAMS = {"w": _rng.normal(size=(INPUTS, 2 * HIDDEN)).astype(np.float32) * 0.3,
          "u": _rng.normal(size=(HIDDEN, 2 * HIDDEN)).astype(np.float32) * 0.3,
          "b": _rng.normal(size=(2 * HIDDEN,)).astype(np.float32) * 0.1,
          "v": _rng.normal(size=(HIDDEN, HIDDEN)).astype(np.float32) * 0.3}
XS = _rng.normal(size=(STEPS, BATCH, INPUTS)).astype(np.float32)
TARGETS = _rng.normal(size=(BATCH, HIDDEN)).astype(np.float32)


def _gru_loss(L):
    """A GRU-like recurrence: gates from a product of the input and of the state, the new state, a loss."""
    def loss(params, xs, targets):
        def step(h, x):
            gates = L.nn.sigmoid(x @ params["w"] + h @ params["u"] + params["b"])
            z, r = gates[:, :HIDDEN], gates[:, HIDDEN:]
            h = (1 - z) * h + z * L.numpy.tanh((r * h) @ params["v"] + x.sum(axis=1, keepdims=True))
            return h, h.mean(axis=1)
        h, ys = L.lax.scan(step, L.numpy.zeros((xs.shape[1], HIDDEN), xs.dtype), xs)
        return ((h - targets) ** 2).mean() + (ys ** 2).mean()
    return loss


def _split(L, devices, value, spec):
    mesh = L.sharding.Mesh(np.array(L.devices()[:devices]), ("data",))
    return L.device_put(value, L.sharding.NamedSharding(mesh, L.sharding.PartitionSpec(*spec)))


def _joined_calls(monkeypatch):
    """The outcome of every joined_scan.run call (True: the loop ran joined)."""
    calls = []
    original = joined_scan.run

    def spy(*args, **params):
        result = original(*args, **params)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(joined_scan, "run", spy)
    return calls


def _step(L, devices):
    xs, targets = _split(L, devices, XS, (None, "data")), _split(L, devices, TARGETS, ("data",))
    params = {k: _split(L, devices, v, ()) for k, v in PARAMS.items()}
    return L.jit(L.value_and_grad(_gru_loss(L))), (params, xs, targets)


@pytest.mark.parametrize("devices", [2, 4])
def test_a_gru_over_a_split_batch_runs_joined_with_jaxs_values(devices, monkeypatch):
    calls = _joined_calls(monkeypatch)
    step, args = _step(meshax, devices)
    for _ in range(2):
        ours = step(*args)
    assert calls and all(calls), calls  # the forward loop and the gradient's loop, both calls
    theirs = jax.jit(jax.value_and_grad(_gru_loss(jax)))(*_step(jax, devices)[1])
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)
    monkeypatch.setattr(joined_scan, "run", lambda *args, **params: None)  # the per-iteration path
    step, args = _step(meshax, devices)
    before = step(*args)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(before), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        assert a.sharding == b.sharding


def test_eager_scan_results_are_placed_as_the_per_iteration_path_places_them(monkeypatch):
    """Outside jit too: the carry and the stacked outputs split as the per-iteration loop leaves them."""
    calls = _joined_calls(monkeypatch)
    xs = _split(meshax, 2, XS, (None, "data"))
    w = _split(meshax, 2, PARAMS["w"][:, :HIDDEN], ())

    def scan(L, xs, w):
        return L.lax.scan(lambda h, x: (L.numpy.tanh(h + x @ w), (h * 2, x.sum(axis=1))),
                          L.numpy.zeros((BATCH, HIDDEN), np.float32), xs)

    ours = scan(meshax, xs, w)
    assert calls == [True]
    monkeypatch.setattr(joined_scan, "run", lambda *args, **params: None)
    before = scan(meshax, xs, w)
    theirs = scan(jax, XS, PARAMS["w"][:, :HIDDEN])
    for a, b, c in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(before),
                       jax.tree_util.tree_leaves(theirs), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=2e-5, atol=2e-6)
        assert a.sharding == b.sharding, (a.sharding, b.sharding)


@pytest.mark.parametrize("case", ["sum-over-the-batch", "product-over-the-batch", "split-along-the-loop"])
def test_loops_whose_rows_mix_run_per_iteration_with_jaxs_values(case, monkeypatch):
    """A carry summed over the split rows, a product contracting them, or xs split along the loop's own dimension:
    the loop runs as before (joined_scan declines), with JAX's values."""
    calls = _joined_calls(monkeypatch)
    spec = ("data",) if case == "split-along-the-loop" else (None, "data")

    def loop(L, xs):
        def step(c, x):
            if case == "product-over-the-batch":
                return L.numpy.tanh(c + (x.T @ x).sum(axis=0)), x
            return L.numpy.tanh(c + x.sum(axis=0)), x * 2  # (a plain running sum leaves the loop: scan_hoist.py)
        return L.lax.scan(step, L.numpy.zeros((INPUTS,), np.float32), xs)

    xs = XS[:8] if case == "split-along-the-loop" else XS
    ours = meshax.jit(lambda v: loop(meshax, v))(_split(meshax, 2, xs, spec))
    assert calls and not any(calls), calls
    theirs = jax.jit(lambda v: loop(jax, v))(xs)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)
