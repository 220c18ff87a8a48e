"""meshax.example_libraries.optimizers against jax.example_libraries.optimizers (JAX 0.10, float32).

Each optimizer runs several steps on the same parameter pytree with the same gradients in both libraries,
eagerly and with the update under jit; every leaf of the states must agree to 1e-6 of the leaf's magnitude
(XLA contracts multiply-adds and divides by a scalar through its reciprocal, so exact equality is not
expected). Also: schedules, gradient clipping, state (un)packing, structure errors, a jitted training loop with
meshax.grad, known integer powers (Adam's bias correction) bit for bit, and Adam on a
parameter sharded over 8 devices, whose state keeps the sharding.
"""
from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402
from jax.example_libraries import optimizers as jopt  # noqa: E402

import meshax  # noqa: E402
import meshax.numpy as mnp  # noqa: E402
from meshax.example_libraries import optimizers as mopt  # noqa: E402
from meshax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from meshax.tree_util import tree_leaves, tree_map  # noqa: E402

OPTIMIZERS = [
    ("sgd", (0.1,), {}),
    ("sgd", (lambda i: 0.1 / (1.0 + i),), {}),
    ("momentum", (0.05,), {"mass": 0.9}),
    ("nesterov", (0.05, 0.8), {}),
    ("adagrad", (0.1,), {}),
    ("adagrad", (0.3,), {"momentum": 0.5}),
    ("rmsprop", (0.01,), {}),
    ("rmsprop", (0.01,), {"gamma": 0.7, "eps": 1e-6}),
    ("rmsprop_momentum", (0.01,), {}),
    ("adam", (0.01,), {}),
    ("adam", (0.05,), {"b1": 0.8, "b2": 0.99, "eps": 1e-5}),
    ("adamax", (0.01,), {}),
    ("sm3", (0.1,), {}),
    ("sm3", (0.1,), {"momentum": 0.5}),
]
STEPS = 5


def _params_and_grads(seed: int):
    rng = np.random.default_rng(seed)

    def tree():
        f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
        return {"dense": (f(3, 4), f(4)), "scalar": np.float32(rng.standard_normal()), "conv": [f(2, 3, 2)]}

    params = tree()
    grads = [tree() for _ in range(STEPS)]
    grads[2]["dense"][1][:2] = 0.0  # zero gradients exercise the `where`s of adagrad and sm3
    return params, grads


def assert_trees_close(ours, theirs, rtol=1e-6):
    ours_leaves, theirs_leaves = tree_leaves(ours), jax.tree.leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves)
    for a, b in zip(ours_leaves, theirs_leaves):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * float(np.max(np.abs(b), initial=0.0)))


def _run(lib_opt, wrap, jit, name, args, kwargs, params, grads):
    init, update, get_params = getattr(lib_opt, name)(*args, **kwargs)
    update = jit(update) if jit is not None else update
    state = init(params)
    for i, g in enumerate(grads):
        state = update(i, wrap(g), state)
    return state, get_params(state)


@pytest.mark.parametrize("under_jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name,args,kwargs", OPTIMIZERS, ids=[f"{n}-{k}" for k, (n, _, _) in enumerate(OPTIMIZERS)])
def test_optimizer_matches_jax(name, args, kwargs, under_jit):
    for seed in (0, 1):
        params, grads = _params_and_grads(seed)
        theirs = _run(jopt, lambda t: jax.tree.map(jjnp.asarray, t), jax.jit if under_jit else None,
                      name, args, kwargs, jax.tree.map(jjnp.asarray, params), grads)
        ours = _run(mopt, lambda t: tree_map(mnp.asarray, t), meshax.jit if under_jit else None,
                    name, args, kwargs, tree_map(mnp.asarray, params), grads)
        assert_trees_close(ours[0], theirs[0])  # the whole state
        assert_trees_close(ours[1], theirs[1])  # the parameters
        assert meshax.tree_util.tree_structure(ours[1]) == meshax.tree_util.tree_structure(params)


