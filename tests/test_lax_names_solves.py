"""jax.lax.custom_linear_solve, custom_root, ragged_dot and ragged_dot_general (issue 40), against JAX: values
eagerly and under jit; derivatives by implicit differentiation (grad, jacfwd, and grad of vmap, which must not
differentiate through the solver's while loop); vmap; has_aux, symmetric, pytrees; errors of the same class."""
from __future__ import annotations

import types
from typing import Any

import jax
import numpy as np
import pytest

import meshax
import meshax.numpy
from differential import assert_matches
from meshax._src.lax import lax_more_enums, lax_more_ragged, lax_more_solves

MLAX = types.SimpleNamespace(**{n: getattr(meshax.lax, n) for n in dir(meshax.lax) if not n.startswith("_")})
for _module in (lax_more_enums, lax_more_ragged, lax_more_solves):
    MLAX.__dict__.update({n: getattr(_module, n) for n in _module.__all__})
M = types.SimpleNamespace(lax=MLAX, numpy=meshax.numpy, jit=meshax.jit, grad=meshax.grad, vmap=meshax.vmap,
                          jacfwd=meshax.jacfwd, tree=meshax.tree)
J = types.SimpleNamespace(lax=jax.lax, numpy=jax.numpy, jit=jax.jit, grad=jax.grad, vmap=jax.vmap,
                          jacfwd=jax.jacfwd, tree=jax.tree)
_rng = np.random.default_rng(0)


def same(case: Any, *args: Any, **tolerances: Any) -> None:
    """`case(L, *args)` with the meshax and the JAX namespaces agree."""
    theirs = case(J, *[jax.numpy.asarray(a) for a in args])
    ours = case(M, *[meshax.numpy.asarray(a) for a in args])
    assert_matches(ours, theirs, **tolerances)


def raises_alike(case: Any, error: type, *args: Any) -> None:
    for L in (M, J):
        with pytest.raises(error):
            case(L, *args)


# ---- custom_linear_solve -----------------------------------------------------------------------------------------

N = 3
A = (_rng.normal(size=(N, N)) + 4 * np.eye(N)).astype(np.float32)
SPD = (A @ A.T).astype(np.float32)
B = _rng.normal(size=(N,)).astype(np.float32)


def _solver(L: Any, a: Any, b: Any, symmetric: bool, has_aux: bool, transpose: bool = True) -> Any:
    """custom_linear_solve of a @ x = b with a direct solve (and its transpose)."""
    aux = (lambda y: (y, L.numpy.sum(y))) if has_aux else (lambda y: y)

    def solve(matvec, y):
        return aux(L.numpy.linalg.solve(a, y))

    def transpose_solve(vecmat, y):
        return aux(L.numpy.linalg.solve(a.T, y))

    return L.lax.custom_linear_solve(lambda x: a @ x, b, solve, None if symmetric or not transpose else
                                     transpose_solve, symmetric=symmetric, has_aux=has_aux)


def _first(out: Any, has_aux: bool) -> Any:
    return out[0] if has_aux else out


TRANSFORMS = {
    "eager": lambda L, f: f,
    "jit": lambda L, f: L.jit(f),
    "grad_a": lambda L, f: L.grad(lambda a, b: L.numpy.sum(f(a, b) ** 2), 0),
    "grad_b": lambda L, f: L.grad(lambda a, b: L.numpy.sum(f(a, b) * L.numpy.arange(N)), 1),
    "jacfwd": lambda L, f: L.jacfwd(f, (0, 1)),
    "jit_grad": lambda L, f: L.jit(L.grad(lambda a, b: L.numpy.sum(f(a, b) ** 2), (0, 1))),
}


