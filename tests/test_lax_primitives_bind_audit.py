"""The `*_p` names of jax.lax that are meshax's own jaxpr primitives (identity kept for `eqn.primitive is lax.X_p`)
never give a silently different answer when bound with JAX's operands and parameters: every operand set JAX's
bind accepts gives JAX's value and dtype in meshax, or meshax raises; structural primitives whose parameters are
meshax's own raise on JAX's parameters (or agree where the parameter sets coincide)."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import meshax
from meshax._src.compat.jax_names import JAX_NAMES
from meshax._src.lax.jax_primitives_base import JaxParamsPrimitive

R = np.random.default_rng(1)
_F = (R.standard_normal(5) * 2).astype(np.float32)
_G = (np.abs(R.standard_normal(5)) + 0.5).astype(np.float32)
_I = R.integers(-9, 9, 5).astype(np.int32)
_J = R.integers(1, 5, 5).astype(np.int32)  # no zero divisors: see test_integer_division_by_zero
_U = R.integers(0, 2**32, 5, dtype=np.uint64).astype(np.uint32)
_C = (_F + 1j * _G).astype(np.complex64)
_B = _F > 0
OPERAND_SETS = [(_F,), (_G,), (_I,), (_U,), (_C,), (_B,), (_F, _G), (_G, _F), (_I, _J), (_U, _U), (_C, _C),
                (_B, _B), (_F, _G, _G), (_I, _J, _J), (_B, _F, _G)]
IDENTICAL = sorted(n for n in JAX_NAMES["jax.lax"] if n.endswith("_p")
                   and not isinstance(getattr(meshax.lax, n), JaxParamsPrimitive))


def _leaves(x):
    return [np.asarray(v) for v in (x if isinstance(x, (list, tuple)) else [x])]


@pytest.mark.parametrize("name", IDENTICAL)
def test_parameterless_bind_matches_jax_or_raises(name):
    checked = 0
    for args in OPERAND_SETS:
        try:
            theirs = getattr(jax.lax, name).bind(*args)
        except Exception:
            continue
        try:
            ours = getattr(meshax.lax, name).bind(*args)
        except Exception:
            continue
        checked += 1
        t, o = _leaves(theirs), _leaves(ours)
        assert len(t) == len(o), (name, args)
        for a, b in zip(t, o):
            assert (a.dtype, a.shape) == (b.dtype, b.shape), (name, [x.dtype for x in args])
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5, err_msg=f"{name} {[x.dtype for x in args]}")


X = R.standard_normal((3, 4)).astype(np.float32)
STRUCTURAL = {  # name -> (operands, JAX's parameters)
    "dot_general_p": ((X, X), dict(dimension_numbers=(((1,), (1,)), ((), ())), precision=None,
                                   preferred_element_type=None, out_sharding=None)),
    "reduce_sum_p": ((X,), dict(axes=(0,), out_sharding=None)),
    "reduce_max_p": ((X,), dict(axes=(1,), out_sharding=None)),
    "concatenate_p": ((X, X), dict(dimension=1)),
    "reshape_p": ((X,), dict(new_sizes=(4, 3), dimensions=None, sharding=None)),
    "slice_p": ((X,), dict(start_indices=(0, 1), limit_indices=(2, 4), strides=None)),
    "sort_p": ((X,), dict(dimension=0, is_stable=True, num_keys=1)),
    "rev_p": ((X,), dict(dimensions=(0,))),
    "broadcast_in_dim_p": ((X,), dict(shape=(2, 3, 4), broadcast_dimensions=(1, 2), sharding=None)),
    "convert_element_type_p": ((X,), dict(new_dtype=np.dtype(np.int32), weak_type=False, sharding=None)),
    "iota_p": ((), dict(dtype=np.dtype(np.int32), shape=(3, 4), dimension=1, sharding=None)),
    "transpose_p": ((X,), dict(permutation=(1, 0))),
    "argmax_p": ((X,), dict(axes=(1,), index_dtype=np.dtype(np.int32))),
    "cumsum_p": ((X,), dict(axis=1, reverse=True)),
    "cummax_p": ((X,), dict(axis=0, reverse=False)),
    "reduce_precision_p": ((X,), dict(exponent_bits=5, mantissa_bits=10)),
    "integer_pow_p": ((X,), dict(y=3)),
    "exp_p": ((X,), dict(accuracy=None)),
    "rng_uniform_p": ((np.float32(0), np.float32(1)), dict(shape=(3,))),
    "sharding_constraint_p": ((X,), dict(sharding=None, layout=None, context_mesh=None,
                                         unconstrained_dims=frozenset())),
    "bitcast_convert_type_p": ((X,), dict(new_dtype=np.dtype(np.int32))),
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_bind_with_jax_params_matches_or_raises(name):
    args, params = STRUCTURAL[name]
    assert name in IDENTICAL
    try:
        ours = getattr(meshax.lax, name).bind(*args, **params)
    except (TypeError, AttributeError, KeyError):
        return
    if name == "rng_uniform_p":
        pytest.fail("rng_uniform_p should raise: meshax's takes a `stream` parameter")
    theirs = getattr(jax.lax, name).bind(*args, **params)
    for a, b in zip(_leaves(theirs), _leaves(ours)):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), name
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.xfail(strict=True, reason="lax.div/lax.rem of integers by zero: XLA gives -1 and the dividend")
def test_integer_division_by_zero():
    x, y = np.array([7, -7], np.int32), np.array([0, 0], np.int32)
    for name in ("div_p", "rem_p"):
        np.testing.assert_array_equal(np.asarray(getattr(meshax.lax, name).bind(x, y)),
                                      np.asarray(getattr(jax.lax, name).bind(x, y)))
