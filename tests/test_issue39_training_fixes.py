"""Fixes found by the multi-device training examples (examples/parallel_*.py), each checked against real JAX.

* Reverse-mode differentiation of a `scan` inside `shard_map` whose carry varies over a mesh axis and starts
  from a value that does not depend on the differentiated inputs: the carry's zero tangent must vary too,
  or the carry cotangent is wrongly summed over the axis at every step (GPipe's pipeline loop hit this).
* Gradients through `jax.checkpoint` of bfloat16 values (bfloat16 is inexact, though NumPy's own hierarchy does not
  know it: it was taken for an integer type and given a zero gradient).
* A bfloat16 product is rounded to bfloat16 before anything reads it (ml_dtypes' matmul returns float32; inside
  shard_map a following conversion to float32 read the unrounded product).
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from differential import assert_matches


def pipeline_ring(L, steps: int, add_input: bool):
    """A loop that multiplies its carry by this device's weight and passes it to the next device."""
    def device(w, x):
        def tick(held, _):
            held = (held + x if add_input else held) * w[0]
            return L.lax.ppermute(held, "s", [(0, 1), (1, 2), (2, 3), (3, 0)]), None

        start = L.lax.pcast(L.numpy.ones(2), "s", to="varying")
        held, _ = L.lax.scan(tick, start, L.numpy.arange(steps))
        return L.lax.psum(L.numpy.sum(held ** 2), "s")

    mesh = L.make_mesh((4,), ("s",), axis_types=(L.sharding.AxisType.Auto,), devices=L.devices()[:4])
    P = L.sharding.PartitionSpec
    return L.shard_map(device, mesh=mesh, in_specs=(P("s"), P()), out_specs=P())


W = np.array([[0.5], [0.7], [1.1], [0.9]], np.float32)
X = np.array([0.25, -0.5], np.float32)


@pytest.mark.parametrize("steps", [1, 2, 5])
@pytest.mark.parametrize("add_input", [False, True])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_grad_of_scan_with_varying_carry_in_shard_map(steps, add_input, mode):
    def grads(L):
        fun = L.grad(pipeline_ring(L, steps, add_input), argnums=(0, 1))
        return (L.jit(fun) if mode == "jit" else fun)(L.numpy.asarray(W), L.numpy.asarray(X))

    assert_matches(grads(meshax), grads(jax), rtol=1e-5)


def test_vjp_and_linearize_of_the_ring_agree():
    """The transposed (vjp) and the forward (linearize) derivatives of the same loop agree, as in JAX."""
    fun = pipeline_ring(meshax, 3, True)
    w, x = meshax.numpy.asarray(W), meshax.numpy.asarray(X)
    _, lin = meshax.linearize(lambda w: fun(w, x), w)
    grad = np.asarray(meshax.grad(fun)(w, x))
    for i in range(4):
        e = np.zeros_like(W)
        e[i] = 1
        assert float(lin(meshax.numpy.asarray(e))) == pytest.approx(grad[i, 0], rel=1e-5)
    expected = np.asarray(jax.grad(pipeline_ring(jax, 3, True))(jax.numpy.asarray(W), jax.numpy.asarray(X)))
    np.testing.assert_allclose(grad, expected, rtol=1e-5)


@pytest.mark.parametrize("policy", [None, "nothing_saveable", "dots_with_no_batch_dims_saveable"])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_grad_through_checkpoint_of_bfloat16_values(policy, mode):
    def loss(L, w, x):
        chosen = None if policy is None else getattr(L.checkpoint_policies, policy)
        layer = L.checkpoint(lambda v, x: L.numpy.tanh(x @ v) * 3, policy=chosen)
        bf16 = L.numpy.bfloat16
        return L.numpy.sum(layer(w.astype(bf16), x.astype(bf16)).astype(L.numpy.float32))

    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    x = np.linspace(0.5, -0.5, 8, dtype=np.float32).reshape(2, 4)
    results = []
    for L in (meshax, jax):
        grad = L.grad(lambda w, x: loss(L, w, x))
        results.append(np.asarray((L.jit(grad) if mode == "jit" else grad)(w, x)))
    assert np.abs(results[1]).max() > 0.1
    np.testing.assert_allclose(results[0], results[1], rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_bfloat16_products_are_rounded_inside_shard_map(mode):
    rng = np.random.RandomState(0)
    u, o = rng.randn(4, 6).astype(np.float32), rng.randn(4, 5).astype(np.float32)
    results = []
    for L in (meshax, jax):
        P = L.sharding.PartitionSpec
        mesh = L.make_mesh((2,), ("m",), axis_types=(L.sharding.AxisType.Auto,), devices=L.devices()[:2])
        body = lambda a, b: L.lax.dot_general(a, b, (((0,), (0,)), ((), ()))).T.astype(L.numpy.float32)
        mapped = L.shard_map(body, mesh=mesh, in_specs=(P(), P()), out_specs=P(), check_vma=False)
        run = L.jit(mapped) if mode == "jit" else mapped
        results.append(np.asarray(run(u.astype(L.numpy.bfloat16), o.astype(L.numpy.bfloat16))))
    np.testing.assert_array_equal(results[0], results[1])
