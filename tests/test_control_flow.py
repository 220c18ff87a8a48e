"""lax control flow (scan, map, fori_loop, while_loop, cond, switch, associative_scan, select_n) against JAX: values, forward
and reverse derivatives where JAX has them, eagerly, under jit and inside shard_map; JAX's errors."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from jax.sharding import Mesh as JMesh, PartitionSpec as JP

import meshax
import meshax.numpy as jnp
from oracle import assert_same_tree, check_against_jax
from meshax.sharding import Mesh, PartitionSpec as P

XS = np.linspace(-1, 1, 12, dtype=np.float32).reshape(6, 2)
W = np.linspace(-0.5, 0.5, 4, dtype=np.float32).reshape(2, 2)
ROWS = np.arange(16., dtype=np.float32).reshape(8, 2)


def rnn(lib, np_, w, xs):
    def cell(h, x):
        h = np_.tanh(h @ w + x)
        return h, np_.sum(h)
    return lib.lax.scan(cell, np_.zeros(2), xs)


CASES = {
    "scan": lambda lib, np_: rnn(lib, np_, W, XS),
    "scan_reverse": lambda lib, np_: lib.lax.scan(lambda c, x: (c + x, c * x), np_.ones(2), XS, reverse=True),
    "scan_pytree_carry": lambda lib, np_: lib.lax.scan(lambda c, x: ({"a": c["a"] + x, "n": c["n"] + 1}, None),
                                                       {"a": np_.zeros(2), "n": 0}, XS),
    "scan_length_only": lambda lib, np_: lib.lax.scan(lambda c, _: (c * 2., c), 1., None, length=4),
    "scan_grad_params": lambda lib, np_: lib.grad(lambda w: np_.sum(rnn(lib, np_, w, XS)[1] ** 2))(W),
    "scan_grad_xs": lambda lib, np_: lib.grad(lambda xs: np_.sum(rnn(lib, np_, W, xs)[0]))(XS),
    "scan_jvp": lambda lib, np_: lib.jvp(lambda w: rnn(lib, np_, w, XS)[0], (W,), (np_.ones_like(W),)),
    "map": lambda lib, np_: lib.lax.map(lambda x: np_.sin(x) * 2, XS),
    "fori_loop": lambda lib, np_: lib.lax.fori_loop(0, 5, lambda i, v: v * 1.5 + i, np_.ones(2)),
    "fori_loop_grad": lambda lib, np_: lib.grad(lambda w: np_.sum(lib.lax.fori_loop(
        0, 4, lambda i, v: np_.sin(v * w), np_.ones(2))))(1.3),
    "while_loop": lambda lib, np_: lib.lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 1.1),
                                                      (0, np_.ones(3))),
    "while_loop_jvp": lambda lib, np_: lib.jvp(lambda x: lib.lax.while_loop(
        lambda c: c[0] < 4, lambda c: (c[0] + 1, np_.sin(c[1]) * 2), (0, x))[1], (np_.ones(2),), (np_.ones(2),)),
    "cond": lambda lib, np_: lib.lax.cond(XS[0, 0] > 0, lambda x: x * 2, lambda x: x - 1, XS),
    "cond_traced_predicate": lambda lib, np_: lib.lax.cond(np_.sum(np_.asarray(XS)) >= 0, lambda x: x * 2,
                                                           lambda x: x - 1, XS),
    "cond_grad": lambda lib, np_: lib.grad(lambda x: np_.sum(lib.lax.cond(
        np_.sum(x) > 0, lambda x: np_.sin(x), lambda x: x ** 3, x)))(XS),
    "switch": lambda lib, np_: lib.lax.switch(2, [lambda x: x, lambda x: x * 2, lambda x: np_.cos(x)], XS),
    "switch_clamped_index": lambda lib, np_: lib.lax.switch(7, [lambda x: x, lambda x: x * 2], XS),
    "switch_grad": lambda lib, np_: lib.grad(lambda x, i: np_.sum(lib.lax.switch(
        i, [lambda x: x, lambda x: x * x, lambda x: np_.cos(x)], x)))(XS, 1),
    "associative_scan_add": lambda lib, np_: [lib.lax.associative_scan(np_.add, XS[:n]) for n in (1, 2, 5, 6)],
    "associative_scan_reverse_axis": lambda lib, np_: lib.lax.associative_scan(np_.multiply, XS, reverse=True,
                                                                               axis=1),
    "associative_scan_pytree": lambda lib, np_: lib.lax.associative_scan(
        lambda a, b: (a[0] * b[0], a[1] * b[0] + b[1]), (XS, XS + 1)),
    "associative_scan_grad": lambda lib, np_: lib.grad(lambda x: np_.sum(lib.lax.associative_scan(
        np_.multiply, x) ** 2))(XS[:4]),
    "select_n": lambda lib, np_: lib.lax.select_n(np_.asarray([0, 1, 2, 1]), np_.zeros(4), np_.ones(4),
                                                  np_.full(4, 2.)),
}


def _shard_mapped(lib, np_, mesh, spec):
    scan = lib.shard_map(lambda x: lib.lax.scan(lambda c, r: (c + lib.lax.psum(r, "d"), c), np_.zeros(2), x)[0],
                         mesh=mesh, in_specs=spec("d"), out_specs=spec())
    loop = lib.shard_map(lambda x: lib.lax.while_loop(lambda c: np_.sum(c) < 20., lambda c: c * 2 + 1, x),
                         mesh=mesh, in_specs=spec("d"), out_specs=spec("d"))
    grad = lib.grad(lambda x: np_.sum(lib.shard_map(
        lambda x: lib.lax.scan(lambda c, r: (np_.tanh(c + r), c), lib.lax.pcast(np_.zeros(2), "d", to="varying"),
                               x)[0] ** 2,
        mesh=mesh, in_specs=spec("d"), out_specs=spec("d"))(x)))
    return scan(ROWS), loop(ROWS), grad(ROWS / 10)




@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_against_jax(name, jitted):
    check_against_jax(CASES[name], jitted)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_inside_shard_map(jitted):
    ours_mesh = Mesh(np.array(meshax.devices()), ("d",))
    theirs_mesh = JMesh(np.array(jax.devices()[:8]), ("d",))
    wrap = (lambda lib, f: lib.jit(f)) if jitted else (lambda lib, f: f)
    assert_same_tree(wrap(meshax, lambda: _shard_mapped(meshax, jnp, ours_mesh, P))(),
                     wrap(jax, lambda: _shard_mapped(jax, jjnp, theirs_mesh, JP))())


def test_reverse_mode_of_while_loop_is_refused_as_in_jax():
    def f(lib, np_):
        return lib.grad(lambda x: lib.lax.while_loop(lambda c: c < 10., lambda c: c * 2., x))(1.)
    for lib, np_ in ((meshax, jnp), (jax, jjnp)):
        with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
            f(lib, np_)


def test_carry_that_becomes_varying_is_refused_as_in_jax():
    mesh = Mesh(np.array(meshax.devices()), ("d",))
    with pytest.raises(TypeError, match="manual axis types do not match"):
        meshax.shard_map(lambda x: meshax.lax.scan(lambda c, r: (c + r, c), jnp.zeros(2), x)[0], mesh=mesh,
                         in_specs=P("d"), out_specs=P("d"))(ROWS)


def test_body_type_errors():
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        meshax.lax.scan(lambda c, x: (c.astype(np.int32), x), jnp.zeros(2), XS)
    with pytest.raises(TypeError, match="boolean scalar"):
        meshax.lax.while_loop(lambda c: c, lambda c: c, jnp.zeros(2))
    with pytest.raises(TypeError, match="same type structure"):
        meshax.lax.switch(0, [lambda x: x, lambda x: (x, x)], jnp.zeros(2))


def test_make_jaxpr_shows_one_scan_equation():
    text = str(meshax.make_jaxpr(lambda w: rnn(meshax, jnp, w, XS))(W))
    assert text.count("= scan[") == 1 and "tanh" in text


def test_gradient_of_scan_is_a_forward_and_a_reverse_scan():
    text = str(meshax.make_jaxpr(meshax.grad(lambda w: jnp.sum(rnn(meshax, jnp, w, XS)[1] ** 2)))(W))
    assert text.count("= scan[") == 2 and text.count("tanh") <= 2  # not unrolled into its 6 steps
    assert "reverse=True" in text


@pytest.mark.parametrize("reverse", [False, True])
def test_a_scan_over_a_mesh_runs_its_body_fused(reverse, monkeypatch):
    """A jitted scan whose inputs are split over several devices runs eagerly, an iteration at a time: each
    iteration is the body's executable program (lax/loop_steps.py), its elementwise chains one fused operation,
    not one eager operation per equation; values and gradients are JAX's."""
    import jax

    from meshax._src.interpreters import fusion

    def program(lib, np_):
        def loss(w, x):
            def body(carry, row):
                carry = np_.tanh((carry @ w) * 0.5 + row * 2.0 - 1.0) * 0.9 + carry * 0.1
                return carry, carry.sum()
            final, sums = lib.lax.scan(body, np_.zeros_like(x[0]), x, reverse=reverse)
            return np_.sum(final ** 2) + np_.sum(sums)
        return lib.jit(lib.value_and_grad(loss))

    rng = np.random.default_rng(5)
    w, x = rng.standard_normal((3, 3)).astype(np.float32), rng.standard_normal((5, 8, 3)).astype(np.float32)
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:4]), ("d",))
    rows = meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec(None, "d"))
    fused = []
    original = fusion.fused_p.bind
    monkeypatch.setattr(fusion.fused_p, "bind", lambda *a, **k: (fused.append(1), original(*a, **k))[1])
    whole = meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec())
    ours = program(meshax, jnp)(meshax.device_put(w, whole), meshax.device_put(x, rows))
    assert len(fused) >= 2 * 5, "the iterations' elementwise chains did not run fused"
    theirs = program(jax, jax.numpy)(w, x)
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-5)


