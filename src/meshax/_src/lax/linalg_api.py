"""jax.lax.linalg's public surface: the decompositions and solves on the trailing two dimensions, with JAX's
signatures, output structures and dtypes, over the primitives of linalg.py, linalg_lapack.py and
linalg_structured.py."""
from __future__ import annotations

import enum
from typing import Any, Callable

import numpy as np

from ..core.core import aval_of
from ..numpy.promotion import _promote_inexact
from .linalg import (_H, _jnp, _mm, cholesky_p, eig_p, eigh_p, qr_p, svd_p, triangular_solve,
                     triangular_solve_p)
from .linalg_lapack import (hessenberg_p, householder_product_p, lu_p, lu_pivots_to_permutation_p, ormqr_p,
                            qr_pivots_p, schur_p, tridiagonal_p)
from .linalg_structured import cholesky_update_p, qdwh_p, symmetric_product_p, tridiagonal_solve_p

_INEXACT = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


class EigImplementation(enum.Enum):
    """Which library computes a non-symmetric eigendecomposition (meshax always uses LAPACK through NumPy)."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """Which algorithm computes a Hermitian eigendecomposition (meshax always uses LAPACK through NumPy)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """Which algorithm computes a singular value decomposition (meshax always uses LAPACK's gesdd through NumPy)."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def _operand(x: Any, name: str, position: int = 0, dtypes: tuple = _INEXACT, min_rank: int = 2) -> Any:
    """`x` as an array, after JAX's checks of its dtype and rank."""
    x = _jnp().asarray(x)
    dtype = aval_of(x).dtype
    if dtype not in dtypes:
        names = ", ".join(sorted(str(d) for d in dtypes))
        raise TypeError(f"{name} does not accept dtype {dtype} at position {position}; pass one of: {names}.")
    if aval_of(x).ndim < min_rank:
        raise TypeError(f"Input {position} to {name} must have rank at least {min_rank}, but got shape={x.shape}.")
    return x


def _square(x: Any, name: str) -> Any:
    x = _operand(x, name)
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{name} requires square matrices in its last two dimensions, got shape {x.shape}.")
    return x


def _symmetrized(x: Any) -> Any:
    return (x + _H(x)) / 2


def cholesky(x: Any, *, symmetrize_input: bool = True) -> Any:
    """The lower Cholesky factor of the Hermitian positive-definite `x` (NaNs where it is not positive definite)."""
    x = _square(_promote_inexact(_jnp().asarray(x))[0], "cholesky")
    return cholesky_p.bind(_symmetrized(x) if symmetrize_input else x)


def cholesky_update(r_matrix: Any, w_vector: Any) -> Any:
    """The upper Cholesky factor of R^T R + w w^T, from the upper factor R and the vector w."""
    r = _operand(r_matrix, "cholesky_update", dtypes=_INEXACT[:2])
    w = _operand(w_vector, "cholesky_update", 1, dtypes=_INEXACT[:2], min_rank=1)
    if r.ndim != 2 or w.ndim != 1:
        raise TypeError(f"cholesky_update takes a matrix and a vector, got shapes {r.shape} and {w.shape}.")
    return cholesky_update_p.bind(r, w)


def _normalized_columns(v: Any) -> Any:
    jnp = _jnp()
    return v / jnp.sqrt(jnp.sum(jnp.abs(v) ** 2, axis=-2, keepdims=True)).astype(v.dtype)


