"""LAPACK-backed primitives of jax.lax.linalg without derivatives in JAX: Hessenberg and tridiagonal reduction,
Householder products, Schur form, pivoting decisions and permutations.

Each runs SciPy's LAPACK driver on every matrix of the (flattened) batch; the results keep LAPACK's compact
formats (reflectors below the diagonal, their scalings `taus`), as JAX's do.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import scipy.linalg
from scipy.linalg import lapack

from ..core.core import ShapedArray, aval_of
from ..interpreters.ad import Zero, jvp_rules, tangent_aval
from .linalg import _define, _real_dtype


def per_matrix(function: Callable[..., tuple], arrays: tuple[np.ndarray, ...], cores: tuple[int, ...]) -> list:
    """`function` on each batch entry of `arrays` (the trailing `cores[i]` dimensions of array i are its core);
    the outputs, stacked back under the common batch shape."""
    batch = arrays[0].shape[:arrays[0].ndim - cores[0]]
    results = [function(*(a[index] for a in arrays)) for index in np.ndindex(*batch)]
    if not results:  # an empty batch: the output shapes from a dummy matrix
        dummy = function(*(np.ones(a.shape[a.ndim - c:], a.dtype) for a, c in zip(arrays, cores)))
        return [np.empty(batch + np.shape(o), np.asarray(o).dtype) for o in dummy]
    return [np.stack([r[i] for r in results]).reshape(batch + np.shape(results[0][i])) for i in range(len(results[0]))]


def _driver(name: str, dtype: np.dtype) -> Callable[..., Any]:
    return lapack.get_lapack_funcs(name, dtype=dtype)


def zero_jvp(primitive: Any) -> None:
    """Outputs that are piecewise constant (pivots, permutations): zero tangents."""

    def rule(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
        out = primitive.bind(*primals, **params)
        outs = out if primitive.multiple_results else [out]
        zeros = [Zero(tangent_aval(aval_of(o))) for o in outs]
        return out, (zeros if primitive.multiple_results else zeros[0])

    jvp_rules[primitive] = rule


# ---- LU --------------------------------------------------------------------------------------------------------


def _permutation(pivots: np.ndarray, size: int) -> np.ndarray:
    """The row permutation that applying the swaps `pivots` (row i with row pivots[i], in order) makes."""
    batch = pivots.shape[:-1]
    perm = np.broadcast_to(np.arange(size, dtype=np.int32), batch + (size,)).copy()
    flat, piv = perm.reshape(-1, size), pivots.reshape(-1, pivots.shape[-1])
    rows = np.arange(flat.shape[0])
    for i in range(piv.shape[-1]):  # swaps are sequential: one vectorised step per pivot
        j = piv[:, i]
        fi, fj = flat[rows, i].copy(), flat[rows, j].copy()
        flat[rows, i], flat[rows, j] = fj, fi
    return flat.reshape(batch + (size,))


def _lu_one(a: np.ndarray) -> tuple:
    lu, piv, _ = _driver("getrf", a.dtype)(a)
    return lu.astype(a.dtype, copy=False), piv.astype(np.int32)


def _lu_impl(a: np.ndarray) -> list[np.ndarray]:
    lu, pivots = per_matrix(_lu_one, (a,), (2,))
    return [lu, pivots, _permutation(pivots, a.shape[-2])]


def _lu_aval(a: ShapedArray) -> list[ShapedArray]:
    *batch, m, n = a.shape
    return [a, ShapedArray(tuple(batch) + (min(m, n),), np.dtype(np.int32)),
            ShapedArray(tuple(batch) + (m,), np.dtype(np.int32))]


lu_p = _define("lu", _lu_impl, _lu_aval, multiple_results=True)


def _pivots_to_permutation_aval(pivots: ShapedArray, *, permutation_size: int) -> ShapedArray:
    return ShapedArray(pivots.shape[:-1] + (permutation_size,), np.dtype(np.int32))


lu_pivots_to_permutation_p = _define(
    "lu_pivots_to_permutation",
    lambda pivots, *, permutation_size: _permutation(np.asarray(pivots, np.int32), permutation_size),
    _pivots_to_permutation_aval, core=1)
zero_jvp(lu_pivots_to_permutation_p)

# ---- pivoted QR: the column order only (Q and R come from qr_p on the permuted columns) -------------------------


def _qr_pivots_impl(a: np.ndarray) -> np.ndarray:
    return per_matrix(lambda m: (scipy.linalg.qr(m, mode="r", pivoting=True)[1].astype(np.int32),), (a,), (2,))[0]


qr_pivots_p = _define("qr_pivots", _qr_pivots_impl,
                      lambda a: ShapedArray(a.shape[:-2] + a.shape[-1:], np.dtype(np.int32)))
zero_jvp(qr_pivots_p)

# ---- Hessenberg and tridiagonal reductions ------------------------------------------------------------------------


def _hessenberg_one(a: np.ndarray) -> tuple:
    h, tau, _ = _driver("gehrd", a.dtype)(a)
    return h.astype(a.dtype, copy=False), tau[: max(a.shape[-1] - 1, 0)].astype(a.dtype, copy=False)


hessenberg_p = _define(
    "hessenberg", lambda a: per_matrix(_hessenberg_one, (a,), (2,)),
    lambda a: [a, ShapedArray(a.shape[:-2] + (max(a.shape[-1] - 1, 0),), a.dtype)], multiple_results=True)


def _tridiagonal_one(a: np.ndarray, lower: bool) -> tuple:
    name = "hetrd" if np.iscomplexobj(a) else "sytrd"
    c, d, e, tau, _ = _driver(name, a.dtype)(a, lower=int(lower))
    real = _real_dtype(a.dtype)
    return c.astype(a.dtype, copy=False), d.astype(real, copy=False), e.astype(real, copy=False), \
        tau.astype(a.dtype, copy=False)


def _tridiagonal_aval(a: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    *batch, n = a.shape[:-1]
    real = _real_dtype(a.dtype)
    short = tuple(batch) + (max(n - 1, 0),)
    return [a, ShapedArray(tuple(batch) + (n,), real), ShapedArray(short, real), ShapedArray(short, a.dtype)]


tridiagonal_p = _define("tridiagonal", lambda a, *, lower: per_matrix(lambda m: _tridiagonal_one(m, lower), (a,), (2,)),
                        _tridiagonal_aval, multiple_results=True)

# ---- Householder products --------------------------------------------------------------------------------------


def _householder_one(a: np.ndarray, taus: np.ndarray) -> tuple:
    name = "ungqr" if np.iscomplexobj(a) else "orgqr"
    if taus.shape[-1] == 0:  # no reflectors: the leading columns of the identity
        return (np.eye(*a.shape, dtype=a.dtype),)
    full = np.concatenate([taus, np.zeros(a.shape[-1] - taus.shape[-1], a.dtype)])
    q, _, _ = _driver(name, a.dtype)(a, full)
    return (q.astype(a.dtype, copy=False),)


householder_product_p = _define(
    "householder_product", lambda a, taus: per_matrix(_householder_one, (a, taus), (2, 1))[0], lambda a, taus: a)


def _ormqr_one(a: np.ndarray, taus: np.ndarray, c: np.ndarray, left: bool, transpose: bool) -> tuple:
    complex_ = np.iscomplexobj(a)
    name = "unmqr" if complex_ else "ormqr"
    trans = ("C" if complex_ else "T") if transpose else "N"
    k = taus.shape[-1]
    if k == 0:
        return (c.copy(),)
    lwork = max(1, c.shape[1] if left else c.shape[0]) * 64
    out, _, _ = _driver(name, a.dtype)("L" if left else "R", trans, a[:, :k], taus, c.copy(), lwork)
    return (out.astype(c.dtype, copy=False),)


ormqr_p = _define(
    "ormqr",
    lambda a, taus, c, *, left, transpose: per_matrix(lambda x, t, y: _ormqr_one(x, t, y, left, transpose),
                                                      (a, taus, c), (2, 1, 2))[0],
    lambda a, taus, c, **_: c)

# ---- Schur form ------------------------------------------------------------------------------------------------------


def _schur_one(a: np.ndarray, compute_schur_vectors: bool) -> tuple:
    if not np.all(np.isfinite(a)):  # LAPACK fails on NaNs and infinities: NaN results, as JAX
        nan = np.full(a.shape, np.nan, a.dtype)
        return (nan, nan) if compute_schur_vectors else (nan,)
    t, z = scipy.linalg.schur(a, output="complex" if np.iscomplexobj(a) else "real")
    out = (t.astype(a.dtype, copy=False), z.astype(a.dtype, copy=False))
    return out if compute_schur_vectors else out[:1]


schur_p = _define(
    "schur",
    lambda a, *, compute_schur_vectors: per_matrix(lambda m: _schur_one(m, compute_schur_vectors), (a,), (2,)),
    lambda a, *, compute_schur_vectors: [a, a] if compute_schur_vectors else [a], multiple_results=True)

__all__ = ["hessenberg_p", "householder_product_p", "lu_p", "lu_pivots_to_permutation_p", "ormqr_p", "qr_pivots_p",
           "schur_p", "tridiagonal_p", "per_matrix", "zero_jvp"]