@pytest.mark.parametrize("has_aux", [False, True])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_custom_linear_solve(transform, symmetric, has_aux):
    a = SPD if symmetric else A
    if transform != "eager" and transform != "jit" and has_aux:
        def f(L):
            return lambda a_, b_: _first(_solver(L, a_, b_, symmetric, True), True)
    else:
        def f(L):
            return lambda a_, b_: _solver(L, a_, b_, symmetric, has_aux)
    same(lambda L, a_, b_: TRANSFORMS[transform](L, f(L))(a_, b_), a, B, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("symmetric", [False, True])
def test_custom_linear_solve_vmap(symmetric):
    a = SPD if symmetric else A
    bs = _rng.normal(size=(4, N)).astype(np.float32)
    same(lambda L, a_, b_: L.vmap(lambda bb: _solver(L, a_, bb, symmetric, False))(b_), a, bs, rtol=1e-5)
    # derivatives of a vmapped solve whose solver is a loop: implicit, never through the loop
    same(lambda L, a_, b_: L.grad(lambda aa: L.numpy.sum(L.vmap(
        lambda bb: _loop_solver(L, aa, bb))(b_) ** 2))(a_), a, bs, rtol=2e-3, atol=2e-4)


def _loop_solver(L: Any, a: Any, b: Any) -> Any:
    """custom_linear_solve whose solve is 60 Jacobi steps in a while loop (not differentiable in reverse)."""
    diag = L.numpy.diag(a)

    def jacobi(matvec, y):
        def body(state):
            x, i = state
            return x + (y - matvec(x)) / diag, i + 1

        return L.lax.while_loop(lambda s: s[1] < 60, body, (L.numpy.zeros_like(y), 0))[0]

    return L.lax.custom_linear_solve(lambda x: a @ x, b, jacobi, jacobi, symmetric=True)


def test_custom_linear_solve_pytree():
    def case(L, a, b):
        def matvec(x):
            return {"u": a @ x["u"], "v": 2.0 * x["v"]}

        def solve(mv, y):
            return {"u": L.numpy.linalg.solve(a, y["u"]), "v": y["v"] / 2.0}

        def tsolve(vm, y):
            return {"u": L.numpy.linalg.solve(a.T, y["u"]), "v": y["v"] / 2.0}

        def f(aa, bb):
            x = L.lax.custom_linear_solve(matvec, {"u": bb, "v": bb[:2]}, solve, tsolve)
            return L.numpy.sum(x["u"] ** 2) + L.numpy.sum(x["v"])

        return f(a, b), L.grad(f, (0, 1))(a, b)

    same(case, A, B, rtol=2e-4, atol=2e-5)


def test_custom_linear_solve_errors():
    # reverse mode without transpose_solve
    raises_alike(lambda L: L.grad(lambda b: L.numpy.sum(_solver(L, A, b, False, False, transpose=False)))(B),
                 TypeError)
    # solve returning the wrong shape
    raises_alike(lambda L: L.lax.custom_linear_solve(lambda x: A @ x, B, lambda mv, y: y[:2]), ValueError)
    # forward mode needs no transpose_solve
    same(lambda L, b: L.jacfwd(lambda bb: _solver(L, A, bb, False, False, transpose=False))(b), B, rtol=2e-4,
         atol=1e-5)


# ---- custom_root -------------------------------------------------------------------------------------------------


def _sqrt(L: Any, c: Any, has_aux: bool = False) -> Any:
    """The square root of c by Newton's method in a while loop, differentiated implicitly."""
    def f(x):
        return x ** 2 - c

    def solve(g, x0):
        def body(state):
            x, i = state
            return x - g(x) / (2 * x), i + 1

        # (a counter of int32: meshax's while_loop drops a weakly typed carry's weak type, which JAX keeps)
        x, i = L.lax.while_loop(lambda s: s[1] < 30, body, (x0, np.int32(0)))
        return (x, i) if has_aux else x

    return L.lax.custom_root(f, L.numpy.ones_like(c), solve, lambda g, y: y / g(L.numpy.ones_like(y)),
                             has_aux=has_aux)


ROOT_TRANSFORMS = {
    "eager": lambda L, f: f,
    "jit": lambda L, f: L.jit(f),
    "grad": lambda L, f: L.grad(lambda c: L.numpy.sum(f(c))),
    "jacfwd": lambda L, f: L.jacfwd(f),
    "vmap": lambda L, f: L.vmap(f),
    "jit_grad": lambda L, f: L.jit(L.grad(lambda c: L.numpy.sum(f(c)))),
    "vmap_grad": lambda L, f: L.vmap(L.grad(lambda c: L.numpy.sum(f(c)))),
    "grad_vmap": lambda L, f: L.grad(lambda c: L.numpy.sum(L.vmap(f)(c))),
}


@pytest.mark.parametrize("has_aux", [False, True])
@pytest.mark.parametrize("transform", sorted(ROOT_TRANSFORMS))
def test_custom_root(transform, has_aux):
    c = np.array([2.0, 3.0, 5.0], np.float32)

    def case(L, c_):
        def f(v):
            out = _sqrt(L, v, has_aux)
            return out[0] if has_aux and transform not in ("eager", "jit", "vmap") else out

        return ROOT_TRANSFORMS[transform](L, f)(c_)

    same(case, c, rtol=1e-5)


def test_custom_root_pytree_and_errors():
    def case(L, c):
        def f(x):
            return {"a": x["a"] ** 3 - c, "b": x["b"] - 2.0 * c}

        def solve(g, x0):
            return {"a": L.numpy.cbrt(c), "b": 2.0 * c}

        def tangent_solve(g, y):
            return {"a": y["a"] / (3.0 * L.numpy.cbrt(c) ** 2), "b": y["b"]}

        root = lambda cc: L.lax.custom_root(f, {"a": L.numpy.ones_like(cc), "b": L.numpy.ones_like(cc)}, solve,
                                            tangent_solve)
        return root(c), L.jacfwd(lambda cc: root(cc)["a"])(c)

    same(case, np.array([8.0, 27.0], np.float32), rtol=1e-5)
    guess = np.ones(2, np.float32)
    raises_alike(lambda L: L.lax.custom_root(lambda x: x, guess, lambda g, x: (x, x), lambda g, y: y), TypeError)
    raises_alike(lambda L: L.lax.custom_root(lambda x: x, guess, lambda g, x: x, lambda g, y: y, has_aux=True),
                 ValueError)
    raises_alike(lambda L: L.lax.custom_linear_solve(lambda x: x, guess, lambda mv, y: y, has_aux=True), ValueError)


# ---- ragged_dot --------------------------------------------------------------------------------------------------

GROUPS = {"even": [2, 2, 2], "uneven": [1, 3, 2], "empty_group": [3, 0, 3], "short": [1, 2, 1]}


@pytest.mark.parametrize("preferred", [None, np.float32])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8])
@pytest.mark.parametrize("groups", sorted(GROUPS))
def test_ragged_dot(groups, dtype, preferred):
    lhs = _rng.integers(-3, 4, size=(6, 4)).astype(dtype)
    rhs = _rng.integers(-3, 4, size=(3, 4, 5)).astype(dtype)
    sizes = np.array(GROUPS[groups], np.int32)
    for jit in (False, True):
        same(lambda L, a, b, g: (L.jit(L.lax.ragged_dot, static_argnames="preferred_element_type") if jit else
                                 L.lax.ragged_dot)(a, b, g, preferred_element_type=preferred), lhs, rhs, sizes,
             rtol=1e-3)


