"""codegen.py and codegen_loops.py: a program (and a scan's or while loop's whole loop) written out as Python must
give, bit for bit and type for type, what walking its steps gives (NumpyProgram.interpret, and the loops run one
body call per iteration), run after run, without writing into its inputs."""
import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax._src.interpreters import numpy_eval, numpy_program
from meshax._src.interpreters.numpy_program import NumpyProgram
from meshax._src.lax import control_flow


def _walked(monkeypatch):
    """Make every program walk its steps and every loop call its body once per iteration (the reference)."""
    monkeypatch.setattr(NumpyProgram, "__call__", lambda self, consts, args: self.interpret(consts, args))
    monkeypatch.setattr(control_flow, "scan_function", lambda *a, **k: None)
    monkeypatch.setattr(control_flow, "while_function", lambda *a, **k: None)


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        assert g.tobytes() == w.tobytes()


def _mlp_grads(w, x):
    def loss(w):
        h = jnp.maximum(x @ w + 1.0, 0.0)
        return jnp.mean((h * 0.5 - 1.0) ** 2)
    return meshax.value_and_grad(loss)(w)


def _scan_several(w, x):
    def body(carry, row):
        a, b = carry
        a = jnp.tanh(a * 0.5 + row @ w)
        b = b + a.sum()
        return (a, b), (a * 2.0, b, row)
    return lax.scan(body, (jnp.zeros(w.shape[1], w.dtype), jnp.float32(0)), x)


def _nested(w, x):
    def outer(carry, row):
        inner, ys = lax.scan(lambda c, r: (c + r * carry.sum(), c * 2.0), row, jnp.stack([row, -row]))
        return carry + inner @ w, ys
    return lax.scan(outer, jnp.ones(w.shape[1], w.dtype), x, reverse=True)


def _old_carry_as_y(w, x):
    """A y that is the carry's value before the step (written before the carry moves on)."""
    return lax.scan(lambda c, row: (c + row, c), jnp.zeros(x.shape[1], x.dtype), x)


PROGRAMS = {
    "elementwise chain, small": (lambda w, x: ((w * 2.0 + 1.0) * 3.0 - w, jnp.exp(-w) + 1.0), [(8, 8), (2,)]),
    "elementwise chain, large": (lambda w, x: (jnp.where(w > 0, w * 2.0, -w) + 1.0, x), [(256, 256), (2, 2)]),
    "dot, reductions, transpose": (lambda w, x: (x @ w, w.sum(axis=0), w.max(), (x @ w).T * 2.0), [(6, 3), (4, 6)]),
    "training step": (_mlp_grads, [(16, 8), (4, 16)]),
    "several results of one equation": (lambda w, x: (jnp.split(w, 2), lax.sort((x, -x), num_keys=1)),
                                         [(4, 2), (6,)]),
    "literals, outputs that are inputs or constants, repeated": (
        lambda w, x: (w, 2.0, x + 0.0, jnp.arange(3), w, w * 1.0), [(2,), (2,)]),
    "unused results": (lambda w, x: jnp.linalg.qr(w)[0] + lax.sort((x, -x), num_keys=1)[1][0], [(3, 3), (4,)]),
    "dtype conversions": (lambda w, x: ((w * 3).astype(np.int32) // 2 + 7, x.astype(np.int8) * 2,
                                        (w > 0).astype(np.float16) + 1, w.astype(np.float64) * 3), [(5, 3), (3,)]),
    "comparisons, predicates, integer and complex arithmetic": (
        lambda w, x: (w > x[0], jnp.isnan(w / w), (w * 3).astype(np.int32) % 4, (w * 5).astype(np.int32) // 3,
                      jnp.abs((w + 1j * w).astype(np.complex64)), w == w, jnp.floor(w), jnp.sign(w), w <= x,
                      jnp.logical_not(w > 0) & (x > 0)), [(4, 3), (3,)]),
    "equations without inputs": (lambda w, x: (lax.iota(np.int32, 4) + 1, lax.broadcasted_iota(np.float32, (2, 3), 1)
                                               * w[0]), [(2,), (1,)]),
    "scalars": (lambda w, x: (w.sum() * 2.0 + 1.0, x[0] * x[1] - 3.0), [(3,), (2,)]),
    "scan with several carries, xs and ys": (_scan_several, [(3, 3), (5, 3)]),
    "nested reverse scans": (_nested, [(3, 3), (4, 3)]),
    "scan over 1-d xs": (lambda w, x: lax.scan(lambda c, r: (c * r + 1.0, c - r), jnp.float32(1), x), [(2,), (7,)]),
    "scan of length 0": (lambda w, x: lax.scan(lambda c, r: (c + r, c), w, x[:0]), [(3,), (4, 3)]),
    "a carry's old value as a y": (_old_carry_as_y, [(2,), (6, 3)]),
    "grad of scan": (lambda w, x: meshax.grad(lambda w: _scan_several(w, x)[1][0].sum())(w), [(3, 3), (5, 3)]),
    "fori_loop": (lambda w, x: lax.fori_loop(0, 5, lambda i, v: v * 1.5 + i, w), [(3,), (1,)]),
    "while_loop": (lambda w, x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1 + x), (0, w)),
                   [(3,), (3,)]),
    "products of matrices, transposed or strided": (
        lambda w, x: (x @ w, x.T @ x, w @ w.T, lax.dot_general(w, x, (((0,), (1,)), ((), ()))), x[:, ::2] @ w[::2],
                      x.astype(np.float64) @ w.astype(np.float64), x.astype(np.int32) @ (w * 3).astype(np.int32),
                      lax.dot_general(x, w, (((1,), (0,)), ((), ())), preferred_element_type=np.float64)),
        [(6, 3), (4, 6)]),
    "products of matrices inside a scan": (
        lambda w, x: lax.scan(lambda c, r: (jnp.tanh(r @ w + c @ w.T @ w), r.T @ c), x[0] * 0.5, x),
        [(3, 3), (5, 2, 3)]),
    "cond inside scan": (lambda w, x: lax.scan(lambda c, r: (lax.cond(r.sum() > 0, lambda: c + r, lambda: c - r),
                                                              c.sum()), w, x), [(3,), (6, 3)]),
}


