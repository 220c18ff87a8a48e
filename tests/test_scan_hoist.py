"""A loop's running sums of per-step products taken out of it (lax/scan_hoist.py): the weight gradients of a
recurrent network under jit, and scans written with such sums by hand, forward and reverse, eagerly, under jit and
over a mesh, against JAX; and the loops it must leave alone."""
from __future__ import annotations

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax._src.interpreters.fusion import executable

RNG = np.random.default_rng(5)
XS = RNG.standard_normal((7, 4, 3)).astype(np.float32)  # steps, rows, inputs
W = {"wx": RNG.standard_normal((3, 6)).astype(np.float32) * 0.5,
     "wh": RNG.standard_normal((6, 6)).astype(np.float32) * 0.5, "b": np.zeros(6, np.float32)}


def _rnn_loss(lib, np_, params, xs):
    def cell(h, x):
        h = np_.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
        return h, h
    h, hs = lib.lax.scan(cell, np_.zeros((xs.shape[1], 6), np.float32), xs)
    return np_.sum(hs ** 2) + np_.sum(h)


def _sums(lib, np_, reverse):
    """A scan that sums x_t^T @ f(x_t) and the rows of f(x_t) in two carries, and carries a third value along."""
    def body(carry, x):
        outer, rows, h = carry
        f = np_.sin(x) * 2.0 + h[0]
        return (outer + x.T @ f, rows + np_.sum(f, axis=0), h * 0.5 + 1.0), f[:, 0]
    return lambda xs, start: lib.lax.scan(body, (start, np_.zeros(3, np.float32), np_.ones((1, 3), np.float32)), xs,
                                          reverse=reverse)


def _scans(function, *args):
    """The scan equations of the program a jitted `function` runs."""
    (call,) = [eq for eq in meshax.make_jaxpr(function)(*args).jaxpr.equations if eq.primitive.name == "jit"]
    return [eq for eq in executable(call.params["jaxpr"]).equations if eq.primitive.name == "scan"]


def _close(ours, theirs):
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)


def test_an_rnns_weight_gradients_are_summed_after_its_backward_loop():
    grad = meshax.jit(meshax.grad(lambda p, xs: _rnn_loss(meshax, jnp, p, xs)))
    theirs = jax.grad(lambda p, xs: _rnn_loss(jax, jjnp, p, xs))(W, XS)
    _close(grad(W, XS), theirs)
    backward = [eq for eq in _scans(grad, W, XS) if eq.params["reverse"]]
    assert len(backward) == 1 and backward[0].params["num_carry"] == 1  # only the hidden state's cotangent
    traced = [eq for eq in meshax.make_jaxpr(grad)(W, XS).jaxpr.equations[0].params["jaxpr"].equations
              if eq.primitive.name == "scan" and eq.params["reverse"]]
    assert traced[0].params["num_carry"] == 4  # the printed program keeps JAX's loop


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("jitted", [False, True])
def test_hand_written_running_sums_are_jaxs(reverse, jitted):
    start = RNG.standard_normal((3, 3)).astype(np.float32)
    ours = _sums(meshax, jnp, reverse)
    _close((meshax.jit(ours) if jitted else ours)(XS, start), _sums(jax, jjnp, reverse)(XS, start))
    if jitted:
        (loop,) = _scans(meshax.jit(ours), XS, start)
        assert loop.params["num_carry"] == 1  # the two sums left the loop, the third carry stayed


def test_an_empty_loop_leaves_the_sums_at_their_start():
    start = RNG.standard_normal((3, 3)).astype(np.float32)
    empty = XS[:0]
    _close(meshax.jit(_sums(meshax, jnp, False))(empty, start), _sums(jax, jjnp, False)(empty, start))


