"""More distributions of meshax.random (as jax.random): the closed-form transforms of uniform and normal
draws (exponential, laplace, logistic, cauchy, pareto, rayleigh, weibull_min, lognormal, maxwell,
double_sided_maxwell, triangular, wald, geometric, rademacher), categorical (the Gumbel-max trick),
multivariate_normal, orthogonal, and key_impl / key_dtype.

Each follows JAX's algorithm step by step (the same keys, splits, draws and float operations in the
same order), so the values agree with JAX's up to the rounding of the transcendental functions.
The gamma family, poisson, binomial and multinomial live in meshax._src.random.gamma."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core import dtypes
from .. import numpy as jnp
from ..numpy import linalg as jla
from .prng import _canonical_shape, _cast_to, _is_array, _key_array, _lift, split
from ..arrays.key_arrays import KEY_DTYPE, KeyDType
from .distributions import _normal_real, _uniform, bernoulli, gumbel, normal
from ..arrays.out_sharding import accepts_out_sharding
from ..core.dtypes import issubdtype

__all__ = [
    "exponential", "laplace", "logistic", "cauchy", "pareto", "rayleigh", "weibull_min", "lognormal", "maxwell",
    "double_sided_maxwell", "triangular", "wald", "geometric", "rademacher", "categorical", "multivariate_normal",
    "orthogonal", "key_impl", "key_dtype",
]


# ---- helpers shared with random_gamma --------------------------------------------------------------------


def _float(dtype: Any, what: str) -> np.dtype:
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    if not issubdtype(dtype, np.floating):
        raise ValueError(f"dtype argument to `{what}` must be a float dtype, got {dtype}")
    return dtype


def _int(dtype: Any, what: str) -> np.dtype:
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_int_dtype())
    if not issubdtype(dtype, np.integer):
        raise ValueError(f"dtype argument to `{what}` must be an int dtype, got {dtype}")
    return dtype


def _shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if _is_array(x) else tuple(np.shape(x))


def _param_shape(what: str, shape: Any, *params: Any) -> tuple[int, ...]:
    """`shape` (checked: every parameter broadcasts to it), or the parameters' broadcast shape if None."""
    pshapes = [_shape_of(p) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*pshapes)) if pshapes else ()
    shape = _canonical_shape(shape)
    try:
        if tuple(np.broadcast_shapes(shape, *pshapes)) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"{what} parameter shapes {pshapes} must be broadcast-compatible with shape "
                         f"argument {shape}") from None
    return shape


def _param(x: Any, dtype: np.dtype, shape: tuple[int, ...] | None = None) -> Any:
    """A parameter converted to `dtype` (and broadcast to `shape`), as a meshax array."""
    x = _cast_to(x, dtype)
    if not _is_array(x):
        x = jnp.asarray(x)
    if shape is not None and tuple(x.shape) != shape:
        x = jnp.broadcast_to(x, shape)
    return x


def _up(fn: Any, x: Any) -> Any:
    """A transcendental function; float16/bfloat16 go through float32 and are rounded back, as XLA does."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if np.dtype(x.dtype).itemsize < 4 and issubdtype(x.dtype, np.floating):
            return jnp.astype(fn(jnp.astype(x, np.float32)), x.dtype)
        return fn(x)


def _log(x: Any) -> Any:
    return _up(jnp.log, x)


def _log1p(x: Any) -> Any:
    return _up(jnp.log1p, x)


def _exp(x: Any) -> Any:
    return _up(jnp.exp, x)


def _sqrt(x: Any) -> Any:
    return _up(jnp.sqrt, x)


def _pow(x: Any, y: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if np.dtype(x.dtype).itemsize < 4:
            y = _lift(y)
            y32 = jnp.astype(y, np.float32) if _is_array(y) else np.asarray(y, np.float32)
            return jnp.astype(jnp.power(jnp.astype(x, np.float32), y32), x.dtype)
        return jnp.power(x, y)


def _const(x: Any, value: float) -> np.ndarray:
    return np.asarray(value, x.dtype)


def _uniform01(key: Any, shape: tuple[int, ...], dtype: np.dtype, minval: Any = 0.0, maxval: Any = 1.0) -> Any:
    return _uniform(key, shape, dtype, np.asarray(minval, dtype), np.asarray(maxval, dtype))


def _split2(key: Any) -> tuple[Any, Any]:
    keys = split(key)
    return keys[..., 0, :], keys[..., 1, :]


# ---- simple transforms ---------------------------------------------------------------------------------------


def _exponential(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    u = _uniform01(key, shape, dtype)
    return jnp.negative(_log1p(jnp.negative(u)))


@accepts_out_sharding
def exponential(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard exponential samples: -log1p(-u)."""
    return _exponential(_key_array(key, "exponential"), _canonical_shape(shape), _float(dtype, "exponential"))


