"""Matrix functions and equations of jax.scipy.linalg: expm and its Fréchet derivative, funm and sqrtm (through the
complex Schur form and recurrences along its super-diagonals), and Sylvester equations."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import numpy as jnp
from ..numpy import linalg as jnp_linalg
from ..lax import linalg_api as lax_linalg
from ..numpy.promotion import _promote_inexact
from ..transforms.autodiff import jvp, stop_gradient


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:
    """The matrix exponential (scaling and squaring with a degree-12 Taylor series)."""
    (A,) = _promote_inexact(jnp.asarray(A))
    norm = jnp.max(jnp.sum(jnp.abs(A), axis=-2), axis=-1)
    squarings = jnp.clip(jnp.ceil(jnp.log2(jnp.maximum(norm, 1e-30) / 0.5)), 0, max_squarings)
    scaled = A / jnp.expand_dims(jnp.expand_dims(2.0 ** squarings, -1), -1)
    eye = jnp.broadcast_to(jnp.eye(A.shape[-1], dtype=A.dtype), A.shape)
    result, term = eye, eye
    for k in range(1, 13):
        term = jnp.matmul(term, scaled) / k
        result = result + term
    for i in range(max_squarings):
        squared = jnp.matmul(result, result)
        mask = jnp.expand_dims(jnp.expand_dims(i < squarings, -1), -1)
        result = jnp.where(mask, squared, result)
    return result


def expm_frechet(A: Any, E: Any, *, method: str | None = None, compute_expm: bool = True) -> Any:
    """The Fréchet derivative of expm at A in the direction E: (expm(A), derivative), or the derivative alone."""
    A, E = _promote_inexact(jnp.asarray(A), jnp.asarray(E))
    if A.shape != E.shape or A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"expm_frechet takes square A and E of one shape, got {A.shape} and {E.shape}.")
    value, derivative = jvp(expm, (A,), (E,))
    return (value, derivative) if compute_expm else derivative


def _square_2d(a: Any, name: str) -> Any:
    (a,) = _promote_inexact(jnp.asarray(a))
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} expects a square 2-d matrix, got shape {a.shape}.")
    return a


def _complex_schur(a: Any) -> tuple[Any, Any]:
    t, z = lax_linalg.schur(a.astype(jnp.result_type(a.dtype, np.complex64)))
    return t, z


def _unitary_back(f: Any, z: Any) -> Any:
    return jnp.matmul(jnp.matmul(z, f), jnp.conj(z.T))


def sqrtm(A: Any, blocksize: int = 1) -> Any:
    """The principal square root of A (complex), from the upper-triangular root of its complex Schur form."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    t, z = _complex_schur(_square_2d(A, "sqrtm"))
    n = t.shape[0]
    root = jnp.diag(jnp.sqrt(jnp.diagonal(t)))
    for p in range(1, n):  # super-diagonal p from the ones below it: R_ij (R_ii + R_jj) = T_ij - sum R_ik R_kj
        inner = jnp.diagonal(jnp.matmul(root, root), p)
        diag = jnp.diagonal(root)
        root = root + jnp.diag((jnp.diagonal(t, p) - inner) / (diag[:-p] + diag[p:]), p)
    return _unitary_back(root, z)


def funm(A: Any, func: Callable[[Any], Any], disp: bool = True) -> Any:
    """f(A) for a function `func` of arrays (applied to the eigenvalues), by Parlett's recurrence on A's complex Schur
    form; with disp=False also an estimate of the relative error."""
    a = _square_2d(A, "funm")
    t, z = _complex_schur(a)
    n = t.shape[0]
    f = jnp.diag(jnp.asarray(func(jnp.diagonal(t))).astype(t.dtype))
    smallest = jnp.asarray(np.inf, jnp.real(t).dtype)
    for p in range(1, n):  # F T = T F on super-diagonal p, its entries still zero: F_ij (T_jj - T_ii) = (T F - F T)_ij
        commutator = jnp.diagonal(jnp.matmul(t, f) - jnp.matmul(f, t), p)
        td = jnp.diagonal(t)
        gaps = td[p:] - td[:-p]
        smallest = jnp.minimum(smallest, jnp.min(jnp.abs(gaps)))
        f = f + jnp.diag(commutator / gaps, p)
    result = _unitary_back(f, z)
    if disp:
        return result
    tol = float(np.finfo(jnp.real(t).dtype).eps)
    smallest = jnp.where(smallest == 0, tol, smallest)
    upper_norm = jnp.max(jnp.sum(jnp.abs(jnp.triu(t, 1)), axis=0))
    error = jnp.minimum(1.0, jnp.maximum(tol, (tol / smallest) * upper_norm))
    error = jnp.where(jnp.all(jnp.isfinite(result)), error, np.inf)
    return result, error


def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur", tol: float = 1e-8) -> Any:
    """X with A X + X B = C (NaN where A and -B share an eigenvalue within `tol`, the equation being singular)."""
    if method not in ("schur", "eigen"):
        raise ValueError(f'Unrecognized method {method}. The two valid methods are either "schur" or "eigen".')
    A, B, C = _promote_inexact(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    n, m = A.shape[-1], B.shape[-1]
    if A.shape[-2] != n or B.shape[-2] != m or C.shape[-2:] != (n, m):
        raise ValueError(f"solve_sylvester needs A (n, n), B (m, m) and C (n, m), got {A.shape}, {B.shape} and "
                         f"{C.shape}.")
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2], C.shape[:-2])
    # row-major vec: vec(A X) = (A kron I) vec(X), vec(X B) = (I kron B^T) vec(X)
    system = (jnp.einsum("...ik,jl->...ijkl", A, jnp.eye(m, dtype=A.dtype))
              + jnp.einsum("ik,...lj->...ijkl", jnp.eye(n, dtype=B.dtype), B))
    system = jnp.broadcast_to(system.reshape(system.shape[:-4] + (n * m, n * m)), batch + (n * m, n * m))
    rhs = jnp.broadcast_to(C, batch + (n, m)).reshape(batch + (n * m, 1))
    x = jnp_linalg.solve(system, rhs).reshape(batch + (n, m))
    gaps = jnp.abs(jnp_linalg.eigvals(stop_gradient(A))[..., :, None] + jnp_linalg.eigvals(stop_gradient(B))[..., None, :])
    singular = jnp.min(gaps, axis=(-2, -1)) < tol
    return jnp.where(singular[..., None, None], jnp.asarray(np.nan, x.dtype), x)


__all__ = ["expm", "expm_frechet", "funm", "solve_sylvester", "sqrtm"]
