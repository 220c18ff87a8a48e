"""Summary statistics of jax.scipy.stats: mode, rankdata and sem."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import numpy as jnp
from ..core import dtypes
from ..transforms.vmap import vmap

_NAN_POLICIES = ("propagate", "omit", "raise")


class ModeResult(NamedTuple):
    """The most common value along an axis and how often it occurs."""
    mode: Any
    count: Any


def _check_nan_policy(name: str, nan_policy: str) -> None:
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"{name}: nan_policy={nan_policy!r} is not one of {_NAN_POLICIES}.")
    if nan_policy != "propagate":
        raise NotImplementedError(f"{name}: nan_policy={nan_policy!r} is not supported (as in JAX); check for NaNs "
                                  f"before the call and use nan_policy='propagate'.")


def _same(a: Any, b: Any) -> Any:
    """a == b, NaNs equal to each other."""
    return (a == b) | (jnp.isnan(a) & jnp.isnan(b)) if np.issubdtype(a.dtype, np.inexact) else a == b


def _column_modes(x: Any) -> tuple[Any, Any]:
    """The smallest most common value of each column of the matrix x, and its count."""
    if x.shape[0] == 0:
        nan = jnp.full(x.shape[1:], np.nan, dtypes.default_float_dtype())
        return nan, jnp.zeros_like(nan)
    ordered = jnp.sort(x, axis=0)
    counts = jnp.sum(_same(ordered[:, None, :], ordered[None, :, :]), axis=1, dtype=np.int32)
    best = jnp.argmax(counts, axis=0)
    return jnp.take_along_axis(ordered, best[None, :], axis=0)[0], jnp.max(counts, axis=0)


def mode(a: Any, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The most common value along `axis` (the smallest of equally common ones) and its count."""
    _check_nan_policy("mode", nan_policy)
    x = jnp.atleast_1d(a)
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x = jnp.ravel(x)
        axis = 0
    else:
        axis = _canonical_axis(axis, x.ndim)
        out_shape = tuple(1 if i == axis else s for i, s in enumerate(x.shape)) if keepdims else \
            tuple(s for i, s in enumerate(x.shape) if i != axis)
    x = jnp.moveaxis(x, axis, 0)
    values, counts = _column_modes(jnp.reshape(x, (x.shape[0], int(np.prod(x.shape[1:], dtype=int)))))
    return ModeResult(jnp.reshape(values, out_shape), jnp.reshape(counts, out_shape))


def _canonical_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}.")
    return axis % ndim


_METHODS = ("average", "min", "max", "dense", "ordinal")


def _ranks(a: Any, method: str) -> Any:
    """The ranks of the vector a (NaN everywhere if any entry is NaN)."""
    out_dtype = dtypes.default_float_dtype()
    size = a.shape[0]
    order = jnp.argsort(a, stable=True)
    ordered = a[order]
    inverse = jnp.argsort(order)
    if method == "ordinal":
        ranks = (inverse + 1).astype(out_dtype)
    else:
        starts = jnp.concatenate([jnp.ones(1, bool), ordered[1:] != ordered[:-1]])
        dense = jnp.cumsum(starts)[inverse]
        run_starts = jnp.nonzero(starts, size=size + 1, fill_value=size)[0].astype(out_dtype)
        ranks = {"dense": lambda: dense.astype(out_dtype),
                 "max": lambda: run_starts[dense],
                 "min": lambda: run_starts[dense - 1] + 1,
                 "average": lambda: 0.5 * (run_starts[dense] + run_starts[dense - 1] + 1)}[method]()
    if np.issubdtype(a.dtype, np.inexact):
        ranks = jnp.where(jnp.any(jnp.isnan(a)), np.nan, ranks)
    return ranks


def rankdata(a: Any, method: str = "average", *, axis: int | None = None, nan_policy: str = "propagate") -> Any:
    """Ranks from 1, ties resolved by `method` (average, min, max, dense or ordinal); along `axis` or flattened."""
    _check_nan_policy("rankdata", nan_policy)
    if method not in _METHODS:
        raise ValueError(f"unknown method '{method}'")
    a = jnp.asarray(a)
    if axis is None:
        return _ranks(jnp.ravel(a), method)
    axis = _canonical_axis(axis, a.ndim)
    moved = jnp.moveaxis(a, axis, -1)
    flat = jnp.reshape(moved, (-1, moved.shape[-1]))
    ranks = vmap(lambda row: _ranks(row, method))(flat)
    return jnp.moveaxis(jnp.reshape(ranks, moved.shape), -1, axis)


def sem(a: Any, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims: bool = False) -> Any:
    """The standard error of the mean: the standard deviation (with `ddof`) over the square root of the count."""
    (b,) = jnp._promote_inexact(a)
    b = jnp.asarray(b)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return jnp.std(b, axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(size).astype(b.dtype)
    if nan_policy == "omit":
        count = jnp.sum(~jnp.isnan(b), axis, keepdims=keepdims)
        return jnp.nanstd(b, axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(count).astype(b.dtype)
    raise ValueError(f"{nan_policy} is not supported")
