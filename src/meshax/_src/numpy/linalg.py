"""meshax.numpy.linalg: jax.numpy.linalg's API on the linear-algebra primitives (lax/linalg.py).

Inputs are promoted to an inexact dtype (float32 unless x64), batch dimensions broadcast
together; decompositions bind one primitive, the rest (inv, norms, pinv, lstsq, powers...)
are built from them and meshax.numpy's operations, so they differentiate and trace alike.
"""
from __future__ import annotations

import builtins
import operator
from typing import Any, NamedTuple, Sequence

import numpy as np

from .. import numpy as jnp
from ..core.core import aval_of
from ..lax import linalg as L
from .promotion import ArrayLike, _as_array, _promote_inexact as _promote_host, _shape
from ..core.dtypes import finfo, issubdtype


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


def _promote_inexact(*args: Any) -> list[Any]:
    """The arguments promoted to one inexact dtype, as arrays (host values placed on the default device)."""
    return [_as_array(x) for x in _promote_host(*args)]


def _square(a: ArrayLike, name: str) -> Any:
    (a,) = _promote_inexact(a)
    shape = _shape(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"{name}: argument must be a (batch of) square matrices; got shape {shape}.")
    return a


def _matrix(a: ArrayLike, name: str) -> Any:
    (a,) = _promote_inexact(a)
    if len(_shape(a)) < 2:
        raise ValueError(f"{name}: argument must have at least 2 dimensions; got shape {_shape(a)}.")
    return a


def _is_complex(x: Any) -> bool:
    return issubdtype(aval_of(x).dtype, np.complexfloating)


def _H(x: Any) -> Any:
    t = jnp.swapaxes(x, -1, -2)
    return jnp.conj(t) if _is_complex(x) else t


def _symmetrize(a: Any) -> Any:
    return (a + _H(a)) / 2


def matrix_transpose(x: ArrayLike, /) -> Any:
    """Swaps the last two dimensions."""
    return jnp.swapaxes(x, -1, -2)


# ---- decompositions ------------------------------------------------------------------------------------------


def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """The Cholesky factor L (a = L L^H) of a Hermitian positive-definite matrix; U = L^H when `upper`.
    NaNs where the matrix is not positive definite, as JAX."""
    a = _square(a, "cholesky")
    l = L.cholesky_p.bind(_symmetrize(a) if symmetrize_input else a)
    return _H(l) if upper else l


def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of a Hermitian matrix."""
    a = _square(a, "eigh")
    lower = (UPLO or "L").upper() == "L"
    v, w = L.eigh_p.bind(_symmetrize(a) if symmetrize_input else a, lower=lower)
    return EighResult(w, v)


def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Any:
    """The eigenvalues of a Hermitian matrix, ascending."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def eig(a: ArrayLike) -> EigResult:
    """Eigenvalues and right eigenvectors of a general square matrix (complex results)."""
    w, v = L.eig_p.bind(_square(a, "eig"), compute_vectors=True)
    return EigResult(w, v)


def eigvals(a: ArrayLike) -> Any:
    """The eigenvalues of a general square matrix (complex)."""
    return L.eig_p.bind(_square(a, "eigvals"), compute_vectors=False)[0]


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: Any = None) -> Any:
    """Singular value decomposition: SVDResult(U, S, Vh) with a = U diag(S) Vh, or S alone."""
    a = _matrix(a, "svd")
    if subset_by_index is not None:
        raise NotImplementedError("svd: subset_by_index is not supported.")
    if hermitian:
        return _hermitian_svd(a, compute_uv)
    if not compute_uv:
        return L.svd_p.bind(a, full_matrices=False, compute_uv=False)[0]
    s, u, vh = L.svd_p.bind(a, full_matrices=bool(full_matrices), compute_uv=True)
    return SVDResult(u, s, vh)