def eig(x: Any, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: EigImplementation | None = None,
        use_magma: bool | None = None) -> list[Any]:
    """Eigenvalues of the square `x`, then (each unit-norm) its left and right eigenvectors as asked: a list."""
    x = _square(x, "eig")
    if not (compute_left_eigenvectors or compute_right_eigenvectors):
        return eig_p.bind(x, compute_vectors=False)
    w, vr = eig_p.bind(x, compute_vectors=True)
    out = [w]
    if compute_left_eigenvectors:  # the rows of vr^-1 are left eigenvectors
        jnp = _jnp()
        out.append(_normalized_columns(_H(jnp.linalg.inv(vr))))
    if compute_right_eigenvectors:
        out.append(vr)
    return out


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index: tuple[int, int] | None = None, implementation: EighImplementation | None = None
         ) -> tuple[Any, Any]:
    """Eigenvectors and (ascending) eigenvalues of the Hermitian `x`: the tuple (v, w). As JAX on CPU, a
    `subset_by_index` other than all eigenpairs is not supported."""
    x = _square(x, "eigh")
    if subset_by_index is not None and tuple(subset_by_index) != (0, x.shape[-1]):
        raise NotImplementedError("subset_by_index not supported on CPU and GPU")
    return tuple(eigh_p.bind(_symmetrized(x) if symmetrize_input else x, lower=lower))


def hessenberg(a: Any) -> list[Any]:
    """The upper Hessenberg form of the square `a` in LAPACK's compact form: [h with the reflectors below its
    first sub-diagonal, taus]."""
    return hessenberg_p.bind(_square(a, "hessenberg"))


def householder_product(a: Any, taus: Any) -> Any:
    """The m x n matrix with orthonormal columns that the Householder reflectors below `a`'s diagonal (scaled by
    `taus`) make."""
    a = _operand(a, "householder_product")
    taus = _operand(taus, "householder_product", 1, min_rank=1)
    m, n = a.shape[-2:]
    if m < n or taus.shape[-1] > n or taus.shape[:-1] != a.shape[:-2]:
        raise ValueError(f"householder_product needs m >= n >= len(taus) with matching batch dimensions, got a of "
                         f"shape {a.shape} and taus of shape {taus.shape}.")
    return householder_product_p.bind(a, taus)


def lu(x: Any) -> list[Any]:
    """LU decomposition with partial pivoting: [lu (L's strict lower part and U together), pivots (int32, the row
    swapped with each row in turn), permutation (int32, rows of x in the order of L U)]."""
    return lu_p.bind(_operand(x, "lu"))


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """The permutation (int32, of length `permutation_size`) that the row swaps `pivots` make."""
    pivots = _jnp().asarray(pivots)
    if aval_of(pivots).dtype != np.dtype(np.int32):
        raise TypeError(f"lu_pivots_to_permutation takes int32 pivots, got {aval_of(pivots).dtype}.")
    if pivots.ndim < 1:
        raise ValueError("lu_pivots_to_permutation takes pivots of rank at least 1, got a scalar.")
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the trailing dimension of the "
                         f"pivots. Got pivots size {pivots.shape[-1]}")
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def ormqr(a: Any, taus: Any, c: Any, *, left: bool = True, transpose: bool = False) -> Any:
    """`c` multiplied by Q (or its conjugate transpose), from `left` or the right, Q being the Householder reflectors
    below `a`'s diagonal scaled by `taus`."""
    a = _operand(a, "ormqr")
    taus = _operand(taus, "ormqr", 1, min_rank=1)
    c = _operand(c, "ormqr", 2)
    return ormqr_p.bind(a, taus, c, left=left, transpose=transpose)


def qdwh(x: Any, *, is_hermitian: bool = False, max_iterations: int | None = None, eps: float | None = None,
         dynamic_shape: tuple[int, int] | None = None) -> tuple[Any, Any, Any, Any]:
    """Polar decomposition x = u h by the QDWH iteration: (u, h, iterations run, whether they converged)."""
    x = _operand(x, "qdwh")
    if x.ndim != 2:
        raise ValueError(f"qdwh takes one matrix, got shape {x.shape}; use vmap for a batch.")
    m, n = x.shape
    if m < n:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    if dynamic_shape is not None:
        raise NotImplementedError("qdwh's dynamic_shape is not supported in meshax; pass the unpadded matrix.")
    eps = float(np.finfo(aval_of(x).dtype).eps) if eps is None else float(eps)
    return tuple(qdwh_p.bind(x, max_iterations=10 if max_iterations is None else int(max_iterations), eps=eps))


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True, use_magma: bool | None = None) -> tuple:
    """QR decomposition: (q, r), or with `pivoting` (q, r, p) where x[..., :, p] = q r and p is int32."""
    x = _operand(x, "qr")
    if not pivoting:
        return tuple(qr_p.bind(x, full_matrices=full_matrices))
    p = qr_pivots_p.bind(x)
    columns = (_jnp().arange(x.shape[-1]) == p[..., :, None]).astype(x.dtype)  # row i: the one-hot of p[i]
    q, r = qr_p.bind(_mm(x, _jnp().swapaxes(columns, -1, -2)), full_matrices=full_matrices)
    return q, r, p


