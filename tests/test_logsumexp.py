"""jax.nn.logsumexp against real JAX: values, gradients, Hessians, return_sign, where=, zero scales in b."""
from __future__ import annotations

import numpy as np
import pytest

from differential import MODES, check_case

A = np.array([[60.0, -60.0, 1.5], [-3.0, 2.0, 0.25]], np.float32)
B_ZEROS = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]], np.float32)
B_SIGNED = np.array([[1.0, -3.0, 0.5], [-1.0, 2.0, 0.0]], np.float32)
WHERE = np.array([[True, False, True], [False, True, True]])


def lse(L, a, **kw):
    return L.nn.logsumexp(a, **kw)


CASES = {
    # The silent wrong value this file guards against: a huge entry whose scale is 0 took part in the shift.
    "b_zero_huge_entry": (lambda L, a, b: lse(L, a, b=b), (np.array([60.0, -60.0], np.float32),
                                                            np.array([0.0, 1.0], np.float32))),
    "b_zeros_axis1": (lambda L, a, b: lse(L, a, axis=1, b=b), (A, B_ZEROS)),
    "b_zeros_axis0_keepdims": (lambda L, a, b: lse(L, a, axis=0, b=b, keepdims=True), (A, B_ZEROS)),
    "b_all_zero": (lambda L, a, b: lse(L, a, b=b * 0), (A, B_ZEROS)),
    "b_scalar": (lambda L, a: lse(L, a, b=2.0), (A,)),
    "b_signed_nan": (lambda L, a, b: lse(L, a, axis=1, b=b), (A, B_SIGNED)),
    "return_sign": (lambda L, a, b: lse(L, a, axis=1, b=b, return_sign=True), (A, B_SIGNED)),
    "return_sign_b_zero": (lambda L, a, b: lse(L, a, axis=None, b=b, return_sign=True), (A, B_ZEROS)),
    "where": (lambda L, a, w: lse(L, a, axis=1, where=w), (A, WHERE)),
    "where_none_selected": (lambda L, a, w: lse(L, a, axis=1, where=w & False), (A, WHERE)),
    "where_and_b": (lambda L, a, b, w: lse(L, a, axis=1, b=b, where=w), (A, B_ZEROS, WHERE)),
    "int_input": (lambda L, a: lse(L, a), (np.array([1, 2, 3], np.int32),)),
    "complex": (lambda L, a: lse(L, a), (np.array([1 + 1j, 2 - 0.5j], np.complex64),)),
    "complex_sign": (lambda L, a: lse(L, a, return_sign=True), (np.array([1 + 1j, 2 - 0.5j], np.complex64),)),
    "grad_b_zeros": (lambda L, a, b: L.grad(lambda x: lse(L, x, b=b))(a),
                     (np.array([60.0, -60.0], np.float32), np.array([0.0, 1.0], np.float32))),
    "grad_wrt_b": (lambda L, a, b: L.grad(lambda s: lse(L, a, b=s))(b), (A, B_ZEROS)),
    "grad_where": (lambda L, a, w: L.grad(lambda x: lse(L, x, where=w).sum())(a), (A, WHERE)),
    "hessian_b_zeros": (lambda L, a, b: L.hessian(lambda x: lse(L, x, b=b))(a),
                        (np.array([60.0, -60.0, 0.5], np.float32), np.array([0.0, 1.0, 1.0], np.float32))),
    "hessian_plain": (lambda L, a: L.hessian(lambda x: lse(L, x))(a), (np.array([1.0, 2.0, -1.0], np.float32),)),
    # optax's sigmoid_focal_loss builds on log_sigmoid = -logsumexp([0, -x]) with b; its Hessian was NaN.
    "hessian_focal_like": (lambda L, x: L.hessian(
        lambda z: L.nn.logsumexp(L.numpy.stack([z * 0, -z]), axis=0, b=L.numpy.stack([z * 0 + 1, z * 0])).sum()
    )(x), (np.array([30.0, -2.0, 0.0], np.float32),)),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_logsumexp_matches_jax(name: str, mode: str) -> None:
    case, args = CASES[name]
    check_case(case, args, mode, rtol=1e-5, atol=1e-6)
