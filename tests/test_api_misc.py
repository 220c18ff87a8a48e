"""Small top-level names against JAX: default_backend, jacobian, named_call/named_scope, disable_jit,
clear_caches, effects_barrier, float0."""
import jax
import jax.numpy as jjnp
import numpy as np

import meshax
import meshax.numpy as jnp
from oracle import assert_same_tree

X = np.linspace(0.1, 1.2, 6, dtype=np.float32).reshape(2, 3)


def test_default_backend_and_float0():
    assert meshax.default_backend() == jax.default_backend() == "cpu"
    assert meshax.float0 == jax.dtypes.float0


def test_jacobian_named_call_and_scope_as_jax():
    def program(lib, np_):
        f = lib.named_call(lambda x: np_.sin(x) * np_.sum(x ** 2), name="f")

        def g(x):
            with lib.named_scope("inner"):
                return f(x)
        return lib.jacobian(g)(X), lib.jit(lib.jacobian(g))(X)

    assert_same_tree(program(meshax, jnp), program(jax, jjnp))


def test_disable_jit_runs_python_each_call_with_the_same_values():
    calls = []

    @meshax.jit
    def f(x):
        calls.append(1)
        return jnp.sin(x) * 2

    expected = np.sin(X) * 2
    np.testing.assert_allclose(np.asarray(f(X)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f(X)), expected, rtol=1e-6)
    assert len(calls) == 1  # traced once
    with meshax.disable_jit():
        np.testing.assert_allclose(np.asarray(f(X)), expected, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(f(X)), expected, rtol=1e-6)
    assert len(calls) == 3  # the Python body ran on each call
    f(X)
    assert len(calls) == 3  # and jit is back


def test_clear_caches_makes_jit_trace_again():
    calls = []

    @meshax.jit
    def f(x):
        calls.append(1)
        return x + 1

    f(X)
    f(X)
    meshax.clear_caches()
    f(X)
    meshax.effects_barrier()
    assert len(calls) == 2
