"""Decompositions of jax.scipy.linalg in SciPy's spelling: LU (and solves from it), Hessenberg, Schur (and the real to
complex Schur conversion), polar, QR products, tridiagonal eigenproblems; built on meshax.lax.linalg's primitives."""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from .. import numpy as jnp
from ..numpy import linalg as jnp_linalg
from ..core.core import ShapedArray
from ..lax import linalg_api as lax_linalg
from ..lax.linalg import _define
from ..lax.linalg_lapack import per_matrix
from ..lax.linalg_structured import qdwh_p
from ..numpy.promotion import _promote_inexact


def _permutation_matrix(perm: Any, dtype: Any) -> Any:
    """P with P[r, c] = 1 where perm[c] == r, so that a = P @ a[perm]."""
    return (jnp.arange(perm.shape[-1])[:, None] == perm[..., None, :]).astype(dtype)


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """LU decomposition with partial pivoting: (p, l, u) with a = p @ l @ u, or (p @ l, u) with `permute_l`."""
    (a,) = _promote_inexact(jnp.asarray(a))
    lu_, _, perm = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lower = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    upper = jnp.triu(lu_[..., :k, :])
    p = _permutation_matrix(perm, np.empty((), a.dtype).real.dtype)  # real, as JAX's
    return (jnp.matmul(p.astype(a.dtype), lower), upper) if permute_l else (p, lower, upper)


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """LU factors in LAPACK's compact form: (lu, pivots as int32)."""
    (a,) = _promote_inexact(jnp.asarray(a))
    lu_, pivots, _ = lax_linalg.lu(a)
    return lu_, pivots


def _rows(b: Any, order: Any) -> Any:
    """b's rows (axis -2) in the given (batched) order."""
    index = jnp.broadcast_to(order[..., :, None], b.shape[:-1] + (1,))
    return jnp.take_along_axis(b, jnp.broadcast_to(index, b.shape), axis=-2)


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """x with a x = b (trans 0), a^T x = b (1) or a^H x = b (2), from lu_factor's (lu, pivots)."""
    lu_, pivots = lu_and_piv
    if trans not in (0, 1, 2):
        raise ValueError(f"'trans' value must be 0, 1, or 2, got {trans}")
    lu_, b = _promote_inexact(jnp.asarray(lu_), jnp.asarray(b))
    m = lu_.shape[-1]
    perm = lax_linalg.lu_pivots_to_permutation(jnp.asarray(pivots, np.int32), m)
    vector = b.ndim < lu_.ndim
    columns = b[..., None] if vector else b
    batch = np.broadcast_shapes(lu_.shape[:-2], columns.shape[:-2])
    lu_ = jnp.broadcast_to(lu_, batch + lu_.shape[-2:])
    columns = jnp.broadcast_to(columns, batch + columns.shape[-2:])
    perm = jnp.broadcast_to(perm, batch + perm.shape[-1:])
    if trans == 0:
        y = lax_linalg.triangular_solve(lu_, _rows(columns, perm), left_side=True, lower=True, unit_diagonal=True)
        x = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=False)
    else:
        conj = trans == 2
        y = lax_linalg.triangular_solve(lu_, columns, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
        y = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=True, unit_diagonal=True, transpose_a=True,
                                        conjugate_a=conj)
        x = _rows(y, jnp.argsort(perm, axis=-1))
    return x[..., 0] if vector else x


