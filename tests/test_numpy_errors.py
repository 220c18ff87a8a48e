"""NumPy's floating-point warnings stay silent while meshax computes (JAX reports none), eagerly, under jit, in
shard_map, under grad and vmap and on meshax's compute threads; the caller's own NumPy error state is untouched."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp_ref
import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax.sharding import Mesh, PartitionSpec as P

X = np.array([0.0, -1.0, 1000.0, -1000.0, np.inf, -np.inf, np.nan, 2.0], np.float32)


def _program(np_like, nn):
    def program(x):
        return (np_like.log(x), np_like.exp(x), 1.0 / x, np_like.sqrt(x), x * np_like.inf, nn.sigmoid(x),
                np_like.logaddexp(x, x), np_like.arctanh(x), np_like.power(x, -3.0))
    return program


def _expected():
    with jax.default_device(jax.devices("cpu")[0]):
        return [np.asarray(v) for v in _program(jnp_ref, jax.nn)(jnp_ref.asarray(X))]


def _run(how: str):
    program = _program(jnp, meshax.nn)
    if how == "eager":
        return program(jnp.asarray(X))
    if how == "jit":
        return meshax.jit(program)(jnp.asarray(X))
    if how == "vmap":
        return meshax.vmap(program)(jnp.asarray(X))
    mesh = Mesh(np.array(meshax.devices()[:2]), ("x",))
    mapped = meshax.shard_map(program, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
    return meshax.jit(mapped)(jnp.asarray(X))


@pytest.mark.parametrize("how", ["eager", "jit", "vmap", "shard_map"])
def test_no_floating_point_warning_and_jax_values(how: str) -> None:
    state = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy RuntimeWarning fails the test
        got = _run(how)
    for value, expected in zip(got, _expected()):
        np.testing.assert_allclose(np.asarray(value), expected, rtol=2e-6, equal_nan=True)
    assert np.geterr() == state


def test_gradients_warn_of_nothing() -> None:
    def loss(x):
        return jnp.sum(jnp.where(x > 0, jnp.log(x), 0.0))

    x = np.array([0.0, 1.0, 2.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = meshax.jit(meshax.grad(loss))(jnp.asarray(x))
    expected = jax.grad(lambda v: jnp_ref.sum(jnp_ref.where(v > 0, jnp_ref.log(v), 0.0)))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_numpy_outside_meshax_still_warns() -> None:
    meshax.jit(jnp.log)(jnp.zeros(3))
    jnp.log(jnp.zeros(3))
    with pytest.warns(RuntimeWarning, match="divide by zero"):
        np.log(np.zeros(3, np.float32))
