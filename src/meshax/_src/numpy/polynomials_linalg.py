"""meshax.numpy's polynomial functions that need linear algebra: roots (companion-matrix eigenvalues), polyfit
(least squares on a scaled Vandermonde matrix) and poly (whose 2-D input means a matrix's characteristic
polynomial). Like jnp.linalg, this sits just above lax: it builds on meshax.numpy.linalg."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from .. import numpy as jnp
from . import linalg
from .polynomials import _concrete, poly as _poly_of_roots
from .promotion import ArrayLike, _cast, _promote_inexact


def poly(seq_of_zeros: ArrayLike) -> Any:
    """The monic polynomial with the given roots, or a square matrix's characteristic polynomial."""
    (zeros_,) = _promote_inexact(seq_of_zeros)
    if zeros_.ndim == 2 and zeros_.shape[0] == zeros_.shape[1] and zeros_.shape[0] > 0:
        zeros_ = linalg.eigvals(zeros_)
    elif zeros_.ndim != 1:
        raise ValueError(f"poly: input must be 1-D or a non-empty square 2-D array, got shape {zeros_.shape}.")
    return _poly_of_roots(zeros_)


def _companion_roots(p: Any) -> Any:
    """The eigenvalues of the companion matrix of the 1-D coefficients `p` (complex; NaN when p[0] is 0)."""
    n = p.shape[0] - 1
    if n < 1:
        return jnp.zeros((0,), jnp.result_type(p.dtype, np.complex64))
    first_row = -p[1:] / p[0]
    companion = jnp.concatenate([first_row[None, :], jnp.eye(n - 1, n, dtype=p.dtype)], axis=0)
    return linalg.eigvals(companion)


def roots(p: ArrayLike, *, strip_zeros: bool = True) -> Any:
    """The roots of the polynomial with coefficients `p`; strip_zeros (needs concrete values) drops leading zeros
    and returns trailing zeros' roots exactly, as numpy.roots."""
    (p,) = _promote_inexact(jnp.atleast_1d(p))
    if p.ndim != 1:
        raise ValueError(f"roots: input must be a rank-1 array, got shape {p.shape}.")
    if not strip_zeros or p.shape[0] < 2:
        return _companion_roots(p)
    nonzero = np.flatnonzero(_concrete(p, "the `p` argument of roots() with strip_zeros=True"))
    if nonzero.size == 0:
        return jnp.zeros((0,), jnp.result_type(p.dtype, np.complex64))
    found = _companion_roots(p[int(nonzero[0]):int(nonzero[-1]) + 1])
    trailing = p.shape[0] - 1 - int(nonzero[-1])
    return jnp.concatenate([found, jnp.zeros((trailing,), found.dtype)])


def _check_polyfit(x: Any, y: Any, deg: int) -> None:
    if deg < 0:
        raise ValueError(f"polyfit: expected deg >= 0, got deg={deg}.")
    if x.ndim != 1:
        raise TypeError(f"polyfit: expected a 1-D vector for x, got shape {x.shape}.")
    if x.shape[0] == 0:
        raise TypeError("polyfit: expected a non-empty vector for x, got an empty one.")
    if y.ndim not in (1, 2):
        raise TypeError(f"polyfit: expected a 1-D or 2-D array for y, got shape {y.shape}.")
    if x.shape[0] != y.shape[0]:
        raise TypeError(f"polyfit: expected x and y to have the same length, got {x.shape[0]} and {y.shape[0]}.")


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None, full: bool = False,
            w: ArrayLike | None = None, cov: bool = False) -> Any:
    """Least-squares polynomial fit of degree `deg` (numpy.polyfit's outputs for full, w and cov)."""
    if rcond is None and not jnp.issubdtype(jnp.result_type(x), np.inexact):
        raise ValueError(f"polyfit: the default rcond needs an inexact x, got dtype {jnp.result_type(x)}; "
                         "pass a float x or an explicit rcond.")
    x, y = _promote_inexact(x, y)
    _check_polyfit(x, y, deg)
    order = deg + 1
    rcond = x.shape[0] * float(np.finfo(x.dtype).eps) if rcond is None else rcond
    lhs, rhs = jnp.vander(x, order), y
    if w is not None:
        (w,) = _promote_inexact(w)
        if w.ndim != 1 or w.shape[0] != x.shape[0]:
            raise TypeError(f"polyfit: expected w to be 1-D with the length of x ({x.shape[0]}), got {w.shape}.")
        lhs = lhs * w[:, None]
        rhs = rhs * (w if rhs.ndim == 1 else w[:, None])
    scale = jnp.sqrt(jnp.sum(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    resids = jnp.reshape(resids, (-1,))  # shape (1,) for a 1-D y, as JAX's lstsq gives
    c = (c.T / scale).T
    if full:
        return c, resids, rank, s, _cast(rcond, np.dtype(x.dtype), weak=True)
    if not cov:
        return c
    base = linalg.inv(jnp.matmul(lhs.T, lhs)) / jnp.outer(scale, scale)
    if cov == "unscaled":
        return c, (base if y.ndim == 1 else base[:, :, None])
    factor = resids / builtins.float(x.shape[0] - order)
    return (c, base * factor[0]) if y.ndim == 1 else (c, base[:, :, None] * factor)


__all__ = ["poly", "polyfit", "roots"]
