"""The special matrices of jax.scipy.linalg.

Matrices built from vectors (circulant, toeplitz, hankel, companion, fiedler, leslie, convolution matrices) gather
each entry from one extended vector through a fixed index map, so they batch over leading dimensions and take
derivatives; matrices fixed by their size alone (hadamard, hilbert, pascal, dft, ...) are constants computed once
by SciPy.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from .. import numpy as jnp
from ..numpy.promotion import _promote_inexact


def _gather(values: Any, index: np.ndarray) -> Any:
    """The matrix whose entry (i, j) is values[..., index[i, j]] (batched over values' leading dimensions)."""
    return jnp.take(values, jnp.asarray(index.astype(np.int32)), axis=-1)


def _vector(x: Any, name: str) -> Any:
    x = jnp.asarray(x)
    if x.ndim < 1:
        raise ValueError(f"{name} takes an array of at least one dimension, got a scalar {x}; pass a 1-d array.")
    return x


def circulant(c: Any) -> Any:
    """The circulant matrix whose first column is `c` (batched over `c`'s leading dimensions)."""
    c = _vector(c, "circulant")
    n = c.shape[-1]
    i, j = np.indices((n, n))
    return _gather(c, (i - j) % n)


def _column_then_row(c: Any, r: Any) -> tuple[Any, tuple[int, int]]:
    """c followed by r[1:] (batch dimensions broadcast, one dtype), and the matrix shape (len(c), len(r))."""
    dtype = jnp.result_type(c, r)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    values = jnp.concatenate([jnp.broadcast_to(c, batch + (m,)).astype(dtype),
                              jnp.broadcast_to(r, batch + (n,))[..., 1:].astype(dtype)], axis=-1)
    return values, (m, n)


def toeplitz(c: Any, r: Any = None) -> Any:
    """The Toeplitz matrix with first column `c` and first row `r` (default conj(c)); r[0] is ignored."""
    c = _vector(c, "toeplitz")
    r = jnp.conj(c) if r is None else _vector(r, "toeplitz")
    values, (m, n) = _column_then_row(c, r)
    i, j = np.indices((m, n))
    return _gather(values, np.where(i >= j, i - j, m + j - i - 1))


def hankel(c: Any, r: Any = None) -> Any:
    """The Hankel matrix with first column `c` and last row `r` (default zeros); r[0] is ignored."""
    c = _vector(c, "hankel")
    r = jnp.zeros_like(c) if r is None else _vector(r, "hankel")
    values, (m, n) = _column_then_row(c, r)
    i, j = np.indices((m, n))
    return _gather(values, i + j)


def _with_constants(values: Any, *constants: float) -> Any:
    """`values` followed by the given constants along its last axis."""
    tail = jnp.broadcast_to(jnp.asarray(constants, values.dtype), values.shape[:-1] + (len(constants),))
    return jnp.concatenate([values, tail], axis=-1)


def companion(a: Any) -> Any:
    """The companion matrix of the polynomial with coefficients `a` (highest power first)."""
    (a,) = _promote_inexact(_vector(a, "companion"))
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"companion needs at least two coefficients, got {n}.")
    first = -a[..., 1:] / a[..., :1]
    values = _with_constants(first, 0.0, 1.0)  # index n-1: zero, index n: one
    i, j = np.indices((n - 1, n - 1))
    return _gather(values, np.where(i == 0, j, np.where(i == j + 1, n, n - 1)))


def fiedler(a: Any) -> Any:
    """The symmetric matrix |a_i - a_j|."""
    a = _vector(a, "fiedler")
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a: Any) -> Any:
    """Fiedler's pentadiagonal companion matrix of the polynomial with coefficients `a` (highest power first)."""
    (a,) = _promote_inexact(_vector(a, "fiedler_companion"))
    size = a.shape[-1] - 1
    if size < 1:
        return jnp.zeros(a.shape[:-1] + (0, 0), a.dtype)
    coefficients = -a[..., 1:] / a[..., :1]  # index k holds -a[k + 1] / a[0]
    return _gather(_with_constants(coefficients, 0.0, 1.0), _fiedler_index(size))


