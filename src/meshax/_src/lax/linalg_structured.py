"""Primitives of jax.lax.linalg for structured problems: tridiagonal solves, rank-1 Cholesky updates, symmetric
products, the QDWH polar decomposition; and the derivative of the LU decomposition."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.core import ShapedArray, aval_of
from ..interpreters.ad import Zero, instantiate, is_undefined, jvp_rules, transpose_rules
from .linalg import _define, _jnp, _mm, _zero_tangent, triangular_solve
from .linalg_lapack import lu_p, per_matrix

# ---- tridiagonal solve ---------------------------------------------------------------------------------------------


def _dense_tridiagonal(dl: np.ndarray, d: np.ndarray, du: np.ndarray) -> np.ndarray:
    """The (batched) matrix with sub-diagonal dl[1:], diagonal d and super-diagonal du[:-1]."""
    m = d.shape[-1]
    t = np.zeros(d.shape + (m,), np.result_type(dl, d, du))
    i = np.arange(m)
    t[..., i, i] = d
    t[..., i[1:], i[:-1]] = dl[..., 1:]
    t[..., i[:-1], i[1:]] = du[..., :-1]
    return t


def _tridiagonal_solve_impl(dl: np.ndarray, d: np.ndarray, du: np.ndarray, b: np.ndarray, *,
                            perturb_singular: bool) -> np.ndarray:
    t = _dense_tridiagonal(dl, d, du)
    try:
        return np.linalg.solve(t, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError:  # singular systems: NaNs for those of the batch, as LAPACK's gtsv leaves them
        return per_matrix(lambda a, y: (_solve_or_nan(a, y),), (t, b), (2, 2))[0].astype(b.dtype, copy=False)


def _solve_or_nan(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(a, y)
    except np.linalg.LinAlgError:
        return np.full(y.shape, np.nan, y.dtype)


tridiagonal_solve_p = _define("tridiagonal_solve", _tridiagonal_solve_impl, lambda dl, d, du, b, **_: b, core=1)


def _shift(x: Any, down: bool) -> Any:
    """Rows of `x` moved one down (row i holds row i-1) or up, the vacated row zero."""
    jnp = _jnp()
    zero = jnp.zeros_like(x[..., :1, :])
    return jnp.concatenate([zero, x[..., :-1, :]] if down else [x[..., 1:, :], zero], axis=-2)


def _tridiagonal_solve_jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
    """x = T^-1 b:  dx = T^-1 (db - dT x)."""
    dl, d, du, b = primals
    x = tridiagonal_solve_p.bind(dl, d, du, b, **params)
    rhs = None if isinstance(tangents[3], Zero) else tangents[3]
    for tangent, shift in zip(tangents[:3], ("down", None, "up")):
        if isinstance(tangent, Zero):
            continue
        moved = x if shift is None else _shift(x, shift == "down")
        term = -tangent[..., :, None] * moved
        rhs = term if rhs is None else rhs + term
    if rhs is None:
        return x, _zero_tangent(x)
    return x, tridiagonal_solve_p.bind(dl, d, du, rhs, **params)


def _tridiagonal_solve_transpose(ct: Any, dl: Any, d: Any, du: Any, b: Any, **params: Any) -> list[Any]:
    """Solves with T^T: its sub-diagonal is T's super-diagonal and the other way round."""
    assert not any(is_undefined(v) for v in (dl, d, du)), "tridiagonal_solve is linear in b only"
    if isinstance(ct, Zero):
        return [None, None, None, None]
    jnp = _jnp()
    zero = jnp.zeros_like(d[..., :1])
    dl_t = jnp.concatenate([zero, du[..., :-1]], axis=-1)
    du_t = jnp.concatenate([dl[..., 1:], zero], axis=-1)
    return [None, None, None, tridiagonal_solve_p.bind(dl_t, d, du_t, ct, **params)]


jvp_rules[tridiagonal_solve_p] = _tridiagonal_solve_jvp
transpose_rules[tridiagonal_solve_p] = _tridiagonal_solve_transpose

# ---- rank-1 Cholesky update and symmetric products -----------------------------------------------------------------