def test_state_is_a_pytree_of_the_optimizer_state_type():
    state = mopt.adam(0.1)[0]({"a": mnp.ones(3), "b": [mnp.zeros((2, 2))]})
    assert isinstance(state, mopt.OptimizerState)
    leaves, treedef = meshax.tree_util.tree_flatten(state)
    assert len(leaves) == 6
    rebuilt = meshax.tree_util.tree_unflatten(treedef, leaves)
    assert isinstance(rebuilt, mopt.OptimizerState) and rebuilt.tree_def == state.tree_def
    assert isinstance(mopt.sgd(0.1), mopt.Optimizer)


def test_update_rejects_gradients_of_another_structure():
    init, update, _ = mopt.sgd(0.1)
    state = init({"a": mnp.ones(3)})
    with pytest.raises(TypeError, match="does not match the parameter tree"):
        update(0, {"b": mnp.ones(3)}, state)


def test_update_rejects_a_state_of_another_structure():
    @mopt.optimizer
    def shrinking():
        return (lambda x: (x, x), lambda i, g, s: (s[0],), lambda s: s[0])

    init, update, _ = shrinking()
    with pytest.raises(TypeError, match="must return the structure it is given"):
        update(0, [mnp.ones(2)], init([mnp.ones(2)]))


@pytest.mark.parametrize("make,steps", [
    (lambda m: m.constant(0.3), [0, 5]),
    (lambda m: m.exponential_decay(0.5, 10, 0.3), [0, 1, 7, 25]),
    (lambda m: m.inverse_time_decay(0.5, 4, 0.7), [0, 1, 9]),
    (lambda m: m.inverse_time_decay(0.5, 4, 0.7, staircase=True), [0, 3, 4, 9]),
    (lambda m: m.polynomial_decay(1.0, 10, 0.1), [0, 3, 10, 20]),
    (lambda m: m.polynomial_decay(1.0, 10, 0.1, power=2.0), [0, 3, 10, 20]),
    # Not at step 10 or later: JAX's jit contracts 1 - i / 10 into a multiply-add that dips below 0, so 0 ** 2.5 is nan.
    (lambda m: m.polynomial_decay(1.0, 10, 0.1, power=2.5), [0, 3, 9]),
    (lambda m: m.piecewise_constant([2, 5], [1.0, 0.5, 0.1]), [0, 2, 3, 5, 6]),
])
def test_schedules_match_jax(make, steps):
    ours, theirs = make(mopt), make(jopt)
    for i in steps:
        np.testing.assert_allclose(np.asarray(ours(i)), np.asarray(theirs(i)), rtol=1e-6)
        jitted = meshax.jit(ours)(i)
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(jax.jit(theirs)(i)), rtol=1e-6)


def test_make_schedule():
    schedule = lambda i: 2 * i  # noqa: E731
    assert mopt.make_schedule(schedule) is schedule
    assert mopt.make_schedule(0.25)(17) == 0.25
    with pytest.raises(TypeError, match="scalar or a schedule"):
        mopt.make_schedule([0.1, 0.2])


