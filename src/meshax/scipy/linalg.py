"""Linear algebra (as jax.scipy.linalg): factorizations and solves on meshax arrays."""
from __future__ import annotations

from typing import Any

from meshax import numpy as jnp
from meshax._src.numpy import _promote_inexact
from meshax._src.lax.linalg import triangular_solve
from meshax._src.numpy import linalg as _np_linalg
from meshax._src.lax import linalg_api as _lax_linalg
from meshax._src.scipy.linalg_decomp import (eigh_tridiagonal, hessenberg, lu, lu_factor, lu_solve, polar,
                                             qr_multiply, rsf2csf, schur)
from meshax._src.scipy.linalg_matfun import expm, expm_frechet, funm, solve_sylvester, sqrtm
from meshax._src.scipy.linalg_special import (circulant, companion, convolution_matrix, dft, fiedler,
                                              fiedler_companion, hadamard, hankel, helmert, hilbert, invhilbert,
                                              invpascal, leslie, pascal, toeplitz)

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
           "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion", "funm",
           "hadamard", "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu",
           "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve",
           "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The determinant of `a` (the overwrite and finiteness flags are accepted and ignored, as JAX does)."""
    return _np_linalg.det(a)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The inverse of the square matrix `a`."""
    return _np_linalg.inv(a)


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals: None = None, type: int = 1,  # noqa: A002
         check_finite: bool = True) -> Any:
    """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix, read from its `lower` (else upper)
    triangle: the tuple (w, v), or w alone when `eigvals_only`. With a Hermitian positive-definite `b`, the
    generalized problem a v = w b v (type 1), a b v = w v (2) or b a v = w v (3), v normalized as SciPy's."""
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    if b is not None and type not in (1, 2, 3):
        raise ValueError(f"eigh's type must be 1, 2 or 3, got {type}.")
    uplo = "L" if lower else "U"
    if b is None:
        w, v = _np_linalg.eigh(a, UPLO=uplo)
        return w if eigvals_only else (w, v)
    a, b = _promote_inexact(jnp.asarray(a), jnp.asarray(b))
    factor = jnp.linalg.cholesky(b)  # b = L L^H

    def back(x: Any) -> Any:  # L^-H x
        return triangular_solve(factor, x, left_side=True, lower=True, transpose_a=True, conjugate_a=True)

    if type == 1:  # L^-1 a L^-H
        inner = triangular_solve(factor, a, left_side=True, lower=True)
        inner = triangular_solve(factor, inner, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    else:  # L^H a L
        inner = jnp.matmul(jnp.conj(jnp.swapaxes(factor, -1, -2)), jnp.matmul(a, factor))
    w, y = _np_linalg.eigh(inner, UPLO=uplo)
    if eigvals_only:
        return w
    return w, (jnp.matmul(factor, y) if type == 3 else back(y))


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple[Any, ...]:
    """QR decomposition as scipy spells it: mode 'full' (Q square), 'economic' (Q as wide as R is tall) or 'r'
    (R alone); with `pivoting` the column order p (int32, a[:, p] = Q R) comes last."""
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"Unsupported QR decomposition mode {mode!r}")
    (a,) = _promote_inexact(jnp.asarray(a))
    q, r, *pivots = _lax_linalg.qr(a, pivoting=pivoting, full_matrices=mode != "economic")
    return (r, *pivots) if mode == "r" else (q, r, *pivots)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """Singular value decomposition: the tuple (U, S, Vh), or S alone without `compute_uv`."""
    if not compute_uv:
        return _np_linalg.svd(a, compute_uv=False)
    return tuple(_np_linalg.svd(a, full_matrices=full_matrices))


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The Cholesky factor of `a`: upper triangular unless `lower`."""
    factor = jnp.linalg.cholesky(a)
    return factor if lower else jnp.conj(jnp.swapaxes(factor, -1, -2))


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, bool]:
    return cholesky(a, lower=lower), lower


def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug: Any = None, check_finite: bool = True) -> Any:
    """x with op(a) @ x = b for triangular `a` (trans: 0/'N' a, 1/'T' a.T, 2/'C' a^H)."""
    mode = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}[trans]
    a, b = _promote_inexact(a, b)
    vector = b.ndim == a.ndim - 1
    columns = jnp.expand_dims(b, -1) if vector else b
    out = triangular_solve(a, columns, left_side=True, lower=lower, transpose_a=mode > 0, conjugate_a=mode == 2,
                           unit_diagonal=unit_diagonal)
    return out[..., 0] if vector else out


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with A x = b, from A's Cholesky factor (c, lower)."""
    c, lower = c_and_lower
    if lower:
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans="C", lower=True)
    return solve_triangular(c, solve_triangular(c, b, trans="C", lower=False), lower=False)


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Any:
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"Expected assume_a to be one of ['gen', 'sym', 'her', 'pos']; got {assume_a!r}")
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=lower), b)
    return jnp.linalg.solve(a, b)


def block_diag(*arrs: Any) -> Any:
    """A block-diagonal matrix of the given (at most 2-d) arrays."""
    blocks = [jnp.atleast_2d(a) for a in arrs]
    if not blocks:
        return jnp.zeros((1, 0))
    dtype = jnp.result_type(*blocks)
    cols = sum(b.shape[1] for b in blocks)
    rows, start = [], 0
    for b in blocks:
        rows.append(jnp.pad(b.astype(dtype), ((0, 0), (start, cols - start - b.shape[1]))))
        start += b.shape[1]
    return jnp.concatenate(rows, axis=0)


def __getattr__(name: str):
    """Names of jax.scipy.linalg that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.scipy.linalg", name)
