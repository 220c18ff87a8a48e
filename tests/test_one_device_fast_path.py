"""Programs on a one-device mesh run as plain NumPy calls once the eager path has shown their results' shardings
(numpy_eval.learn): each result must be what the eager path gives (values, shape, dtype, weak type, sharding,
committed), under jit and in loops."""
import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax._src.interpreters import numpy_eval
from meshax.sharding import NamedSharding, PartitionSpec as P

MESH = meshax.make_mesh((1,), ("data",))


def on_mesh(value, spec):
    return meshax.device_put(np.asarray(value), NamedSharding(MESH, spec))


def scan_sum(x, w):
    def body(carry, row):
        return carry + row @ w, carry.sum()
    return lax.scan(body, jnp.zeros(w.shape[1], x.dtype), x)


PROGRAMS = {
    "matmul, reduction, transpose": lambda x, w: (x @ w, (x * 2).sum(), x.T),
    "scalars and a mask": lambda x, w: (x[0, 0] + 1, x.sum(), x > 0),
    "scan": scan_sum,
    "cond": lambda x, w: lax.cond(x.sum() > 0, lambda: x @ w, lambda: -(x @ w)),
    "integer result": lambda x, w: (jnp.argmax(x, axis=1), x.astype(np.int32) // 3),
}


def describe(result):
    return [(np.asarray(r).tobytes(), r.shape, r.dtype, r.weak_type, r.sharding, r.committed)
            for r in meshax.tree_util.tree_leaves(result)]


def counted(monkeypatch, module, name):
    """The list that gets an entry each time `module.name` (a function) is called from now on."""
    calls = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: calls.append(1) or original(*a))
    return calls


def first_and_second_calls(program, args, monkeypatch, module, name):
    """`program(*args)` twice: (the first call's results, the second's), the second's asserted to call `module.name`
    (the fast path's evaluator) where the first, on the eager path, taught it the results' shardings."""
    first = program(*args)
    runs = counted(monkeypatch, module, name)
    second = program(*args)
    assert runs, "the second call did not take the NumPy path"
    return first, second


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_second_call_is_fast_and_the_same(name, monkeypatch):
    rng = np.random.default_rng(0)
    x = on_mesh(rng.standard_normal((4, 3)).astype(np.float32), P("data"))
    w = on_mesh(rng.standard_normal((3, 2)).astype(np.float32), P())
    first, second = first_and_second_calls(meshax.jit(PROGRAMS[name]), (x, w), monkeypatch, numpy_eval, "run")
    assert describe(second) == describe(first)
    for got, want in zip(meshax.tree_util.tree_leaves(second), meshax.tree_util.tree_leaves(first)):
        assert isinstance(got.sharding, NamedSharding) == isinstance(want.sharding, NamedSharding)


def test_other_shardings_are_learned_apart():
    """The same program called with an input sharded otherwise gets that call's shardings, not the first's."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    program = meshax.jit(lambda a: a * 2)
    rows, cols = on_mesh(x, P("data")), on_mesh(x, P(None, "data"))
    for _ in range(2):
        assert program(rows).sharding.spec == P("data")
        assert program(cols).sharding.spec == P(None, "data")
        assert program(meshax.device_put(x)).sharding == meshax.device_put(x).sharding


def test_explicit_axes_and_the_mesh_in_use():
    """On a one-device mesh of Explicit axes, under `set_mesh`, the second call's results are the first's too."""
    mesh = meshax.make_mesh((1,), ("data",), axis_types=(meshax.sharding.AxisType.Explicit,))
    x = meshax.device_put(np.arange(12, dtype=np.float32).reshape(4, 3), NamedSharding(mesh, P("data")))
    program = meshax.jit(lambda a: (a * 2, a.sum(axis=0), jnp.zeros((2, 3), out_sharding=P(None, None))))
    with meshax.sharding.use_mesh(mesh):
        first, second = describe(program(x)), describe(program(x))
    assert second == first


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_numpy_inputs_take_the_fast_path_with_the_eager_paths_results(name, monkeypatch):
    """NumPy inputs (no Array among them) land on the default device: the program runs as NumPy calls, its
    results what the eager path gives them (values, dtype, weak type, uncommitted on the default device)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2))  # float64: canonicalized to float32, as JAX does
    program = meshax.jit(PROGRAMS[name])
    runs = counted(monkeypatch, numpy_eval, "run")
    fast = program(x, w)
    assert runs, "NumPy inputs did not take the NumPy path"
    monkeypatch.setattr(numpy_eval, "try_primitive", lambda *a: None)
    monkeypatch.setattr("meshax._src.interpreters.eager.try_primitive", lambda *a: None)
    eager = meshax.jit(PROGRAMS[name])(x, w)
    assert describe(fast) == describe(eager)
    assert all(not r.committed and r.sharding.device_set == {meshax.devices()[0]}
               for r in meshax.tree_util.tree_leaves(fast))