@accepts_out_sharding
def laplace(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard Laplace samples: sign(u) * log1p(-|u|), u uniform in (-1, 1)."""
    dtype = _float(dtype, "laplace")
    low = np.asarray(-1.0 + dtypes.finfo(dtype).epsneg, dtype)
    u = _uniform01(_key_array(key, "laplace"), _canonical_shape(shape), dtype, low, 1.0)
    return jnp.multiply(jnp.sign(u), _log1p(jnp.negative(jnp.abs(u))))


@accepts_out_sharding
def logistic(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard logistic samples: log(u) - log1p(-u), u uniform in [tiny, 1)."""
    dtype = _float(dtype, "logistic")
    x = _uniform01(_key_array(key, "logistic"), _canonical_shape(shape), dtype, dtypes.finfo(dtype).tiny, 1.0)
    return jnp.subtract(_log(x), _log1p(jnp.negative(x)))


@accepts_out_sharding
def cauchy(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard Cauchy samples: tan(pi * (u - 1/2)), u uniform in [eps, 1)."""
    dtype = _float(dtype, "cauchy")
    u = _uniform01(_key_array(key, "cauchy"), _canonical_shape(shape), dtype, dtypes.finfo(dtype).eps, 1.0)
    return _up(jnp.tan, jnp.multiply(_const(u, np.pi), jnp.subtract(u, _const(u, 0.5))))


@accepts_out_sharding
def pareto(key: Any, b: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Pareto samples of shape parameter b: exp(e / b), e standard exponential."""
    key = _key_array(key, "pareto")
    dtype = _float(dtype, "pareto")
    shape = _param_shape("pareto", shape, b)
    b = _param(b, dtype)
    return _exp(jnp.divide(_exponential(key, shape, dtype), b))


@accepts_out_sharding
def rayleigh(key: Any, scale: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Rayleigh samples: scale * sqrt(-2 log u)."""
    key = _key_array(key, "rayleigh")
    dtype = _float(dtype, "rayleigh")
    shape = _param_shape("rayleigh", shape, scale)
    u = _uniform01(key, shape, dtype)
    scale = _param(scale, dtype, shape)
    return jnp.multiply(scale, _sqrt(jnp.multiply(_log(u), _const(u, -2))))


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Weibull samples: (-log1p(-u)) ** (1 / concentration) * scale."""
    key = _key_array(key, "weibull_min")
    dtype = _float(dtype, "weibull_min")
    u = _uniform01(key, _canonical_shape(shape), dtype)
    inv = 1.0 / concentration if not _is_array(concentration) else jnp.divide(1.0, concentration)
    return jnp.multiply(_pow(jnp.negative(_log1p(jnp.negative(u))), inv), scale)


@accepts_out_sharding
def lognormal(key: Any, sigma: Any = np.float32(1), shape: Any = None, dtype: Any = None) -> Any:
    """Log-normal samples: exp(sigma * n), n standard normal."""
    key = _key_array(key, "lognormal")
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    if not issubdtype(dtype, np.inexact):
        raise ValueError(f"dtype argument to `lognormal` must be a float or complex dtype, got {dtype}")
    shape = _param_shape("lognormal", shape, sigma)
    sigma = _param(sigma, dtype)
    return _exp(jnp.multiply(normal(key, shape, dtype), sigma))


@accepts_out_sharding
def maxwell(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Maxwell samples: the norm of 3 standard normals."""
    key = _key_array(key, "maxwell")
    dtype = _float(dtype, "maxwell")
    z = _normal_real(key, _canonical_shape(shape) + (3,), dtype)
    return jla.norm(z, axis=-1)


@accepts_out_sharding
def rademacher(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Random signs, -1 or 1 (each with probability 1/2)."""
    key = _key_array(key, "rademacher")
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_int_dtype())
    b = jnp.astype(bernoulli(key, 0.5, _canonical_shape(shape)), dtype)
    return jnp.astype(jnp.subtract(jnp.multiply(np.asarray(2, dtype), b), np.asarray(1, dtype)), dtype)


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Double-sided Maxwell samples: a random sign times a Maxwell sample, times scale, plus loc."""
    key = _key_array(key, "double_sided_maxwell")
    dtype = _float(dtype, "double_sided_maxwell")
    shape = _canonical_shape(shape)
    params_shape = tuple(np.broadcast_shapes(_shape_of(loc), _shape_of(scale)))
    if not shape:
        shape = params_shape
    shape = shape + params_shape
    maxwell_key, sign_key = _split2(key)
    m = maxwell(maxwell_key, shape, dtype)
    sign = rademacher(sign_key, shape, dtype)
    return jnp.add(jnp.multiply(jnp.multiply(sign, m), scale), loc)


@accepts_out_sharding
def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Triangular samples on [left, right] peaking at mode (inverse CDF)."""
    key = _key_array(key, "triangular")
    dtype = _float(dtype, "triangular")
    shape = _param_shape("triangular", shape, left, mode, right)
    left, right, mode = (_param(v, dtype, shape) for v in (left, right, mode))
    width = jnp.subtract(right, left)
    fc = jnp.divide(jnp.subtract(mode, left), width)
    u = _uniform01(key, shape, dtype)
    out1 = jnp.add(left, _sqrt(jnp.multiply(jnp.multiply(u, width), jnp.subtract(mode, left))))
    one_minus_u = jnp.subtract(_const(u, 1), u)
    out2 = jnp.subtract(right, _sqrt(jnp.multiply(jnp.multiply(one_minus_u, width), jnp.subtract(right, mode))))
    return jnp.where(jnp.less(u, fc), out1, out2)


@accepts_out_sharding
def wald(key: Any, mean: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Wald (inverse Gaussian) samples of the given mean (Michael, Schucany and Haas)."""
    key = _key_array(key, "wald")
    dtype = _float(dtype, "wald")
    shape = _param_shape("wald", shape, mean)
    k1, k2 = _split2(key)
    mean = _param(mean, dtype, shape)
    v = _normal_real(k1, shape, dtype)
    z = _uniform01(k2, shape, dtype)
    y = jnp.multiply(v, v)
    y_sq = jnp.multiply(y, y)
    mean_sq = jnp.multiply(mean, mean)
    two, four = _const(v, 2), _const(v, 4)
    sqrt_term = _sqrt(jnp.add(jnp.multiply(jnp.multiply(four, mean), y), jnp.multiply(mean_sq, y_sq)))
    x = jnp.subtract(jnp.add(mean, jnp.divide(jnp.multiply(mean_sq, y), two)),
                     jnp.multiply(jnp.divide(mean, two), sqrt_term))
    return jnp.where(jnp.less_equal(z, jnp.divide(mean, jnp.add(mean, x))), x, jnp.divide(mean_sq, x))


@accepts_out_sharding
def geometric(key: Any, p: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Geometric samples (trials up to the first success, >= 1): floor(log u / log1p(-p)) + 1."""
    key = _key_array(key, "geometric")
    dtype = _int(dtype, "geometric")
    shape = _param_shape("geometric", shape, p)
    p = _lift(p)
    if not issubdtype(p.dtype, np.inexact):
        p = _cast_to(p, dtypes.default_float_dtype())
    elif _is_array(p) and p.weak_type:
        p = _cast_to(p, p.dtype)
    fdtype = np.dtype(p.dtype)
    u = _uniform01(key, shape, fdtype)
    u = jnp.where(jnp.equal(u, _const(u, 0)), _const(u, 1), u)
    log_u = _log(u)
    log_q = _log1p(jnp.negative(_param(p, fdtype)))
    g = jnp.add(jnp.floor(jnp.divide(log_u, log_q)), _const(u, 1))
    return jnp.astype(g, dtype)


# ---- categorical, multivariate normal, orthogonal -------------------------------------------------------------


@accepts_out_sharding
def categorical(key: Any, logits: Any, axis: int = -1, shape: Any = None, replace: bool = True,
                mode: str | None = None) -> Any:
    """Samples of the categories of softmax(logits, axis): the Gumbel-max trick (Gumbel top-k without
    replacement)."""
    key = _key_array(key, "categorical")
    logits = _lift(logits)
    if not _is_array(logits):
        logits = jnp.asarray(logits)
    ndim = logits.ndim
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for logits of rank {ndim}")
    batch_shape = tuple(np.delete(np.array(logits.shape, dtype=np.int64), axis).tolist())
    if shape is None:
        shape = batch_shape
    else:
        shape = _param_shape("categorical", _canonical_shape(shape), np.empty(batch_shape))
    prefix = shape[:len(shape) - len(batch_shape)]
    int_dtype = dtypes.default_int_dtype()
    if replace:
        if axis >= 0:
            axis -= ndim
        lshape = list(shape[len(shape) - len(batch_shape):])
        lshape.insert(axis % ndim, logits.shape[axis])
        g = gumbel(key, (*prefix, *lshape), logits.dtype, mode=mode)
        expanded = jnp.reshape(logits, (1,) * len(prefix) + tuple(logits.shape))
        return jnp.astype(jnp.argmax(jnp.add(g, expanded), axis=axis), int_dtype)
    logits = jnp.add(logits, gumbel(key, tuple(logits.shape), logits.dtype, mode=mode))
    k = math.prod(prefix)
    if k > logits.shape[axis]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number of "
                         f"categories ({logits.shape[axis]}).")
    moved = jnp.moveaxis(logits, axis, -1)
    # top_k: largest first, ties broken by the lower index.
    top = jnp.getitem(jnp.argsort(jnp.negative(moved), axis=-1, stable=True), (Ellipsis, slice(k)))
    top = jnp.moveaxis(jnp.astype(top, int_dtype), -1, 0)
    return jnp.reshape(top, shape)


@accepts_out_sharding
def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Any = None, dtype: Any = None,
                        method: str = "cholesky") -> Any:
    """Multivariate normal samples: mean + factor @ n, factor the Cholesky factor of cov (or from svd/eigh)."""
    key = _key_array(key, "multivariate_normal")
    mean, cov = jnp._promote_inexact(_lift(mean), _lift(cov))
    if method not in {"svd", "eigh", "cholesky"}:
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    dtype = np.dtype(mean.dtype) if dtype is None else _float(dtype, "multivariate_normal")
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == {mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {cov.ndim}")
    n = mean.shape[-1]
    if tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, but got "
                         f"cov.shape == {tuple(cov.shape)}.")
    if shape is None:
        shape = tuple(np.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2])))
    else:
        shape = _param_shape("normal", shape, np.empty(tuple(mean.shape[:-1])), np.empty(tuple(cov.shape[:-2])))
    if method == "svd":
        u, s, _ = jla.svd(cov)
        factor = jnp.multiply(u, jnp.expand_dims(jnp.sqrt(s), -2))
    elif method == "eigh":
        w, v = jla.eigh(cov)
        factor = jnp.multiply(v, jnp.expand_dims(jnp.sqrt(w), -2))
    else:
        factor = jla.cholesky(cov)
    z = normal(key, shape + (n,), dtype)
    return jnp.add(mean, jnp.einsum("...ij,...j->...i", factor, z))


@accepts_out_sharding
def orthogonal(key: Any, n: int, shape: Any = (), dtype: Any = None, m: int | None = None) -> Any:
    """Random n x m matrices with orthonormal columns (or rows), uniform under the Haar measure (QR of normals)."""
    key = _key_array(key, "orthogonal")
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    shape = _canonical_shape(shape)
    n = int(n)
    m = n if m is None else int(m)
    z = normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = jla.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = jnp.multiply(q, jnp.expand_dims(jnp.sign(d), -2))
    return jnp.swapaxes(x, -1, -2) if n < m else x


# ---- key metadata --------------------------------------------------------------------------------------------


def key_impl(keys: Any) -> str:
    """The PRNG implementation of `keys`: always 'threefry2x32'."""
    _key_array(keys, "key_impl")
    return "threefry2x32"


def key_dtype(impl_spec: Any = None) -> KeyDType:
    """The key dtype of a PRNG implementation (only threefry2x32 exists here)."""
    if impl_spec not in (None, "threefry2x32"):
        raise ValueError(f"meshax.random implements only the threefry2x32 PRNG; got {impl_spec!r}.")
    return KEY_DTYPE
