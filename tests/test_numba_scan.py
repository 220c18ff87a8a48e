"""A scan outside a compiled program compiled whole on its own (numba_program.scan_program), against JAX: eagerly,
under jit, with its gradient (the transposed loop), reversed, in shard_map; its ys computed in their rows (a y that
is the carry, one value as two ys, an x's row, the carry's old value, 0-d ys)."""
from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import meshax
from meshax._src.interpreters import numba_program
from meshax.sharding import Mesh, PartitionSpec as P

from compiled_runs import record_compiled_runs
from differential import assert_matches

RNG = np.random.default_rng(1)


@pytest.fixture
def loops(monkeypatch):
    """Scans compiled from their second run, programs never compiled whole; returns the compiled loops' runs."""
    monkeypatch.setattr(numba_program, "LOOP_ASK_ON_RUN", 1)
    monkeypatch.setattr(numba_program, "LOOP_USE_FROM_RUN", 2)
    monkeypatch.setattr(numba_program, "whole_program", lambda jaxpr, compiler: None)
    return record_compiled_runs(monkeypatch)


def floats(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def gru_loss(L, params, xs, h0, reverse=False):
    """A GRU over xs; its ys: the new state (also the carry), the state twice, the x row, the old state, a 0-d."""
    wx, wh, b = params

    def cell(carry, x):
        h, count = carry
        gates = x @ wx + h @ wh + b
        z, r = L.nn.sigmoid(gates[:, :4]), L.nn.sigmoid(gates[:, 4:8])
        n = L.numpy.tanh(gates[:, 8:] * r) + L.numpy.exp(-h * h) * 0.1
        new = (1 - z) * n + z * h
        return (new, count + 1), (new, new * 1.0, x, h, new.sum())

    (h, count), (ys, doubled, rows, olds, sums) = L.lax.scan(cell, (h0, np.int32(0)), xs, reverse=reverse)
    loss = (h ** 2).sum() + (ys * doubled).mean() + rows.sum() * 0.01 + (olds ** 2).mean() + sums.sum() * 0.1
    return loss, (h, count, ys, rows, olds, sums)


def inputs():
    return (floats(3, 12), floats(4, 12), floats(12)), floats(30, 2, 3), floats(2, 4)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_gru_scan_and_its_gradient_match_jax(loops, reverse):
    params, xs, h0 = inputs()

    def case(L):
        return L.jit(L.value_and_grad(lambda p: gru_loss(L, p, xs, h0, reverse), has_aux=True))

    theirs, ours = case(jax)(params), case(meshax)
    for _ in range(3):
        value = ours(params)
    assert len({id(run) for run in loops}) == 2, "the forward and the transposed loops were not both compiled"
    assert_matches(value, theirs, rtol=2e-5, atol=2e-6)


def test_eagerly_the_same_values(loops):
    params, xs, h0 = inputs()  # (each eager scan traces its body afresh: a loop run once is not compiled)
    assert_matches(gru_loss(meshax, params, xs, h0), gru_loss(jax, params, xs, h0), rtol=2e-5, atol=2e-6)


def test_in_shard_map_on_one_device_the_same_values(loops):
    mesh = Mesh(np.array(meshax.devices()[:1]), ("x",))
    params, xs, h0 = inputs()

    def local(xs, h0):
        return gru_loss(meshax, params, xs, h0)[1][0]
    f = meshax.jit(meshax.shard_map(local, mesh=mesh, in_specs=(P(None, "x"), P("x")), out_specs=P("x")))
    for _ in range(3):  # (shard_map's per-device loops run as the scan rule's, not compiled)
        ours = f(xs, h0)
    assert_matches(ours, gru_loss(jax, params, xs, h0)[1][0], rtol=2e-5, atol=2e-6)


def test_a_loop_multiplies_by_a_transposed_constant_made_once_before_it(loops):
    """`h @ w.T` in a loop, and its gradient's `g @ w.T`, multiply by w's transpose made once before the loop,
    C-ordered (OpenBLAS multiplies by a transposed view at half the speed); a transposed carry stays a view, made
    each step. Values against JAX, the compiled loops' sources read back."""
    w, v, h0, xs = floats(6, 6), floats(5, 6), floats(4, 6), floats(12, 4, 5)

    def loss(L, w, v):
        def cell(h, x):
            new = L.numpy.tanh(h @ w.T + x @ v + (h.T @ h).sum() * 0.01)
            return new, new @ w.T
        h, ys = L.lax.scan(cell, h0, xs)
        return (h ** 2).sum() + ys.mean()

    theirs = jax.value_and_grad(lambda w, v: loss(jax, w, v), argnums=(0, 1))(w, v)
    ours = meshax.jit(meshax.value_and_grad(lambda w, v: loss(meshax, w, v), argnums=(0, 1)))
    for _ in range(3):
        value = ours(w, v)
    assert_matches(value, theirs, rtol=2e-5, atol=2e-6)
    loop_sources = {run._source().split("return 1\n", 1)[1] for run in loops}
    assert len(loop_sources) == 2, loop_sources
    for source in loop_sources:
        before, inside = source.split("    for ", 1)
        assert not re.search(r"\ba\d+\.(T|transpose)", inside), source  # no constant transposed in the loop
        assert re.search(r"t\d+\.(T\b|transpose)", inside), source  # the carry's h.T (or its cotangent's)
    backward = next(s for s in loop_sources if "= 11 - t" in s)
    assert re.search(r"= np\.ascontiguousarray\(a\d+\.T\)\n    for ", backward), backward