def _hermitian_svd(a: Any, compute_uv: bool) -> Any:
    """The SVD of a (batch of) Hermitian matrices from their eigendecomposition (of the symmetrized input, as
    JAX's): singular values |w| descending, U the eigenvectors in that order, Vh those scaled by sign(w), conjugated."""
    shape = _shape(a)
    if shape[-1] != shape[-2]:
        raise ValueError(f"The input to linalg.eigh must have shape [..., n, n], got shape {shape}")
    w, v = eigh(a)
    magnitudes = jnp.abs(w)
    order = jnp.argsort(jnp.negative(magnitudes), axis=-1, stable=True)
    s = jnp.take_along_axis(magnitudes, order, axis=-1)
    if not compute_uv:
        return s
    columns = order[..., None, :]
    u = jnp.take_along_axis(v, columns, axis=-1)
    vh = _H(jnp.take_along_axis(v * jnp.astype(jnp.sign(w), v.dtype)[..., None, :], columns, axis=-1))
    return SVDResult(u, s, vh)


def svdvals(x: ArrayLike, /) -> Any:
    """The singular values, descending."""
    return svd(x, compute_uv=False)


def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """QR decomposition; mode "reduced", "complete", "r" (R only) or "raw" is not supported."""
    a = _matrix(a, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r = L.qr_p.bind(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


# ---- determinants, solves, inverses ---------------------------------------------------------------------------


def det(a: ArrayLike) -> Any:
    """The determinant."""
    return L.det_p.bind(_square(a, "det"))


def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """The sign (or phase) and log of the absolute value of the determinant."""
    sign, logabs = L.slogdet_p.bind(_square(a, "slogdet"))
    return SlogdetResult(sign, logabs)


def solve(a: ArrayLike, b: ArrayLike) -> Any:
    """x with a x = b; b is (N,) (a vector for every matrix) or (..., N, M), batch dimensions broadcast."""
    a = _square(a, "solve")
    a, b = _promote_inexact(a, b)
    a_shape, b_shape = _shape(a), _shape(b)
    if len(b_shape) == 1:
        batch = a_shape[:-2]
        rhs = jnp.broadcast_to(b[:, None], batch + (b_shape[0], 1))
        return L.solve_p.bind(a, rhs)[..., 0]
    batch = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    a = jnp.broadcast_to(a, batch + a_shape[-2:])
    b = jnp.broadcast_to(b, batch + b_shape[-2:])
    return L.solve_p.bind(a, b)


def inv(a: ArrayLike) -> Any:
    """The matrix inverse (solve against the identity)."""
    a = _square(a, "inv")
    shape = _shape(a)
    eye = jnp.broadcast_to(jnp.eye(shape[-1], dtype=aval_of(a).dtype), shape)
    return L.solve_p.bind(a, eye)


def matrix_power(a: ArrayLike, n: int) -> Any:
    """a raised to the integer power n by repeated squaring (inverse first for negative n)."""
    a = _square(a, "matrix_power")
    n = operator.index(n)
    if n == 0:
        return jnp.broadcast_to(jnp.eye(_shape(a)[-1], dtype=aval_of(a).dtype), _shape(a))
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else jnp.matmul(result, a)
        n >>= 1
        if n:
            a = jnp.matmul(a, a)
    return result


def pinv(a: ArrayLike, rtol: ArrayLike | None = None, hermitian: bool = False, *, rcond: ArrayLike | None = None
         ) -> Any:
    """The Moore-Penrose pseudo-inverse, from the SVD (singular values below rtol * max are dropped)."""
    a = _matrix(a, "pinv")
    m, n = _shape(a)[-2:]
    if rcond is not None:
        rtol = rcond
    if rtol is None:
        rtol = 10 * builtins.max(m, n) * finfo(np.empty((), aval_of(a).dtype).real.dtype).eps
    u, s, vh = svd(a, full_matrices=False)
    cutoff = jnp.asarray(rtol)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    keep = s > cutoff
    s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(aval_of(a).dtype)
    return jnp.matmul(_H(vh) * s_inv[..., None, :], _H(u))


def lstsq(a: ArrayLike, b: ArrayLike, rcond: float | None = None, *, numpy_resid: bool = False) -> tuple:
    """Least squares: (x, residuals, rank, singular values), x from the SVD pseudo-inverse."""
    a, b = _promote_inexact(a, b)
    if len(_shape(a)) != 2 or len(_shape(b)) not in (1, 2):
        raise TypeError(f"lstsq: a must be 2-D and b 1-D or 2-D; got {_shape(a)} and {_shape(b)}.")
    m, n = _shape(a)
    vector = len(_shape(b)) == 1
    b2 = b[:, None] if vector else b
    dtype = aval_of(a).dtype
    eps = finfo(np.empty((), dtype).real.dtype).eps
    rcond = eps * builtins.max(m, n) if rcond is None or rcond < 0 else rcond
    u, s, vh = svd(a, full_matrices=False)
    keep = s > rcond * jnp.max(s)
    rank = jnp.sum(keep).astype(np.int32)
    s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(dtype)
    x = jnp.matmul(_H(vh), s_inv[:, None] * jnp.matmul(_H(u), b2))
    if numpy_resid and not (int(rank) == n and m > n):
        resid = jnp.zeros((0,) if vector else (0,), dtype=s.dtype)
    else:
        resid = jnp.sum(jnp.abs(b2 - jnp.matmul(a, x)) ** 2, axis=0)
    if vector:
        x = x[:, 0]  # the residuals keep their one column, shape (1,), as JAX's
    return x, resid, rank, s


def matrix_rank(M: ArrayLike, rtol: ArrayLike | None = None, *, hermitian: bool = False,
                tol: ArrayLike | None = None) -> Any:
    """The number of singular values above rtol * the largest (or above `tol`); with `hermitian`, the singular
    values are the eigenvalues' magnitudes of the symmetrized matrix, as in JAX."""
    M = _matrix(M, "matrix_rank") if len(_shape(M)) >= 2 else _promote_inexact(M)[0]
    if len(_shape(M)) < 2:
        return jnp.any(M != 0).astype(np.int32)
    s = svd(M, compute_uv=False, hermitian=hermitian)
    if tol is not None:
        cutoff = jnp.asarray(tol)
    else:
        if rtol is None:
            rtol = builtins.max(_shape(M)[-2:]) * finfo(aval_of(s).dtype).eps
        cutoff = jnp.asarray(rtol)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    return jnp.sum(s > cutoff, axis=-1).astype(np.int32)


def cond(x: ArrayLike, p: Any = None) -> Any:
    """The condition number in norm p (2-norm by default: the ratio of extreme singular values)."""
    x = _square(x, "cond") if p not in (None, 2, -2) else _matrix(x, "cond")
    if p in (None, 2, -2):
        s = svdvals(x)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    return jnp.where(jnp.isnan(r), np.inf, r)


def tensorinv(a: ArrayLike, ind: int = 2) -> Any:
    """The inverse with respect to tensordot over the first `ind` dimensions."""
    (a,) = _promote_inexact(a)
    shape = _shape(a)
    rows, cols = shape[:ind], shape[ind:]
    size = int(np.prod(rows))
    return inv(a.reshape(size, -1)).reshape(cols + rows)


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: tuple[int, ...] | None = None) -> Any:
    """x with tensordot(a, x, x.ndim) == b."""
    a, b = _promote_inexact(a, b)
    if axes is not None:
        nd = len(_shape(a))
        axes = [ax % nd for ax in axes]
        a = jnp.moveaxis(a, axes, [nd - len(axes) + i for i in range(len(axes))])
    out_shape = _shape(a)[len(_shape(b)):]
    return solve(a.reshape(int(np.prod(_shape(b))), -1), b.reshape(-1)).reshape(out_shape)


def multi_dot(arrays: Sequence[ArrayLike], *, precision: Any = None) -> Any:
    """The product of a chain of matrices (first may be a row vector, last a column vector)."""
    if len(arrays) < 2:
        raise ValueError("multi_dot: expecting at least two arrays.")
    return jnp.einsum(",".join(_chain_subscripts(arrays)) + "->" + _chain_output(arrays), *arrays)


def _chain_subscripts(arrays: Sequence[ArrayLike]) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    subs = []
    for i, x in enumerate(arrays):
        nd = len(_shape(x))
        if nd == 1:
            subs.append(letters[1] if i == 0 else letters[i])
        else:
            subs.append(letters[i] + letters[i + 1])
    return subs


def _chain_output(arrays: Sequence[ArrayLike]) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    first = "" if len(_shape(arrays[0])) == 1 else letters[0]
    last = "" if len(_shape(arrays[-1])) == 1 else letters[len(arrays)]
    return first + last


# ---- norms -----------------------------------------------------------------------------------------------------


def vector_norm(x: ArrayLike, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """The p-norm of vectors along `axis` (all elements when None)."""
    (x,) = _promote_inexact(x)
    if axis is None:
        result = vector_norm(jnp.ravel(x), axis=0, ord=ord)
        return result.reshape((1,) * len(_shape(x))) if keepdims else result
    absx = jnp.abs(x)
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)) if _is_complex(x) else x * x, axis=axis,
                                keepdims=keepdims))
    if ord == np.inf:
        return jnp.max(absx, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return jnp.min(absx, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(aval_of(absx).dtype)
    if ord == 1:
        return jnp.sum(absx, axis=axis, keepdims=keepdims)
    p = float(ord)
    return jnp.sum(absx ** p, axis=axis, keepdims=keepdims) ** (1 / p)


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """A matrix norm over the last two dimensions."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def norm(x: ArrayLike, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """Vector or matrix norm, as numpy.linalg.norm."""
    (x,) = _promote_inexact(x)
    nd = len(_shape(x))
    if axis is None:
        if ord is None:
            return vector_norm(x, axis=None, keepdims=keepdims)
        axis = tuple(range(nd))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % nd for a in axes)
    if len(axes) == 1:
        return vector_norm(x, axis=axes[0], keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) != 2:
        raise ValueError(f"Invalid axis for norm: {axis}")
    row, col = axes
    absx = jnp.abs(x)
    if ord is None or ord == "fro":
        return vector_norm(x, axis=axes, keepdims=keepdims)
    if ord in (1, -1):
        sums = jnp.sum(absx, axis=row, keepdims=True)
        out = (jnp.max if ord == 1 else jnp.min)(sums, axis=col, keepdims=True)
    elif ord in (np.inf, -np.inf):
        sums = jnp.sum(absx, axis=col, keepdims=True)
        out = (jnp.max if ord == np.inf else jnp.min)(sums, axis=row, keepdims=True)
    elif ord in (2, -2, "nuc"):
        moved = jnp.moveaxis(x, axes, (-2, -1))
        s = svdvals(moved)
        out = jnp.max(s, axis=-1) if ord == 2 else jnp.min(s, axis=-1) if ord == -2 else jnp.sum(s, axis=-1)
        out = jnp.expand_dims(out, (row, col) if row < col else (col, row))
    else:
        raise ValueError(f"Invalid order '{ord}' for matrix norm.")
    return out if keepdims else jnp.squeeze(out, axis=axes)


# ---- products re-exported (as jax.numpy.linalg) -------------------------------------------------------------

from .products import cross, diagonal as _diagonal, matmul, outer as _outer, tensordot, trace as _trace, vecdot  # noqa: E402


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """The outer product of two vectors."""
    if len(_shape(x1)) != 1 or len(_shape(x2)) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={len(_shape(x1))} "
                         f"and x2.ndim={len(_shape(x2))}")
    return _outer(x1, x2)


def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Any:
    """The diagonals of the trailing matrices."""
    return _diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x: ArrayLike, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The traces of the trailing matrices."""
    out = _trace(x, offset=offset, axis1=-2, axis2=-1)
    return out if dtype is None else out.astype(dtype)


__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer",
           "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
           "vecdot", "vector_norm", "EighResult", "EigResult", "QRResult", "SlogdetResult", "SVDResult"]