def _cholesky_update_impl(r: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The upper factor of R^H R + w w^H."""
    a = np.conj(np.swapaxes(r, -1, -2)) @ r + w[..., :, None] * np.conj(w[..., None, :])
    lower = np.linalg.cholesky(a)
    return np.conj(np.swapaxes(lower, -1, -2)).astype(r.dtype, copy=False)


cholesky_update_p = _define("cholesky_update", _cholesky_update_impl, lambda r, w: r)


def _symmetric_product_impl(a: np.ndarray, c: np.ndarray, *, alpha: float, beta: float) -> np.ndarray:
    return (alpha * (a @ np.swapaxes(a, -1, -2)) + beta * c).astype(c.dtype, copy=False)


symmetric_product_p = _define("symmetric_product", _symmetric_product_impl, lambda a, c, **_: c)

# ---- QDWH polar decomposition ----------------------------------------------------------------------------------


def _halley_weights(low: float) -> tuple[float, float, float]:
    """The dynamically weighted Halley iteration's (a, b, c) for the current lower bound `low` of the singular values."""
    dd = (4.0 * (1.0 - low * low) / low ** 4) ** (1.0 / 3.0)
    sqd = np.sqrt(1.0 + dd)
    a = sqd + 0.5 * np.sqrt(8.0 - 4.0 * dd + 8.0 * (2.0 - low * low) / (low * low * sqd))
    b = (a - 1.0) ** 2 / 4.0
    return a, b, a + b - 1.0


def _qdwh_step(u: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    """One QDWH update: by a QR factorisation while c is large (well-conditioned), else by a Cholesky one."""
    m, n = u.shape
    eye = np.eye(n, dtype=u.dtype)
    if c > 100.0:
        q, _ = np.linalg.qr(np.concatenate([np.sqrt(c) * u, eye]))
        return (b / c) * u + (a - b / c) / np.sqrt(c) * (q[:m] @ np.conj(q[m:]).T)
    z = eye + c * (np.conj(u).T @ u)
    factor = np.linalg.cholesky(z)
    solved = np.linalg.solve(np.conj(factor).T, np.linalg.solve(factor, np.conj(u).T))
    return (b / c) * u + (a - b / c) * np.conj(solved).T


def _qdwh_one(x: np.ndarray, max_iterations: int, eps: float) -> tuple:
    """Polar factors u (orthonormal columns), h (Hermitian), the iterations run and whether they converged."""
    work = x.astype(np.promote_types(x.dtype, np.float64))
    norm = np.linalg.norm(work)  # the Frobenius norm bounds the largest singular value
    u = work / norm if norm > 0 else work
    low, tol = float(eps), (5.0 * float(eps)) ** (1.0 / 3.0)
    iterations, converged = 0, False
    while iterations < max_iterations and not converged:
        a, b, c = _halley_weights(min(low, 1.0 - 1e-12))
        new = _qdwh_step(u, a, b, c)
        low = min(low * (a + b * low * low) / (1.0 + c * low * low), 1.0)
        change = np.linalg.norm(new - u)
        u, iterations = new, iterations + 1
        converged = change < tol and abs(1.0 - low) < tol
    h = np.conj(u).T @ work
    h = (h + np.conj(h).T) / 2
    return u.astype(x.dtype), h.astype(x.dtype), np.int32(iterations), np.bool_(converged)


def _qdwh_impl(x: np.ndarray, *, max_iterations: int, eps: float) -> list[np.ndarray]:
    return per_matrix(lambda m: _qdwh_one(m, max_iterations, eps), (x,), (2,))


def _qdwh_aval(x: ShapedArray, **_: Any) -> list[ShapedArray]:
    *batch, m, n = x.shape
    batch = tuple(batch)
    return [x, ShapedArray(batch + (n, n), x.dtype), ShapedArray(batch, np.dtype(np.int32), weak_type=True),
            ShapedArray(batch, np.dtype(np.bool_))]


qdwh_p = _define("qdwh", _qdwh_impl, _qdwh_aval, multiple_results=True)

# ---- the derivative of LU ------------------------------------------------------------------------------------------


def _embed(x: Any, size: int, k: int) -> Any:
    """`x` padded with zeros to size x size, with ones on the diagonal from index k on (completing a triangular
    factor of a non-square matrix to a square one of the same padded matrix)."""
    jnp = _jnp()
    r, c = aval_of(x).shape[-2:]
    pad = [(0, 0)] * (aval_of(x).ndim - 2) + [(0, size - r), (0, size - c)]
    tail = (jnp.arange(size) >= k).astype(aval_of(x).dtype)
    return jnp.pad(x, pad) + jnp.diag(tail)


def _lu_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    """P^T A = L U, so with X = L^-1 P^T dA U^-1: dL = L tril(X, -1), dU = triu(X) U (non-square matrices padded
    to square ones with the same factors)."""
    jnp = _jnp()
    (a,), (da,) = primals, tangents
    lu, pivots, perm = lu_p.bind(a)
    dtype = aval_of(a).dtype
    m, n = aval_of(a).shape[-2:]
    k, size = min(m, n), max(m, n)
    lower = _embed(jnp.tril(lu[..., :, :k], -1) + jnp.eye(m, k, dtype=dtype), size, k)
    upper = _embed(jnp.triu(lu[..., :k, :]), size, k)
    rows = (perm[..., :, None] == jnp.arange(m)).astype(dtype)
    pda = _embed(_mm(rows, instantiate(da)), size, size)
    x = triangular_solve(lower, pda, left_side=True, lower=True, unit_diagonal=True)
    x = triangular_solve(upper, x, left_side=False, lower=False)
    dlu = _mm(lower, jnp.tril(x, -1)) + _mm(jnp.triu(x), upper)
    return [lu, pivots, perm], [dlu[..., :m, :n], _zero_tangent(pivots), _zero_tangent(perm)]


jvp_rules[lu_p] = _lu_jvp

__all__ = ["cholesky_update_p", "qdwh_p", "symmetric_product_p", "tridiagonal_solve_p"]
