"""Iterative linear solvers (as jax.scipy.sparse.linalg): conjugate gradients, BiCGSTAB and restarted GMRES.

The operator is a square matrix, anything with `@`, or a function of a pytree; the solvers run on the pytree
flattened to one vector, in a lax.while_loop. Reverse-mode derivatives are implicit: the cotangent of b is one
more solve with the transposed operator, and the floating-point values the operator closes over get theirs
from that solve's result (as lax.custom_linear_solve does)."""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable

import numpy as np

from .. import numpy as jnp
from ..lax import control_flow as _cf
from ..lax.lax_more_solves import custom_linear_solve
from ..numpy import linalg as _linalg
from ..tree.tree_util import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten


def _matvec(a: Any) -> Callable[[Any], Any]:
    """A function computing a @ x for a square matrix (or anything with `@`); functions pass through."""
    if callable(a):
        return a
    if isinstance(a, np.ndarray) or hasattr(a, "__matmul__"):
        if hasattr(a, "shape") and (len(a.shape) != 2 or a.shape[0] != a.shape[1]):
            raise ValueError(f"linear operator must be a square matrix, but has shape: {a.shape}")
        return functools.partial(operator.matmul, a)
    raise TypeError(f"linear operator must be either a function or ndarray: {a!r}")


class _Flat:
    """A pytree's leaves as one vector (of their promoted dtype) and back."""

    def __init__(self, tree: Any) -> None:
        leaves, self.treedef = tree_flatten(tree)
        self.shapes = [np.shape(x) for x in leaves]
        self.dtypes = [jnp.asarray(x).dtype for x in leaves]
        self.dtype = jnp.result_type(*self.dtypes) if leaves else np.dtype(np.float32)
        self.splits = np.cumsum([int(np.prod(s)) for s in self.shapes])[:-1]

    def ravel(self, tree: Any) -> Any:
        leaves = tree_leaves(tree)
        return jnp.concatenate([jnp.ravel(jnp.asarray(x)).astype(self.dtype) for x in leaves])

    def unravel(self, vector: Any) -> Any:
        parts = jnp.split(vector, self.splits) if len(self.shapes) > 1 else [vector]
        return tree_unflatten(self.treedef, [jnp.reshape(p, s).astype(d)
                                             for p, s, d in zip(parts, self.shapes, self.dtypes)])


def _prepare(A: Any, b: Any, x0: Any, M: Any, shape_error: type = ValueError  # noqa: N803
             ) -> tuple[_Flat, Callable, Callable, Any, Any]:
    """The flattening of b, the operator and preconditioner on flat vectors, flat b and flat x0; x0's shapes
    differing from b's raise `shape_error` (JAX's gmres fails with a TypeError there, cg and bicgstab with a
    ValueError)."""
    b = tree_map(jnp.asarray, b)
    x0 = tree_map(jnp.zeros_like, b) if x0 is None else tree_map(jnp.asarray, x0)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: {tree_structure(x0)} vs {tree_structure(b)}")
    if [np.shape(x) for x in tree_leaves(x0)] != [np.shape(x) for x in tree_leaves(b)]:
        raise shape_error(f"arrays in x0 and b must have matching shapes: {[np.shape(x) for x in tree_leaves(x0)]} "
                         f"vs {[np.shape(x) for x in tree_leaves(b)]}")
    flat = _Flat(b)
    op, pre = _matvec(A), (lambda t: t) if M is None else _matvec(M)
    return (flat, lambda v: flat.ravel(op(flat.unravel(v))), lambda v: flat.ravel(pre(flat.unravel(v))),
            flat.ravel(b), flat.ravel(x0))


def _real_dot(x: Any, y: Any) -> Any:
    return jnp.real(jnp.vdot(x, y))


def _cg(A: Callable, b: Any, x0: Any, M: Callable, tol: Any, atol: Any, maxiter: int) -> Any:  # noqa: N803
    """Preconditioned conjugate gradients on flat vectors."""
    bound = jnp.maximum(jnp.square(tol) * _real_dot(b, b), jnp.square(atol))
    r = b - A(x0)
    z = M(r)

    def cond(state: tuple) -> Any:
        _, r, _, _, k = state
        return (_real_dot(r, r) > bound) & (k < maxiter)

    def body(state: tuple) -> tuple:
        x, r, p, gamma, k = state
        ap = A(p)
        alpha = gamma / jnp.vdot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        z = M(r)
        gamma_next = jnp.vdot(r, z)
        return x, r, z + (gamma_next / gamma) * p, gamma_next, k + 1

    return _cf.while_loop(cond, body, (x0, r, z, jnp.vdot(r, z), 0))[0]