def _inputs(shapes):
    rng = np.random.default_rng(2)
    return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_generated_code_gives_the_walked_programs_values(name, monkeypatch):
    function, shapes = PROGRAMS[name]
    args = _inputs(shapes)
    copies = [a.copy() for a in args]
    closed = meshax.make_jaxpr(function)(*args)
    with monkeypatch.context() as patched:
        _walked(patched)
        want = numpy_eval.run(closed.jaxpr, closed.consts, args)
    for _ in range(3):  # made once, run again and again
        _same(numpy_eval.run(closed.jaxpr, closed.consts, args), want)
    _same(args, copies)  # no input was written into


@pytest.mark.parametrize("name", ["training step", "scan with several carries, xs and ys", "grad of scan",
                                  "products of matrices, transposed or strided", "products of matrices inside a scan"])
def test_jit_eager_and_grad_match_jax(name):
    """Under jit (the one-device fast path, generated code) the values are JAX's."""
    import jax

    function, shapes = PROGRAMS[name]
    args = _inputs(shapes)
    ours = meshax.tree_util.tree_leaves(meshax.jit(function)(*args))
    with jax.default_device(jax.devices("cpu")[0]):
        theirs = jax.tree_util.tree_leaves(jax.jit(_as_jax(function))(*args))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)


def _as_jax(function):
    """`function` with meshax's modules swapped for JAX's (the programs above use meshax, jnp and lax)."""
    import jax
    import jax.numpy as jjnp

    globals_ = dict(function.__globals__, meshax=jax, jnp=jjnp, lax=jax.lax)
    for helper in ("_mlp_grads", "_scan_several"):
        globals_[helper] = type(function)(globals()[helper].__code__, globals_)
    return type(function)(function.__code__, globals_, function.__name__, function.__defaults__, function.__closure__)


def test_an_elementwise_chain_writes_into_its_dying_intermediates(monkeypatch):
    """x * 2 + 1, then * 3 (as NumPy calls, not a compiled loop): the add and the multiply write into the buffer of
    the product they consume."""
    monkeypatch.setattr(numpy_program, "SMALL_LOOP_MIN_OPERATIONS", 10 ** 9)
    closed = meshax.make_jaxpr(lambda x: ((x * 2.0 + 1.0) * 3.0,))(np.ones((4, 4), np.float32))
    source = numpy_eval.program(closed.jaxpr).generated().source
    assert source.count(", out=") == 2, source


def test_a_buffer_with_a_view_is_not_written_into():
    """A product also read by a reshape (a view of it may live on) is never an output buffer."""
    def function(x):
        y = x * 2.0
        return y.reshape(-1)[:3], y + 1.0

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    closed = meshax.make_jaxpr(function)(x)
    program = numpy_eval.program(closed.jaxpr)
    assert "out=" not in program.generated().source
    _same(program.generated()(closed.consts, [x]), program.interpret(closed.consts, [x]))


def test_a_cluster_of_one_equation_runs_as_its_numpy_call():
    """A fused cluster of one equation over 65536 elements (above the executor's min_elements) is that equation's
    step in the program, with NumPy's values; a cluster of two stays one fused call."""
    a, b = _inputs([(256, 256), (256, 256)])
    closed = meshax.make_jaxpr(lambda a, b: (a + b, a * b - 1.0))(a, b)
    program = numpy_eval.program(closed.jaxpr)
    assert ["fused" in getattr(step[0], "__qualname__", "") for step in program.steps] == [False, True]
    _same(program.generated()(closed.consts, [a, b]), [a + b, a * b - np.float32(1.0)])


def test_programs_and_loops_are_written_out_from_their_second_run():
    """A program's first run walks its steps; from the second on, its generated function runs."""
    closed = meshax.make_jaxpr(lambda x: (x * 2.0 + 1.0,))(np.ones(3, np.float32))
    program = numpy_eval.program(closed.jaxpr)
    program(closed.consts, [np.ones(3, np.float32)])
    assert program._generated is None
    program(closed.consts, [np.ones(3, np.float32)])
    assert program._generated is not None


