"""numpy_program: a jaxpr run on one device as a flat list of NumPy calls must give, bit for bit and type for type,
what its equations give run one by one (the interpreter it replaced), run after run, and free what it no longer
reads."""
import tracemalloc

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax._src.core.core import impl_rules
from meshax._src.core.jaxpr import Literal
from meshax._src.interpreters import numpy_eval
from meshax._src.interpreters.fusion import executable


def one_by_one(jaxpr, consts, args):
    """The equations of `jaxpr`'s executable program run in order through their implementations (the reference)."""
    jaxpr = executable(jaxpr)
    env = {}

    def read(x):
        return np.asarray(x.value, dtype=x.aval.dtype) if isinstance(x, Literal) else env[x.id]

    for var, value in [*zip(jaxpr.constvars, consts), *zip(jaxpr.invars, args)]:
        env[var.id] = value
    for eq in jaxpr.equations:
        inputs = [read(x) for x in eq.inputs]
        rule = numpy_eval.structured_rules.get(eq.primitive)
        if rule is not None:
            outs = rule(one_by_one, *inputs, **eq.params)
        else:
            extra = {"local_shapes": [v.aval.shape for v in eq.outputs]} if eq.primitive.needs_local_shape else {}
            value = impl_rules[eq.primitive](*inputs, **eq.params, **extra)
            outs = value if eq.primitive.multiple_results else [value]
        for var, value in zip(eq.outputs, outs):
            env[var.id] = np.asarray(value).astype(var.aval.dtype, copy=False)
    return [read(v) for v in jaxpr.outvars]


def loss_and_grads(w, x):
    def loss(w):
        h = jnp.maximum(x @ w + 1.0, 0.0)
        return -jnp.mean(jax_log_softmax(h)[:, 0])
    return meshax.value_and_grad(loss)(w)


def jax_log_softmax(h):
    return h - jnp.log(jnp.sum(jnp.exp(h - h.max(axis=1, keepdims=True)), axis=1, keepdims=True)) - h.max(
        axis=1, keepdims=True)


def scan_body(w, x):
    return lax.scan(lambda c, row: (c * 0.5 + row @ w, c.sum()), jnp.zeros(w.shape[1], w.dtype), x)


PROGRAMS = {
    # small fused clusters (run as their equations), a large one (run fused), literals, reductions, matmuls
    "training step": (loss_and_grads, [(16, 8), (4, 16)]),
    "large cluster": (lambda w, x: (jnp.where(w > 0, w * 2.0, -w) + 1.0, x), [(256, 256), (2, 2)]),
    "weak types and integers": (lambda w, x: ((w * 3).astype(np.int32) // 2 + 7, x.astype(np.int8) * 2),
                                [(5, 3), (3,)]),
    "scan and cond": (lambda w, x: (scan_body(w, x), lax.cond(x.sum() > 0, lambda: w.T, lambda: -w.T)),
                      [(3, 3), (5, 3)]),
    "outputs that are inputs or constants": (lambda w, x: (w, 2.0, x + 0.0, jnp.arange(3)), [(2,), (2,)]),
    "several results of one equation": (lambda w, x: (jnp.split(w, 2), lax.sort((x, -x), num_keys=1)),
                                         [(4, 2), (6,)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_gives_its_equations_values_bit_for_bit(name):
    function, shapes = PROGRAMS[name]
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    closed = meshax.make_jaxpr(function)(*args)
    want = one_by_one(closed.jaxpr, closed.consts, args)
    for _ in range(3):  # made once, run again and again
        got = numpy_eval.run(closed.jaxpr, closed.consts, args)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert (g.shape, g.dtype) == (w.shape, w.dtype)
            assert g.tobytes() == w.tobytes()


def test_literals_are_made_once_and_cannot_be_changed_by_a_run():
    closed = meshax.make_jaxpr(lambda x: x * 3.0 + 1.0)(np.ones(4, np.float32))
    first = numpy_eval.run(closed.jaxpr, closed.consts, [np.ones(4, np.float32)])
    second = numpy_eval.run(closed.jaxpr, closed.consts, [np.full(4, 2.0, np.float32)])
    np.testing.assert_array_equal(first[0], np.full(4, 4.0, np.float32))
    np.testing.assert_array_equal(second[0], np.full(4, 7.0, np.float32))


def test_intermediates_are_freed_after_their_last_reader():
    """A chain of eight non-elementwise steps over 4 MB arrays holds about two of them at once, not all eight."""
    def chain(x):
        for _ in range(8):
            x = jnp.cumsum(x)
        return x

    x = np.zeros(1 << 20, np.float32)
    closed = meshax.make_jaxpr(chain)(x)
    numpy_eval.run(closed.jaxpr, closed.consts, [x])  # made before measuring
    tracemalloc.start()
    try:
        (result,) = numpy_eval.run(closed.jaxpr, closed.consts, [x])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.shape == x.shape and not result.any()
    assert peak < 4 * x.nbytes, f"the chain held {peak / x.nbytes:.1f} arrays at once"