@pytest.mark.parametrize("groups", sorted(GROUPS))
def test_ragged_dot_grad(groups):
    lhs, rhs = _rng.normal(size=(6, 4)).astype(np.float32), _rng.normal(size=(3, 4, 5)).astype(np.float32)
    sizes = np.array(GROUPS[groups], np.int32)
    same(lambda L, a, b, g: L.grad(lambda x, y: L.numpy.sum(L.lax.ragged_dot(x, y, g) ** 2), (0, 1))(a, b), lhs,
         rhs, sizes, rtol=1e-5, atol=1e-5)


GENERAL = {  # lhs shape, rhs shape, dimension numbers, lhs ragged dims, rhs group dims, group sizes
    "ragged_free_batched": ((2, 6, 4), (2, 3, 4, 5), (([2], [2]), ([0], [0])), [1], [1], [1, 2, 2]),
    "ragged_contracting": ((3, 7), (7, 5), (([1], [0]), ([], [])), [1], [], [2, 3, 2]),
    "ragged_contracting_batched": ((2, 3, 7), (2, 7, 5), (([2], [1]), ([0], [0])), [2], [], [4, 1, 2]),
    "ragged_batch": ((2, 6, 4), (2, 4, 5), (([2], [1]), ([0], [0])), [0], [], [1, 1]),
    "group_dim_middle": ((6, 4), (4, 3, 5), (([1], [0]), ([], [])), [0], [1], [1, 2, 2]),
}