def hessenberg(a: Any, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The upper Hessenberg form h of the square `a`, with (calc_q) the unitary q such that a = q h q^H."""
    compact, taus = lax_linalg.hessenberg(a)
    h = jnp.triu(compact, -1)
    if not calc_q:
        return h
    n = compact.shape[-1]
    inner = lax_linalg.householder_product(compact[..., 1:, :-1], taus) if n > 1 else compact[..., :0, :0]
    pad = [(0, 0)] * (compact.ndim - 2) + [(1, 0), (1, 0)]
    first = np.zeros((n, n))
    first[0, 0] = 1
    return h, jnp.pad(inner, pad) + jnp.asarray(first, compact.dtype)


def schur(a: Any, output: str = "real") -> list[Any]:
    """The Schur form t and the unitary z with a = z t z^H: real quasi-triangular t ('real') or triangular
    ('complex')."""
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got output={output!r}.")
    a = jnp.asarray(a)
    if output == "complex" and jnp.issubdtype(a.dtype, np.floating):
        a = a.astype(jnp.result_type(a.dtype, np.complex64))
    return lax_linalg.schur(a)


def _rsf2csf_impl(t: np.ndarray, z: np.ndarray) -> list[np.ndarray]:
    dtype = np.result_type(t.dtype, np.complex64)

    def one(tm: np.ndarray, zm: np.ndarray) -> tuple:
        if not (np.all(np.isfinite(tm)) and np.all(np.isfinite(zm))):
            return np.full(tm.shape, np.nan, dtype), np.full(zm.shape, np.nan, dtype)
        return scipy.linalg.rsf2csf(tm, zm, check_finite=False)

    return [o.astype(dtype, copy=False) for o in per_matrix(one, (t, z), (2, 2))]


def _rsf2csf_aval(t: ShapedArray, z: ShapedArray) -> list[ShapedArray]:
    dtype = np.result_type(t.dtype, np.complex64)
    return [ShapedArray(t.shape, dtype), ShapedArray(z.shape, dtype)]


rsf2csf_p = _define("rsf2csf", _rsf2csf_impl, _rsf2csf_aval, multiple_results=True)


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """The complex Schur form (t, z) from the real one (T, Z)."""
    t, z = _promote_inexact(jnp.asarray(T), jnp.asarray(Z))
    if t.shape[-2:] != z.shape[-2:] or t.shape[-1] != t.shape[-2]:
        raise ValueError(f"rsf2csf takes square T and Z of one shape, got {t.shape} and {z.shape}.")
    return tuple(rsf2csf_p.bind(t, z))


def qr_multiply(a: Any, c: Any, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False) -> tuple:
    """c @ q ('right') or q @ c ('left') with a's economic QR factor q (conjugated with `conjugate`), then r
    (and the column pivots)."""
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    a, c = _promote_inexact(jnp.asarray(a), jnp.asarray(c))
    q, r, *pivots = lax_linalg.qr(a, pivoting=pivoting, full_matrices=False)
    if conjugate:
        q = jnp.conj(q)
    m, k = q.shape[-2:]
    if mode == "right":
        if c.shape[-1] != m:
            raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape {a.shape} so Q has "
                             f"{m} rows, but c has {c.shape[-1]} columns (expected {m}).")
        product = jnp.matmul(c, q)
    else:
        rows = c.shape[0]
        if rows != k:
            raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape {a.shape} so Q has "
                             f"{k} columns, but c has {rows} rows (expected {k}).")
        product = jnp.matmul(q, c)
    return (product, r, *pivots)


def polar(a: Any, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Any, Any]:
    """Polar decomposition: (u, p) with a = u p ('right') or a = p u ('left'), u with orthonormal columns (rows)
    and p Hermitian positive semi-definite."""
    if side not in ("right", "left"):
        raise ValueError(f"side={side!r} is not understood; pass 'right' or 'left'.")
    (a,) = _promote_inexact(jnp.asarray(a))
    m, n = a.shape[-2:]
    if method == "svd":
        w, s, vh = jnp_linalg.svd(a, full_matrices=False)
        u = jnp.matmul(w, vh)
        if side == "right":
            p = jnp.matmul(jnp.conj(jnp.swapaxes(vh, -1, -2)) * s[..., None, :].astype(a.dtype), vh)
        else:
            p = jnp.matmul(w * s[..., None, :].astype(a.dtype), jnp.conj(jnp.swapaxes(w, -1, -2)))
        return u, p
    if method != "qdwh":
        raise ValueError(f"Unknown polar decomposition method {method!r}; pass 'qdwh' or 'svd'.")
    if (side == "right" and m < n) or (side == "left" and m >= n):
        raise NotImplementedError(f"method='qdwh' only supports mxn matrices where m < n where side='right' and "
                                  f"m >= n side='left', got {a.shape} with side={side!r}")
    eps = float(np.finfo(a.dtype).eps) if eps is None else float(eps)
    iterations = 10 if max_iterations is None else int(max_iterations)
    operand = a if side == "right" else jnp.conj(jnp.swapaxes(a, -1, -2))
    u, p, _, _ = qdwh_p.bind(operand, max_iterations=iterations, eps=eps)
    return (u, p) if side == "right" else (jnp.conj(jnp.swapaxes(u, -1, -2)), p)


def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[float, float] | None = None, tol: float | None = None,
                     key: Any = None) -> Any:
    """Eigenvalues (ascending), and unless `eigvals_only` eigenvectors, of the Hermitian tridiagonal matrix with
    diagonal `d` and sub-diagonal `e`; select='i' keeps the eigenvalues select_range[0] to select_range[1]."""
    d, e = jnp.asarray(d), jnp.asarray(e)
    if not all(jnp.issubdtype(x.dtype, np.inexact) for x in (d, e)):
        raise TypeError(f"Only float32 and float64 inputs are supported as inputs to jax.scipy.linalg."
                        f"eigh_tridiagonal, got {d.dtype} and {e.dtype}")
    if d.dtype != e.dtype:
        raise TypeError(f"diagonal and off-diagonal values must have same dtype, got {d.dtype} and {e.dtype}")
    if select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented")
    if select not in ("a", "i"):
        raise ValueError(f"select must be 'a', 'i' or 'v', got {select!r}.")
    n = d.shape[-1]
    if e.shape[-1] != max(n - 1, 0):
        raise ValueError(f"eigh_tridiagonal needs len(e) == len(d) - 1, got {e.shape[-1]} and {n}.")
    dtype = jnp.result_type(d, e)
    values = jnp.concatenate([d.astype(dtype), e.astype(dtype), jnp.conj(e).astype(dtype),
                              jnp.zeros(d.shape[:-1] + (1,), dtype)], axis=-1)
    i, j = np.indices((n, n))
    index = np.where(i == j, i, np.where(i == j + 1, n + j, np.where(j == i + 1, 2 * n - 1 + i, 3 * n - 2)))
    w, v = jnp_linalg.eigh(jnp.take(values, jnp.asarray(index.astype(np.int32)), axis=-1))
    if select == "i":
        lo, hi = select_range
        w, v = w[..., lo:hi + 1], v[..., :, lo:hi + 1]
    return w if eigvals_only else (w, v)


__all__ = ["eigh_tridiagonal", "hessenberg", "lu", "lu_factor", "lu_solve", "polar", "qr_multiply", "rsf2csf",
           "rsf2csf_p", "schur"]