def _bicgstab(A: Callable, b: Any, x0: Any, M: Callable, tol: Any, atol: Any, maxiter: int) -> Any:  # noqa: N803
    """Preconditioned BiCGSTAB on flat vectors; k turns negative once converged (or broken down)."""
    bound = jnp.maximum(jnp.square(tol) * _real_dot(b, b), jnp.square(atol))
    r0 = b - A(x0)
    one = jnp.ones((), r0.dtype)

    def cond(state: tuple) -> Any:
        _, r, *_, k = state
        return (_real_dot(r, r) > bound) & (k < maxiter) & (k >= 0)

    def body(state: tuple) -> tuple:
        x, r, p, v, rho, alpha, omega, k = state
        rho_next = jnp.vdot(r0, r)
        p = r + (rho_next / rho) * (alpha / omega) * (p - omega * v)
        phat = M(p)
        v = A(phat)
        alpha = rho_next / jnp.vdot(r0, v)
        s = r - alpha * v
        done = _real_dot(s, s) < bound
        shat = M(s)
        t = A(shat)
        omega = jnp.vdot(t, s) / jnp.vdot(t, t)
        x = x + alpha * phat + jnp.where(done, 0, omega) * shat
        r = jnp.where(done, s, s - omega * t)
        k = jnp.where(done, -1, jnp.where((rho_next == 0) | (omega == 0), -10, k + 1))
        return x, r, p, v, rho_next, alpha, omega, k

    zeros = jnp.zeros_like(r0)
    return _cf.while_loop(cond, body, (x0, r0, zeros, zeros, one, one, one, 0))[0]


def _safe_normalize(v: Any) -> tuple[Any, Any]:
    """v / |v| and |v| (a zero vector where |v| is negligible)."""
    norm = _linalg.norm(v)
    tiny = jnp.finfo(norm.dtype).eps * 10
    return jnp.where(norm > tiny, v / jnp.where(norm > tiny, norm, 1).astype(v.dtype), 0), norm


def _gmres_cycle(A: Callable, M: Callable, b: Any, x: Any, restart: int) -> Any:  # noqa: N803
    """One restart: the Arnoldi basis of the preconditioned Krylov space of size `restart` from x's residual
    (Gram-Schmidt twice), then the least-squares step within it."""
    unit, beta = _safe_normalize(M(b - A(x)))
    basis = jnp.zeros((restart + 1,) + unit.shape, unit.dtype).at[0].set(unit)
    hess = jnp.zeros((restart + 1, restart), unit.dtype)

    def step(k: Any, state: tuple) -> tuple:
        basis, hess = state
        w = M(A(basis[k]))
        h = jnp.conj(basis) @ w
        w = w - h @ basis
        h2 = jnp.conj(basis) @ w
        w, norm = _safe_normalize(w - h2 @ basis)
        column = (h + h2).at[k + 1].set(norm.astype(h.dtype))
        return basis.at[k + 1].set(w), hess.at[:, k].set(column)

    basis, hess = _cf.fori_loop(0, restart, step, (basis, hess))
    target = jnp.zeros((restart + 1,), unit.dtype).at[0].set(beta.astype(unit.dtype))
    y = _linalg.lstsq(hess, target)[0]
    return x + y @ basis[:restart]


def _gmres(A: Callable, b: Any, x0: Any, M: Callable, tol: Any, atol: Any, maxiter: int,  # noqa: N803
           restart: int) -> Any:
    """Restarted GMRES on flat vectors: cycles until the preconditioned residual is within tolerance."""
    bound = jnp.maximum(tol * _linalg.norm(b), atol)

    def cond(state: tuple) -> Any:
        x, k = state
        return (k < maxiter) & (_linalg.norm(M(b - A(x))) > bound)

    def body(state: tuple) -> tuple:
        x, k = state
        return _gmres_cycle(A, M, b, x, restart), k + 1

    return _cf.while_loop(cond, body, (x0, 0))[0]


def _solve(algorithm: Callable, A: Any, b: Any, x0: Any, M: Any, **options: Any) -> Any:  # noqa: N803
    """`algorithm` on the flattened system, returned as b's pytree, implicitly differentiable."""
    shape_error = TypeError if algorithm is _gmres else ValueError
    flat, op, pre, b_flat, x0_flat = _prepare(A, b, x0, M, shape_error)

    def solve(matvec: Callable, rhs: Any) -> Any:
        return algorithm(matvec, rhs, x0_flat, pre, **options)

    x = custom_linear_solve(op, b_flat, solve, solve)  # differentiated implicitly, forward and reverse
    return flat.unravel(x)


def _maxiter(b: Any, maxiter: int | None) -> int:
    return 10 * sum(int(np.size(x)) for x in tree_leaves(b)) if maxiter is None else maxiter


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0,  # noqa: N803
       maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """Solve A x = b for a Hermitian positive-definite A by conjugate gradients: (x, None)."""
    x = _solve(_cg, A, b, x0, M, tol=tol, atol=atol, maxiter=_maxiter(b, maxiter))
    return x, None


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0,  # noqa: N803
             maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """Solve A x = b for a general A by the stabilized bi-conjugate gradient method: (x, None)."""
    x = _solve(_bicgstab, A, b, x0, M, tol=tol, atol=atol, maxiter=_maxiter(b, maxiter))
    return x, None


def gmres(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, restart: int = 20,  # noqa: N803
          maxiter: int | None = None, M: Any = None, solve_method: str = "batched") -> tuple[Any, Any]:  # noqa: N803
    """Solve A x = b by GMRES restarted every `restart` steps: (x, info), info -1 where x came out NaN else 0."""
    if solve_method not in ("incremental", "batched"):
        raise ValueError(f"invalid solve_method {solve_method}, must be either 'incremental' or 'batched'")
    size = sum(int(np.size(x)) for x in tree_leaves(b))
    x = _solve(_gmres, A, b, x0, M, tol=tol, atol=atol, maxiter=_maxiter(b, maxiter),
               restart=min(restart, size))
    failed = jnp.isnan(jnp.sqrt(sum(jnp.sum(jnp.abs(leaf) ** 2) for leaf in tree_leaves(x))))
    return x, jnp.where(failed, -1, 0)