def test_a_while_loop_over_a_mesh_runs_its_body_fused(monkeypatch):
    """A jitted while loop whose carry is split over several devices runs eagerly, its condition and body each
    their executable program (elementwise chains fused, as a jitted call's), with JAX's values."""
    import jax

    from meshax._src.interpreters import fusion

    def program(lib, np_):
        def run(x):
            def body(c):
                i, v = c
                return i + 1, np_.tanh(v * 0.5 + 1.0) * 2.0 - v * 0.25
            return lib.lax.while_loop(lambda c: c[0] < 6, body, (0, x))
        return lib.jit(run)

    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(8, 4)
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:4]), ("d",))
    fused = []
    original = fusion.fused_p.bind
    monkeypatch.setattr(fusion.fused_p, "bind", lambda *a, **k: (fused.append(1), original(*a, **k))[1])
    ours = program(meshax, jnp)(meshax.device_put(x, meshax.sharding.NamedSharding(mesh, P("d"))))
    assert len(fused) >= 6, "the body's elementwise chain did not run fused"
    theirs = program(jax, jax.numpy)(x)
    assert int(ours[0]) == int(theirs[0]) == 6
    np.testing.assert_allclose(np.asarray(ours[1]), np.asarray(theirs[1]), rtol=2e-6, atol=1e-6)
