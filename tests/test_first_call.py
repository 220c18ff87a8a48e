"""A jitted call's dispatch: the cache key read straight from an Array (the same key as from its type: one trace
per signature, retraced when shapes, dtypes, weak types, shardings or the function change), results on one
device as before (values, shardings, commitment, jax_debug_nans), and dtypes.issubdtype's cache; checked against
NumPy and real JAX."""
from __future__ import annotations

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax._src.core import dtypes
from meshax._src.transforms import jit as jit_module
from meshax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402

VALUE = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)


def _step(params, state):
    """An Adam-like update: conversions, integer powers, a pytree of state (the same code runs in JAX)."""
    count, mu = state
    count = count + 1
    grad = 2 * (params - 1.0)
    mu = 0.9 * mu + 0.1 * grad
    scale = 1 - 0.9 ** count.astype(np.float32)
    return params - 0.1 * mu / scale, (count, mu)


def test_one_device_steps_match_jax():
    step = meshax.jit(_step)
    jstep = jax.jit(_step)
    params, state = jnp.asarray(VALUE), (jnp.zeros((), jnp.int32), jnp.zeros_like(VALUE))
    jparams, jstate = jjnp.asarray(VALUE), (jjnp.zeros((), jjnp.int32), jjnp.zeros_like(VALUE))
    for _ in range(5):
        params, state = step(params, state)
        jparams, jstate = jstep(jparams, jstate)
    np.testing.assert_allclose(np.asarray(params), np.asarray(jparams), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(state[1]), np.asarray(jstate[1]), rtol=1e-6)
    assert int(state[0]) == int(jstate[0]) == 5
    assert state[0].dtype == np.int32 and params.dtype == np.float32
    assert isinstance(params.sharding, SingleDeviceSharding)


def test_one_device_results_keep_commitment_and_device():
    device = meshax.devices()[3]
    f = meshax.jit(lambda a, b: (a * b, a + 1.0))
    committed = meshax.device_put(VALUE, device)
    out, plus = f(committed, 2.0)
    assert out.committed and plus.committed
    assert out.sharding == SingleDeviceSharding(device)
    np.testing.assert_array_equal(np.asarray(out), VALUE * 2)
    loose = jnp.asarray(VALUE)  # uncommitted: the results are too, as the eager path makes them
    out, _ = f(loose, 2.0)
    assert not out.committed
    np.testing.assert_array_equal(np.asarray(out), VALUE * 2)


def test_host_scalars_only_run_on_the_default_device():
    f = meshax.jit(lambda a, b: a * b + 1)
    out = f(3.0, 4.0)
    assert float(out) == 13.0
    assert out.sharding == SingleDeviceSharding(meshax.devices()[0])
    assert out.weak_type == jax.jit(lambda a, b: a * b + 1)(3.0, 4.0).weak_type


def test_retraced_when_shapes_or_function_change():
    traces = []

    def f(x):
        traces.append(x.shape)
        return x * 2

    g = meshax.jit(f)
    np.testing.assert_array_equal(np.asarray(g(jnp.ones(3))), np.full(3, 2.0))
    np.testing.assert_array_equal(np.asarray(g(jnp.ones(3))), np.full(3, 2.0))
    np.testing.assert_array_equal(np.asarray(g(jnp.ones((2, 2)))), np.full((2, 2), 2.0))
    assert traces == [(3,), (2, 2)]
    # a new closure over another constant is a new function: its own program, never the old one's
    for k in (1.0, 5.0):
        h = meshax.jit(lambda x, k=jnp.asarray(k): x + k)
        np.testing.assert_array_equal(np.asarray(h(jnp.ones(2))), np.full(2, 1.0 + k))


def test_dtype_and_weak_type_change_retraces():
    g = meshax.jit(lambda x: x / 2)
    assert g(jnp.ones(2, jnp.int32)).dtype == np.float32
    assert g(jnp.ones(2, jnp.float32)).dtype == np.float32
    strong = g(jnp.asarray(3.0, jnp.float32))
    weak = g(3.0)
    assert not strong.weak_type and weak.weak_type