@pytest.mark.parametrize("name", sorted(GENERAL))
def test_ragged_dot_general(name):
    ls, rs, dn, ragged, group, sizes = GENERAL[name]
    lhs, rhs = _rng.normal(size=ls).astype(np.float32), _rng.normal(size=rs).astype(np.float32)
    sizes = np.array(sizes, np.int32)

    def case(L, a, b, g):
        numbers = L.lax.RaggedDotDimensionNumbers(dn, ragged, group)
        value = L.lax.ragged_dot_general(a, b, g, numbers)
        jitted = L.jit(lambda x, y: L.lax.ragged_dot_general(x, y, g, numbers))(a, b)
        if ragged[0] in dn[0][0] or ragged[0] in dn[1][0]:
            return value, jitted  # JAX has no derivative of the ragged contracting and batch modes
        grads = L.grad(lambda x, y: L.numpy.sum(L.lax.ragged_dot_general(x, y, g, numbers) ** 2), (0, 1))(a, b)
        return value, jitted, grads

    same(case, lhs, rhs, sizes, rtol=1e-4, atol=1e-5)


def test_ragged_dot_errors():
    lhs, rhs = np.ones((6, 4), np.float32), np.ones((3, 4, 5), np.float32)
    raises_alike(lambda L: L.lax.ragged_dot(lhs, rhs, np.array([1, 2], np.int32)), TypeError)
    raises_alike(lambda L: L.lax.ragged_dot(lhs, rhs[:, :3], np.array([1, 2, 3], np.int32)), TypeError)
    raises_alike(lambda L: L.lax.ragged_dot(lhs, rhs, np.array([1., 2., 3.], np.float32)), TypeError)
    numbers = ((([2], [1]), ([0], [0])), [1], [1])
    raises_alike(lambda L: L.lax.ragged_dot_general(np.ones((2, 6, 4), np.float32), np.ones((2, 3, 4, 5), np.float32),
                                                    np.array([1, 2, 3], np.int32),
                                                    L.lax.RaggedDotDimensionNumbers(*numbers)), TypeError)


@pytest.mark.parametrize("sizes", [[2, 3, 2], [0, 5, 1]])
def test_ragged_contracting_grad_against_slices(sizes):
    """JAX has no derivative of the ragged contracting mode; meshax's matches JAX's derivative of the same
    contraction written group by group."""
    lhs, rhs = _rng.normal(size=(3, 7)).astype(np.float32), _rng.normal(size=(7, 5)).astype(np.float32)
    weights = _rng.normal(size=(3, 3, 5)).astype(np.float32)
    numbers = MLAX.RaggedDotDimensionNumbers((([1], [0]), ([], [])), [1], [])
    ours = meshax.grad(lambda a, b: meshax.numpy.sum(MLAX.ragged_dot_general(
        a, b, np.array(sizes, np.int32), numbers) * weights), (0, 1))(lhs, rhs)
    ends = np.cumsum(sizes)

    def by_groups(a, b):
        parts = [a[:, e - n:e] @ b[e - n:e] for n, e in zip(sizes, ends)]
        return jax.numpy.sum(jax.numpy.stack(parts) * weights)

    theirs = jax.grad(by_groups, (0, 1))(lhs, rhs)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5, atol=1e-5)
