"""eval_shape and ShapeDtypeStruct (as arguments of eval_shape and make_jaxpr), against real JAX."""
from __future__ import annotations

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp

jax = pytest.importorskip("jax")
import jax.numpy as jjnp  # noqa: E402


def test_repr_and_fields():
    for args, kwargs in [(((3,), np.float32), {}), (((), np.int32), {"weak_type": True}), (((2, 4), "bool"), {})]:
        ours, theirs = meshax.ShapeDtypeStruct(*args, **kwargs), jax.ShapeDtypeStruct(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert (ours.shape, ours.dtype, ours.weak_type, ours.ndim, ours.size) == \
            (theirs.shape, theirs.dtype, theirs.weak_type, theirs.ndim, theirs.size)
        assert ours.sharding is None
    assert meshax.ShapeDtypeStruct((3,), np.float32) == meshax.ShapeDtypeStruct((3,), np.float32)
    assert hash(meshax.ShapeDtypeStruct((3,), np.float32)) == hash(meshax.ShapeDtypeStruct((3,), np.float32))


CASES = [
    (lambda m, x: {"a": x.sum(), "b": x.astype(np.int32)}, lambda m: (m.ShapeDtypeStruct((2, 3), np.float32),)),
    (lambda m, x: x * 2, lambda m: (2.0,)),
    (lambda m, x, y: (x @ y, m.numpy.sin(x)), lambda m: (m.ShapeDtypeStruct((2, 3), np.float32),
                                                            m.ShapeDtypeStruct((3, 5), np.float32))),
    (lambda m, x: [x[None], x.reshape(-1, 1)], lambda m: (m.ShapeDtypeStruct((4,), np.int32),)),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_eval_shape_matches_jax(index):
    fun, make = CASES[index]
    ours = meshax.eval_shape(lambda *a: fun(meshax, *a), *make(meshax))
    theirs = jax.eval_shape(lambda *a: fun(jax, *a), *make(jax))
    assert repr(ours) == repr(theirs)


def test_eval_shape_takes_arrays_kwargs_and_computes_nothing():
    calls = []

    def f(x, *, scale):
        calls.append(type(x).__name__)
        return x * scale

    out = meshax.eval_shape(f, jnp.ones((2, 2)), scale=3)
    assert repr(out) == "ShapeDtypeStruct(shape=(2, 2), dtype=float32)"
    assert calls == ["Tracer"]


def test_make_jaxpr_on_shape_dtype_structs():
    ours = meshax.make_jaxpr(lambda x: x + 1)(meshax.ShapeDtypeStruct((3,), np.float32))
    theirs = jax.make_jaxpr(lambda x: x + 1)(jax.ShapeDtypeStruct((3,), jjnp.float32))
    assert [str(a) for a in ours.in_avals] == ["float32[3]"]  # as JAX prints avals
    assert " ".join(str(ours).split()) == " ".join(str(theirs).split())