def test_a_mesh_split_loop_sums_across_devices():
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:4]), ("d",))
    rows = meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec(None, "d"))
    whole = meshax.sharding.NamedSharding(mesh, meshax.sharding.PartitionSpec())
    xs = RNG.standard_normal((5, 8, 3)).astype(np.float32)
    grad = meshax.jit(meshax.grad(lambda p, xs: _rnn_loss(meshax, jnp, p, xs)))
    ours = grad(meshax.device_put(W, whole), meshax.device_put(xs, rows))
    _close(ours, jax.grad(lambda p, xs: _rnn_loss(jax, jjnp, p, xs))(W, xs))


def test_sums_read_inside_the_loop_or_of_constants_stay_in_it():
    """A carry the body also reads otherwise, a sum of products with a loop constant or a value computed from
    constants only (nothing per step to stack), or a product with batch dimensions: the loop keeps them."""
    weight = RNG.standard_normal((3, 3)).astype(np.float32)

    def program(lib, np_):
        def body(carry, x):
            read, constant, invariant, batched = carry
            read = read + x.T @ np_.tanh(x @ read)
            constant = constant + weight @ np_.cos(x.T @ x)
            invariant = invariant + (weight * 2.0) @ np_.cos(x.T @ x)
            batched = batched + lib.lax.dot_general(x[None], x[None], (((1,), (1,)), ((0,), (0,))))
            return (read, constant, invariant, batched), x[0]
        return lambda xs: lib.lax.scan(body, (np_.eye(3, dtype=np.float32), np_.zeros((3, 3), np.float32),
                                              np_.zeros((3, 3), np.float32), np_.zeros((1, 3, 3), np.float32)), xs)

    ours = meshax.jit(program(meshax, jnp))
    _close(ours(XS), program(jax, jjnp)(XS))
    (loop,) = _scans(ours, XS)
    assert loop.params["num_carry"] == 4


def test_factors_much_larger_than_the_walked_inputs_stay_in_the_loop(monkeypatch):
    """Stacking a factor ten times the size of the rows the loop walks would take that much more memory: past
    the allowance, the sum stays in the loop (and with the allowance, it leaves it)."""
    from meshax._src.lax import scan_hoist

    def program(lib, np_):
        def body(acc, x):
            return acc + x.T @ np_.tile(np_.sin(x), (1, 10)), x[0]
        return lambda xs: lib.lax.scan(body, np_.zeros((3, 30), np.float32), xs)

    theirs = program(jax, jjnp)(XS)
    for allowance, carries in ((0, 1), (1 << 20, 0)):
        monkeypatch.setattr(scan_hoist, "EXTRA_STACKED_BYTES", allowance)
        ours = meshax.jit(program(meshax, jnp))
        _close(ours(XS), theirs)
        (loop,) = _scans(ours, XS)
        assert loop.params["num_carry"] == carries


def _body_products(loop):
    return [eq for eq in loop.params["jaxpr"].equations if eq.primitive.name == "dot_general"]


@pytest.mark.parametrize("reverse", [False, True])
def test_products_of_rows_and_weights_are_computed_before_the_loop(reverse):
    """x_t @ W with W the same every step becomes xs @ W before the loop, walked as one more input; h @ W (of a
    carry) stays. Eagerly, under jit and in shard_map, against JAX."""
    def program(lib, np_):
        def cell(h, x):
            h = np_.tanh(x @ W["wx"] + h @ W["wh"])
            return h, (x @ W["wx"]) * 2.0
        return lambda xs: lib.lax.scan(cell, xs[0] @ W["wx"] * 0.0, xs, reverse=reverse)  # varying in shard_map

    theirs = program(jax, jjnp)(XS)
    _close(program(meshax, jnp)(XS), theirs)
    jitted = meshax.jit(program(meshax, jnp))
    _close(jitted(XS), theirs)
    (loop,) = _scans(jitted, XS)
    assert len(loop.params["jaxpr"].invars) == 5  # two weights, the carry, the row, its product (once: CSE)
    assert len(_body_products(loop)) == 1  # h @ wh
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:4]), ("d",))
    P = meshax.sharding.PartitionSpec
    mapped = meshax.jit(meshax.shard_map(program(meshax, jnp), mesh=mesh, in_specs=P(None, "d"),
                                         out_specs=P(None, "d")))
    xs = RNG.standard_normal((7, 8, 3)).astype(np.float32)
    _close(mapped(xs), jax.shard_map(program(jax, jjnp), mesh=jax.sharding.Mesh(np.array(jax.devices()[:4]), ("d",)),
                                     in_specs=jax.P(None, "d"), out_specs=jax.P(None, "d"))(xs))