def test_piecewise_constant_rejects_bad_lengths():
    with pytest.raises(ValueError, match="one value more than boundaries"):
        mopt.piecewise_constant([1, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="1-d boundaries and values"):
        mopt.piecewise_constant(1, [0.1, 0.2])


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_l2_norm_and_clip_grads_match_jax(max_norm):
    params, _ = _params_and_grads(3)
    ours, theirs = tree_map(mnp.asarray, params), jax.tree.map(jjnp.asarray, params)
    np.testing.assert_allclose(np.asarray(mopt.l2_norm(ours)), np.asarray(jopt.l2_norm(theirs)), rtol=1e-6)
    assert_trees_close(mopt.clip_grads(ours, max_norm), jopt.clip_grads(theirs, max_norm))
    assert_trees_close(meshax.jit(mopt.clip_grads)(ours, max_norm), jopt.clip_grads(theirs, max_norm))


def test_unpack_and_pack_optimizer_state_round_trip():
    init, update, get_params = mopt.momentum(0.1, 0.9)
    state = update(0, {"w": mnp.ones(3), "b": [mnp.ones(())]}, init({"w": mnp.zeros(3), "b": [mnp.zeros(())]}))
    unpacked = mopt.unpack_optimizer_state(state)
    assert isinstance(unpacked["w"], mopt.JoinPoint) and len(unpacked["w"].subtree) == 2
    (subtree,) = unpacked["b"][0]
    np.testing.assert_array_equal(np.asarray(subtree[1]), 1.0)
    packed = mopt.pack_optimizer_state(unpacked)
    assert packed.tree_def == state.tree_def and packed.subtree_defs == state.subtree_defs
    assert_trees_close(get_params(packed), get_params(state))
    with pytest.raises(TypeError, match="where a JoinPoint was expected"):
        mopt.pack_optimizer_state({"w": mnp.ones(3)})


@pytest.mark.parametrize("under_jit", [False, True], ids=["eager", "jit"])
def test_adam_on_a_sharded_parameter_keeps_its_sharding(under_jit):
    assert meshax.device_count() == 8
    ours_sharding = NamedSharding(Mesh(np.array(meshax.devices()).reshape(4, 2), ("x", "y")), PartitionSpec("x", "y"))
    theirs_sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y")),
                                                 jax.sharding.PartitionSpec("x", "y"))
    rng = np.random.default_rng(5)
    weight = rng.standard_normal((8, 6)).astype(np.float32)
    grads = [rng.standard_normal((8, 6)).astype(np.float32) for _ in range(STEPS)]

    def run(lib_opt, put, jit, sharding):
        init, update, get_params = lib_opt.adam(0.01)
        update = jit(update) if under_jit else update
        state = init({"w": put(weight, sharding), "b": put(weight[0], None)})
        for i, g in enumerate(grads):
            state = update(i, {"w": put(g, sharding), "b": put(g[0], None)}, state)
        return state, get_params(state)

    put_ours = lambda x, s: meshax.device_put(x, s) if s is not None else mnp.asarray(x)  # noqa: E731
    put_theirs = lambda x, s: jax.device_put(x, s) if s is not None else jjnp.asarray(x)  # noqa: E731
    ours_state, ours_params = run(mopt, put_ours, meshax.jit, ours_sharding)
    theirs_state, theirs_params = run(jopt, put_theirs, jax.jit, theirs_sharding)
    assert_trees_close(ours_state, theirs_state)
    assert ours_params["w"].sharding == ours_sharding
    w_state = ours_state.packed_state[1]  # a dict's leaves come in key order: "b", then "w"
    assert [leaf.sharding for leaf in w_state] == [ours_sharding] * 3
    assert len(ours_params["w"].addressable_shards) == 8



@pytest.mark.parametrize("dtype", [np.float32, np.float16, jjnp.bfloat16], ids=str)
def test_float_to_a_known_integer_power_rounds_like_jax(dtype):
    """Adam's bias correction 1 - b**(i+1): JAX multiplies for a known integer exponent (NumPy's pow rounds
    differently)."""
    x = np.random.default_rng(2).uniform(0.5, 1.5, 64).astype(dtype)
    for n in (1, 2, 3, 7, 13, -2, np.int32(5)):
        theirs = np.asarray(jjnp.asarray(x) ** n)
        for ours in (mnp.asarray(x) ** n, meshax.jit(lambda a, n=n: a ** n)(mnp.asarray(x)), mnp.power(x, n)):
            assert np.asarray(ours).dtype == theirs.dtype
            np.testing.assert_array_equal(np.asarray(ours), theirs)


def test_training_loop_with_grad_matches_jax():
    """The usual loop: a jitted step takes meshax.grad of a least-squares loss and applies Adam to it."""
    rng = np.random.default_rng(8)
    xs, ys = rng.standard_normal((16, 3)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    params = {"w": rng.standard_normal(3).astype(np.float32), "b": np.float32(0.0)}

    def train(lib, lib_np, lib_opt):
        init, update, get_params = lib_opt.adam(0.05)

        def loss(p):
            return lib_np.mean((lib_np.asarray(xs) @ p["w"] + p["b"] - lib_np.asarray(ys)) ** 2)

        @lib.jit
        def step(i, state):
            return update(i, lib.grad(loss)(get_params(state)), state)

        state = init(lib.tree_util.tree_map(lib_np.asarray, params))
        for i in range(10):
            state = step(i, state)
        return get_params(state)

    assert_trees_close(train(meshax, mnp, mopt), train(jax, jjnp, jopt), rtol=1e-5)