def schur(x: Any, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Callable[..., Any] | None = None) -> list[Any]:
    """The Schur form of the square `x` (real quasi-triangular for real `x`), then its Schur vectors: a list."""
    x = _square(x, "schur")
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("The sort feature of LAPACK's gees routine is not implemented.")
    return schur_p.bind(x, compute_schur_vectors=compute_schur_vectors)


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index: tuple[int, int] | None = None,
        algorithm: SvdAlgorithm | None = None) -> Any:
    """Singular value decomposition: (u, s, vh), or s alone without `compute_uv`."""
    x = _operand(x, "svd")
    if subset_by_index is not None:
        if full_matrices:
            raise ValueError("full_matrices and subset_by_index cannot both be set")
        if tuple(subset_by_index) != (0, min(x.shape[-2:])):
            raise NotImplementedError("subset_by_index not implemented for CPU and GPU")
    if not compute_uv:
        return svd_p.bind(x, full_matrices=full_matrices, compute_uv=False)[0]
    s, u, vh = svd_p.bind(x, full_matrices=full_matrices, compute_uv=True)
    return u, s, vh


def symmetric_product(a_matrix: Any, c_matrix: Any, *, alpha: float = 1.0, beta: float = 0.0,
                      symmetrize_output: bool = False) -> Any:
    """alpha a a^T + beta c for real matrices."""
    a = _operand(a_matrix, "symmetric_product", dtypes=_INEXACT[:2])
    c = _operand(c_matrix, "symmetric_product", 1, dtypes=_INEXACT[:2])
    out = symmetric_product_p.bind(a, c, alpha=float(alpha), beta=float(beta))
    return (out + _jnp().swapaxes(out, -1, -2)) / 2 if symmetrize_output else out


def tridiagonal(a: Any, *, lower: bool = True) -> list[Any]:
    """The reduction of the Hermitian `a` to real tridiagonal form, LAPACK's compact form: [a with the reflectors,
    diagonal d, off-diagonal e, taus]."""
    return tridiagonal_p.bind(_square(a, "tridiagonal"), lower=lower)


def tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any, *, perturb_singular: bool = False) -> Any:
    """x with T x = b, T tridiagonal with sub-diagonal dl[1:], diagonal d and super-diagonal du[:-1]."""
    dl, d, du = (_operand(v, "tridiagonal_solve", i, min_rank=1) for i, v in enumerate((dl, d, du)))
    b = _operand(b, "tridiagonal_solve", 3)
    if any(v.shape != b.shape[:-1] for v in (dl, d, du)) or len({aval_of(v).dtype for v in (dl, d, du, b)}) > 1:
        raise TypeError(f"tridiagonal_solve needs dl, d, du of shape {b.shape[:-1]} (b's without its last dimension) "
                        f"and one dtype for all, got {dl.shape}, {d.shape}, {du.shape} and b {b.shape}.")
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=perturb_singular)


__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "cholesky_p", "cholesky_update",
           "cholesky_update_p", "eig", "eig_p", "eigh", "eigh_p", "hessenberg", "hessenberg_p", "householder_product",
           "householder_product_p", "lu", "lu_p", "lu_pivots_to_permutation", "lu_pivots_to_permutation_p", "ormqr",
           "ormqr_p", "qdwh", "qr", "qr_p", "schur", "schur_p", "svd", "svd_p", "symmetric_product",
           "symmetric_product_p", "triangular_solve", "triangular_solve_p", "tridiagonal", "tridiagonal_p",
           "tridiagonal_solve", "tridiagonal_solve_p"]