def test_loops_are_generated_whole():
    """From its second run on, a scan's and a while loop's iterations run inside one generated function, not one
    program call each."""
    calls = []
    original = NumpyProgram.__call__

    def counted(self, consts, args):
        calls.append(1)
        return original(self, consts, args)

    closed = meshax.make_jaxpr(lambda w, x: (_scan_several(w, x), lax.while_loop(
        lambda c: c < 100.0, lambda c: c * 2.0 + 1.0, w.sum())))(*_inputs([(3, 3), (50, 3)]))
    numpy_eval.run(closed.jaxpr, closed.consts, _inputs([(3, 3), (50, 3)]))  # the first run walks
    try:
        NumpyProgram.__call__ = counted
        numpy_eval.run(closed.jaxpr, closed.consts, _inputs([(3, 3), (50, 3)]))
    finally:
        NumpyProgram.__call__ = original
    assert len(calls) == 1  # the outer program only


def test_a_product_of_two_matrices_is_one_specialized_call():
    """In a generated program a float32 product of two matrices, each maybe transposed, is a call of the operands
    alone (no parameters, no type check); other products keep the general call."""
    w, x = _inputs([(6, 3), (4, 6)])
    closed = meshax.make_jaxpr(lambda w, x: (x @ w, x.T @ x, w @ w.T, x.astype(np.int32) @ w.astype(np.int32)))(w, x)
    function = numpy_eval.program(closed.jaxpr).generated()
    special = [name for name, value in function.__globals__.items() if getattr(value, "__name__", "") == "product"]
    lines = function.source.splitlines()
    products = [line for line in lines if any(f"= {name}(" in line for name in special)]
    assert len(products) == 3 and not any("typed" in line or "**" in line for line in products), function.source
    _same(function(closed.consts, [w, x]), [x @ w, x.T @ x, w @ w.T, x.astype(np.int32) @ w.astype(np.int32)])


def test_a_scans_ys_computed_by_numpy_calls_are_written_into_their_rows(monkeypatch):
    """A y computed by a direct NumPy call is written straight into its row of the stacked result; a y that is also
    the carry (or another y) is copied there after the step, so no result is a view of another. Bit for bit the
    walked loop's values."""
    def f(w, x):
        def body(c, row):
            a = row * 2.0
            c = c * 0.5 + a
            return c, (a - 1.0, c, a * a, c)
        return lax.scan(body, w, x)

    w, x = _inputs([(3,), (6, 3)])
    closed = meshax.make_jaxpr(f)(w, x)
    loops = []
    original = control_flow.scan_function
    monkeypatch.setattr(control_flow, "scan_function",
                        lambda *a, **k: (lambda made: (loops.append(made), made)[1])(original(*a, **k)))
    numpy_eval.run(closed.jaxpr, closed.consts, [w, x])
    got = numpy_eval.run(closed.jaxpr, closed.consts, [w, x])
    source = next(loop for loop in loops if loop is not None).source
    assert source.count("out=y") == 2 and "y1[i] = " in source and "y3[i] = " in source, source
    _walked(monkeypatch)
    _same(got, numpy_eval.run(closed.jaxpr, closed.consts, [w, x]))
    assert not any(np.shares_memory(a, b) for k, a in enumerate(got) for b in got[k + 1:])


def test_a_scans_carry_and_transcendentals_are_computed_into_their_rows(monkeypatch):
    """A value that is one y and also the carry is computed into its row (the carry then is that row, copied once at
    the end), a transcendental's, a concatenation's and a small cluster's too, and a y that is a row of an x is that
    x: no copy per iteration. Bit for bit the walked loop's values, and no result a view of another."""
    def f(w, x):
        def body(c, row):
            c = jnp.tanh(c * 0.5 + row * w) * 2.0 + 1.0
            return c, (c, row, lax.logistic(row * 3.0 - c), jnp.tanh(row), jnp.concatenate([c, row], axis=1))
        return lax.scan(body, w, x)

    w, x = _inputs([(4, 8), (30, 4, 8)])
    closed = meshax.make_jaxpr(f)(w, x)
    loops = []
    original = control_flow.scan_function
    monkeypatch.setattr(control_flow, "scan_function",
                        lambda *a, **k: (lambda made: (loops.append(made), made)[1])(original(*a, **k)))
    for _ in range(4):  # from the third call on, the small clusters run as compiled loops (SmallClusterCall)
        got = numpy_eval.run(closed.jaxpr, closed.consts, [w, x])
    source = next(loop for loop in loops if loop is not None).source
    assert source.count("out=y") == 4 and "[i] = " not in source.replace("r0 = x0[i]", ""), source
    assert got[2] is not None and np.shares_memory(got[2], x)
    _walked(monkeypatch)
    _same(got, numpy_eval.run(closed.jaxpr, closed.consts, [w, x]))
    others = [got[0], got[1], got[3], got[4], got[5]]
    assert not any(np.shares_memory(a, b) for k, a in enumerate(others) for b in others[k + 1:])