def test_products_that_are_not_row_times_weight_stay_in_the_loop(monkeypatch):
    """A weight times a row (the other order), a row times a value computed in the body from the carry, a batched
    product, and (with no memory allowance) a row times a weight: each stays a product of the loop's body."""
    from meshax._src.lax import scan_hoist

    weight = RNG.standard_normal((4, 4)).astype(np.float32)

    def program(lib, np_):
        def body(h, x):
            swapped = weight @ x
            computed = x @ np_.tanh(W["wh"][:3] + h)
            batched = lib.lax.dot_general(x[None], x[None], (((1,), (1,)), ((0,), (0,))))
            return h + swapped[0, 0] + computed[0, 0] + batched[0, 0, 0], (x @ W["wx"])[0]
        return lambda xs: lib.lax.scan(body, np.float32(0), xs)

    theirs = program(jax, jjnp)(XS)
    for allowance, products in ((1 << 20, 3), (-(1 << 30), 4)):
        monkeypatch.setattr(scan_hoist, "EXTRA_STACKED_BYTES", allowance)
        ours = meshax.jit(program(meshax, jnp))
        _close(ours(XS), theirs)
        (loop,) = _scans(ours, XS)
        assert len(_body_products(loop)) == products


def test_computations_of_loop_invariant_inputs_are_made_once_before_the_loop():
    """A weight's transpose, a constant's tanh and a mask made in the body are computed before the loop (the
    body keeps only what changes per step); the gradient's loop reads the transposed weight the forward loop saved
    as loop-invariant, not as stacked copies. Against JAX, eagerly, under jit and in shard_map."""
    def loss(lib, np_):
        def cell(h, x):
            scale = np_.tanh(W["wh"][:3, :3]).sum()
            h = np_.tanh(h @ W["wh"].T * scale + x @ W["wx"])
            return h, h * (np_.arange(6) < 3)
        return lambda w, xs: (lambda out: (out[0] ** 2).sum() + out[1].sum())(
            lib.lax.scan(lambda h, x: cell(h @ w, x), xs[0] @ W["wx"] * 0.0, xs))

    w = np.eye(6, dtype=np.float32)
    theirs = jax.value_and_grad(loss(jax, jjnp))(w, XS)
    _close(meshax.value_and_grad(loss(meshax, jnp))(w, XS), theirs)
    jitted = meshax.jit(meshax.value_and_grad(loss(meshax, jnp)))
    _close(jitted(w, XS), theirs)
    forward, backward = _scans(jitted, w, XS)
    for loop in (forward, backward):
        names = {eq.primitive.name for eq in loop.params["jaxpr"].equations}
        assert not names & {"transpose", "iota", "lt", "slice"}, names  # made before the loop
        assert all(x.aval.shape[:1] == (7,) for x in loop.inputs[loop.params["num_consts"] + loop.params["num_carry"]:])
    stacked = [y.aval.shape for y in forward.outputs[forward.params["num_carry"]:]]
    assert (7, 6, 6) not in stacked, stacked  # no per-step copy of the (6, 6) weights
    mesh = meshax.sharding.Mesh(np.array(meshax.devices()[:2]), ("d",))
    P = meshax.sharding.PartitionSpec
    def mapped(lib, np_, mesh, P):
        return lib.jit(lib.shard_map(lambda w, xs: loss(lib, np_)(w, xs)[None], mesh=mesh,
                                     in_specs=(P(), P(None, "d")), out_specs=P("d")))
    _close(mapped(meshax, jnp, mesh, P)(w, XS),
           mapped(jax, jjnp, jax.sharding.Mesh(np.array(jax.devices()[:2]), ("d",)), jax.P)(w, XS))