def _fiedler_index(size: int) -> np.ndarray:
    """Where each entry of Fiedler's companion matrix comes from: SciPy's matrix for coefficients that name their
    own positions (coefficient k as 10 + k) read back as indices (coefficients, then a zero, then a one)."""
    probe = scipy.linalg.fiedler_companion(np.concatenate([[1.0], -(10.0 + np.arange(size))]))
    return np.where(probe >= 10, probe - 10, np.where(probe == 1, size + 1, size)).astype(np.int64)


def leslie(f: Any, s: Any) -> Any:
    """The Leslie matrix: fecundities `f` on the first row, survival rates `s` on the sub-diagonal."""
    f, s = _vector(f, "leslie"), _vector(s, "leslie")
    n = f.shape[-1]
    if s.shape[-1] != n - 1:
        raise ValueError(f"leslie needs len(s) == len(f) - 1, got {s.shape[-1]} and {n}.")
    dtype = jnp.result_type(f, s)
    batch = np.broadcast_shapes(f.shape[:-1], s.shape[:-1])
    values = _with_constants(jnp.concatenate([jnp.broadcast_to(f, batch + (n,)).astype(dtype),
                                              jnp.broadcast_to(s, batch + (n - 1,)).astype(dtype)], axis=-1), 0.0)
    i, j = np.indices((n, n))
    return _gather(values, np.where(i == 0, j, np.where(i == j + 1, n + j, 2 * n - 1)))


def convolution_matrix(a: Any, n: int, mode: str = "full") -> Any:
    """The matrix A with A @ v = numpy.convolve(a, v, mode) for every v of length `n`."""
    a = _vector(a, "convolution_matrix")
    m = a.shape[-1]
    if n <= 0 or m == 0:
        raise ValueError(f"convolution_matrix needs n > 0 and a non-empty `a`, got n={n} and len(a)={m}.")
    rows = np.arange(m + n - 1)
    if mode == "same":
        rows = rows[(min(m, n) - 1) // 2:][:max(m, n)]
    elif mode == "valid":
        rows = rows[min(m, n) - 1:max(m, n)]
    elif mode != "full":
        raise ValueError(f"convolution_matrix's mode must be 'full', 'same' or 'valid', got {mode!r}.")
    values = _with_constants(a, 0)
    k = rows[:, None] - np.arange(n)[None, :]
    return _gather(values, np.where((k >= 0) & (k < m), k, m))


def _constant(values: np.ndarray, dtype: Any = None) -> Any:
    """A matrix SciPy computed, in `dtype` (default: its own, canonicalized as JAX does without x64)."""
    return jnp.asarray(values) if dtype is None else jnp.asarray(values, dtype=dtype)


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Any:
    """The n x n discrete Fourier transform matrix, scaled by 1/n ('n') or 1/sqrt(n) ('sqrtn')."""
    if scale not in (None, "n", "sqrtn"):
        raise ValueError(f"dft's scale must be None, 'n' or 'sqrtn', got {scale!r}.")
    return _constant(scipy.linalg.dft(n, scale), dtype)


def hadamard(n: int, dtype: Any = int) -> Any:
    """The n x n Hadamard matrix (n a power of two), Sylvester's construction."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    return _constant(scipy.linalg.hadamard(n), None if dtype is int else dtype)


def helmert(n: int, full: bool = False) -> Any:
    """The Helmert matrix of order n (without its first row unless `full`)."""
    return _constant(scipy.linalg.helmert(n, full=full))


def hilbert(n: int) -> Any:
    """The Hilbert matrix 1 / (i + j + 1)."""
    return _constant(scipy.linalg.hilbert(n))


def invhilbert(n: int) -> Any:
    """The inverse of the n x n Hilbert matrix."""
    return _constant(scipy.linalg.invhilbert(n))


def _kind(kind: str | None) -> str:
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"Expected kind to be on of: ['symmetric', 'lower', 'upper']; got {kind}")
    return kind


def pascal(n: int, kind: str | None = None) -> Any:
    """The n x n Pascal matrix: 'symmetric' (default), 'lower' or 'upper' triangular."""
    return _constant(scipy.linalg.pascal(n, _kind(kind), exact=False))


def invpascal(n: int, kind: str | None = None) -> Any:
    """The inverse of the n x n Pascal matrix of the given kind."""
    return _constant(scipy.linalg.invpascal(n, _kind(kind), exact=False))


__all__ = ["circulant", "companion", "convolution_matrix", "dft", "fiedler", "fiedler_companion", "hadamard",
           "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal", "toeplitz"]