def test_custom_derivative_functions_on_host_values_run_as_python():
    """A custom_vjp function called on host values runs as Python, eagerly (its Python control flow on values
    works), also as the forward rule under grad."""
    @meshax.custom_vjp
    def f(x):
        return x * 2.0 if x > 0 else x

    f.defvjp(lambda x: (f(x), None), lambda _, ct: (ct * 3.0,))
    assert float(f(2.0)) == 4.0 and float(f(np.float32(-1.0))) == -1.0
    assert float(meshax.grad(f)(2.0)) == 3.0


def _eager_results(program, *args, monkeypatch):
    """`program(*args)` with the NumPy path turned off (the eager path's results, the reference)."""
    with monkeypatch.context() as patched:
        patched.setattr(numpy_eval, "try_primitive", lambda *a: None)
        patched.setattr("meshax._src.interpreters.eager.try_primitive", lambda *a: None)
        patched.setattr("meshax._src.transforms.jit.direct_call", lambda *a: None)
        return describe(meshax.jit(program)(*args))


def test_a_signatures_direct_call_follows_commitment_and_input_kinds(monkeypatch):
    """A jitted function keeps one direct call per signature (transforms/jit.py, Jitted._bind); inputs of that
    signature that are committed otherwise, or host values of another kind, get the eager path's results, in any
    order of calls."""
    def program(a, s):
        return a * s + 1.0, a.sum()

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    uncommitted, committed = jnp.asarray(x), meshax.device_put(x, meshax.devices()[0])
    assert not uncommitted.committed and committed.committed
    jitted = meshax.jit(program)
    for a, s in [(uncommitted, np.float32(2)), (uncommitted, np.float32(2)), (committed, np.float32(2)),
                 (uncommitted, np.asarray(2, np.float32)), (committed, np.float32(2)), (uncommitted, np.float32(2))]:
        assert describe(jitted(a, s)) == _eager_results(program, a, s, monkeypatch=monkeypatch)


def test_a_direct_call_is_not_taken_under_transformations():
    """Once a signature has its direct call, the jitted function called inside grad, vmap and another jit is traced
    as always (its values JAX's: d/da sum(a * 3 + 1) = 3)."""
    jitted = meshax.jit(lambda a: a * 3.0 + 1.0)
    x = np.arange(4, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(jitted(x)), x * 3 + 1)
    np.testing.assert_array_equal(np.asarray(meshax.grad(lambda a: jitted(a).sum())(x)), np.full(4, 3, np.float32))
    np.testing.assert_array_equal(np.asarray(meshax.vmap(jitted)(x.reshape(2, 2))), (x * 3 + 1).reshape(2, 2))
    np.testing.assert_array_equal(np.asarray(meshax.jit(lambda a: jitted(a) * 2)(x)), (x * 3 + 1) * 2)
    closed = meshax.make_jaxpr(lambda a: jitted(a) * 2)(x)
    assert any(eq.primitive.name == "jit" for eq in closed.jaxpr.equations)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_scans_first_call_runs_its_later_iterations_as_numpy(reverse, monkeypatch):
    """On a one-device mesh the first call of a jitted scan runs eagerly, but only its first iteration equation by
    equation (lax/loop_steps.py): the others run as the body's NumPy program; results, gradients included, are what
    expanding every iteration gives (values, types, shardings)."""
    from meshax._src.lax import control_flow

    def program(x, w):
        def body(carry, row):
            carry = jnp.tanh(carry @ w + row)
            return carry, (carry.sum(), row * 2)
        return lax.scan(body, jnp.zeros(w.shape[1], x.dtype), x, reverse=reverse)

    def step(x, w):
        return program(x, w), meshax.grad(lambda w: program(x, w)[0].sum())(w)

    rng = np.random.default_rng(3)
    x = on_mesh(rng.standard_normal((6, 3)).astype(np.float32), P())
    w = on_mesh(rng.standard_normal((3, 3)).astype(np.float32), P())
    runs = counted(monkeypatch, numpy_eval, "run")
    first = describe(meshax.jit(step)(x, w))
    # two scans (forward, gradient) of 6 iterations: the first (or, while a carry's sharding settles, second)
    # iteration of each is eager
    assert len(runs) >= 2 * 4, "the later iterations did not run as NumPy programs"
    with monkeypatch.context() as patched:
        patched.setattr(control_flow, "plain_eager_call", lambda: False)
        expanded = describe(meshax.jit(step)(x, w))
    assert first == expanded