def test_under_transformations_and_over_several_devices():
    f = meshax.jit(lambda x: jnp.sum(jnp.sin(x) * x))
    x = jnp.asarray(VALUE)
    grad = meshax.grad(f)(x)
    jgrad = jax.grad(jax.jit(lambda x: jjnp.sum(jjnp.sin(x) * x)))(jjnp.asarray(VALUE))
    np.testing.assert_allclose(np.asarray(grad), np.asarray(jgrad), rtol=1e-5)
    batched = meshax.vmap(f)(x)
    np.testing.assert_allclose(np.asarray(batched), np.sum(np.sin(VALUE) * VALUE, axis=1), rtol=1e-5)
    mesh = meshax.make_mesh((4, 2), ("a", "b"))
    spread = meshax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), NamedSharding(mesh, P("a", "b")))
    out = meshax.jit(lambda x: x * 2)(spread)
    assert out.sharding.spec == P("a", "b")
    np.testing.assert_array_equal(np.asarray(out), np.arange(32, dtype=np.float32).reshape(8, 4) * 2)


def test_call_signature_is_the_types():
    for value in (jnp.asarray(VALUE), jnp.asarray(3.0), meshax.device_put(VALUE, meshax.devices()[1]),
                  jnp.zeros((2, 0), jnp.bfloat16)):
        assert jit_module._call_signature(value) == jit_module._signature_of(value)


def test_donated_argument_deleted():
    f = meshax.jit(lambda x: x + 1, donate_argnums=0)
    x = jnp.asarray(VALUE)
    out = f(x)
    assert x.is_deleted()
    np.testing.assert_array_equal(np.asarray(out), VALUE + 1)


@pytest.mark.parametrize("kind", [np.floating, np.inexact, np.integer, np.signedinteger, np.unsignedinteger,
                                  np.complexfloating, np.number, np.bool_, np.float32, np.generic])
def test_issubdtype_cached_answers_match_numpy(kind):
    names = ["float32", "float64", "int8", "int32", "uint16", "complex64", "bool", "float16"]
    for _ in range(2):  # the second round answers from the cache
        for name in names:
            assert dtypes.issubdtype(np.dtype(name), kind) == np.issubdtype(np.dtype(name), kind), (name, kind)
    for _ in range(2):  # ml_dtypes' types in NumPy's hierarchy, as JAX places them
        assert dtypes.issubdtype(np.dtype(jnp.bfloat16), np.floating)
        assert not dtypes.issubdtype(np.dtype(jnp.bfloat16), np.integer)
    assert dtypes.issubdtype("float32", np.floating) and not dtypes.issubdtype("int8", np.floating)


def test_debug_nans_checks_a_one_device_program():
    f = meshax.jit(lambda x: jnp.log(x) * 2)
    x = jnp.asarray(np.array([1.0, -1.0], np.float32))
    out = f(x)
    assert np.isnan(np.asarray(out)[1])
    meshax.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(FloatingPointError):
            f(x)
    finally:
        meshax.config.update("jax_debug_nans", False)
    np.testing.assert_array_equal(np.asarray(f(x))[0], 0.0)


def test_one_trace_per_signature_sharding_included():
    traces = []

    def f(x):
        traces.append(1)
        return x + 1

    g = meshax.jit(f)
    mesh = meshax.make_mesh((8,), ("a",))
    for _ in range(2):
        for placed in (jnp.asarray(VALUE[:2]), meshax.device_put(VALUE[:2], meshax.devices()[2]),
                       meshax.device_put(np.zeros((8, 4), np.float32), NamedSharding(mesh, P("a")))):
            out = g(placed)
            np.testing.assert_array_equal(np.asarray(out), np.asarray(placed) + 1)
            assert out.sharding.device_set == placed.sharding.device_set
    assert len(traces) == 3


def test_kernels_asked_for_during_a_first_call_compile_after_it():
    """A kernel requested inside `deferred` (a jitted program's first call) is queued, not compiled, until the
    outermost deferral ends; outside any deferral the compiling thread starts at once."""
    from meshax._src.interpreters import kernel_compiler

    compiler = kernel_compiler.KernelCompiler()
    compiler.background = True
    source = "import numba\n@numba.njit(cache=False)\ndef kernel(start, stop, x):\n    pass\n"
    with kernel_compiler.deferred():
        with kernel_compiler.deferred():
            assert compiler.request("k1", source, [np.zeros(3)]) is None
        assert compiler._worker is None  # the inner block's end does not start it
    assert compiler._worker is not None
    assert compiler.wait(120) and compiler.ready("k1") is not None
