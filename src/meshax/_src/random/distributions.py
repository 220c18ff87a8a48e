"""The distributions of meshax.random: uniform, normal, truncated_normal, gumbel, bernoulli, randint,
permutation and choice, built on the keys and random bits of meshax._src.random.prng (JAX's algorithms,
bit for bit; see meshax._src.random for the scheme)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..core import dtypes
from .. import numpy as jnp
from ..primitives import array_primitives as P
from ..core.core import Tracer
from .prng import (
    _bits, _canonical_shape, _cast_to, _fma, _is_array, _key_array, _lift, _single_key, erf_inv_p, split,
)
from ..arrays.out_sharding import accepts_out_sharding
from ..core.dtypes import issubdtype

__all__ = [
    "uniform", "normal", "randint", "bernoulli", "permutation", "choice", "truncated_normal", "gumbel",
]


def _float_dtype(dtype: Any, what: str) -> np.dtype:
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    if not dtypes.is_floating(np.zeros((), dtype)):
        raise ValueError(f"dtype argument to `{what}` must be a float dtype, got {dtype}")
    return dtype


def _check_broadcast(value: Any, shape: tuple[int, ...], what: str, name: str) -> None:
    vshape = tuple(np.shape(value)) if not _is_array(value) else tuple(value.shape)
    if len(vshape) > len(shape) or any(a not in (1, b) for a, b in zip(vshape[::-1], shape[::-1])):
        raise ValueError(f"{what}: {name} of shape {vshape} is not broadcast-compatible with shape {shape}.")


def _random_bits_for(dtype: np.dtype) -> tuple[int, int]:
    info = dtypes.finfo(dtype)
    nbits, nmant = int(info.bits), int(info.nmant)
    return (8 if nmant < 8 else nbits), nmant


# ---- continuous distributions -------------------------------------------------------------------------------


def _uniform(key: Any, shape: tuple[int, ...], dtype: np.dtype, minval: Any, maxval: Any) -> Any:
    minval = _cast_to(minval, dtype)
    maxval = _cast_to(maxval, dtype)
    _check_broadcast(minval, shape, "uniform", "minval")
    _check_broadcast(maxval, shape, "uniform", "maxval")
    rng_bits, nmant = _random_bits_for(dtype)
    raw = _bits(key, rng_bits, shape)
    # (bits >> (rng_bits - nmant)) as the mantissa of a float in [1, 2), minus 1, is exactly this:
    mantissa = jnp.right_shift(raw, np.asarray(rng_bits - nmant, raw.dtype))
    floats = jnp.multiply(jnp.astype(mantissa, dtype), np.asarray(2.0 ** -nmant, dtype))
    span = jnp.subtract(maxval, minval)
    if dtype in (np.float32, np.float64):
        scaled = _fma(floats, _cast_to(span, dtype), _cast_to(minval, dtype))
    else:
        scaled = jnp.add(jnp.multiply(floats, span), minval)
    return jnp.maximum(minval, scaled)


@accepts_out_sharding
def uniform(key: Any, shape: Any = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0) -> Any:
    """Uniform floats in [minval, maxval)."""
    dtype = _float_dtype(dtype, "uniform")
    return _uniform(_key_array(key, "uniform"), _canonical_shape(shape), dtype, minval, maxval)


def _normal_real(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    low = np.nextafter(np.asarray(-1, dtype), np.asarray(0, dtype))
    u = _uniform(key, shape, dtype, low, np.asarray(1, dtype))
    return jnp.multiply(np.asarray(np.sqrt(2), dtype), erf_inv_p.bind(u))


@accepts_out_sharding
def normal(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard normal samples: sqrt(2) * erfinv(u), u uniform in (-1, 1)."""
    key = _key_array(key, "normal")
    shape = _canonical_shape(shape)
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    if issubdtype(dtype, np.complexfloating):
        real_dtype = np.zeros((), dtype).real.dtype
        keys = split(key)
        re = jnp.astype(_normal_real(keys[..., 0, :], shape, real_dtype), dtype)
        im = jnp.astype(_normal_real(keys[..., 1, :], shape, real_dtype), dtype)
        return jnp.divide(jnp.add(re, jnp.multiply(np.asarray(1j, dtype), im)), np.asarray(np.sqrt(2), dtype))
    dtype = _float_dtype(dtype, "normal")
    return _normal_real(key, shape, dtype)


@accepts_out_sharding
def truncated_normal(key: Any, lower: Any, upper: Any, shape: Any = None, dtype: Any = None) -> Any:
    """Standard normal samples conditioned on lower < x < upper."""
    key = _key_array(key, "truncated_normal")
    dtype = _float_dtype(dtype, "truncated_normal")
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower) if not _is_array(lower) else tuple(lower.shape),
                                    np.shape(upper) if not _is_array(upper) else tuple(upper.shape))
    shape = _canonical_shape(shape)
    sqrt2 = np.asarray(np.sqrt(2), dtype)
    lower = _cast_to(lower, dtype)
    upper = _cast_to(upper, dtype)
    a = _erf(P.BINARY["div"].bind(lower, sqrt2), dtype)
    b = _erf(P.BINARY["div"].bind(upper, sqrt2), dtype)
    u = _uniform(key, shape, dtype, a, b)
    out = jnp.multiply(sqrt2, erf_inv_p.bind(u))
    low = P.BINARY["nextafter"].bind(lower, np.asarray(np.inf, dtype))
    high = P.BINARY["nextafter"].bind(upper, np.asarray(-np.inf, dtype))
    return jnp.minimum(high, jnp.maximum(low, out))


def _erf(x: Any, dtype: np.dtype) -> Any:
    """erf in `dtype`; narrow floats are computed in float32 and rounded, as XLA does."""
    if np.dtype(dtype).itemsize < 4:
        return jnp.astype(P.UNARY["erf"].bind(jnp.astype(x, np.float32)), dtype)
    return P.UNARY["erf"].bind(x)


def _log(x: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf, as in JAX, without a warning
        if np.dtype(x.dtype).itemsize < 4:
            return jnp.astype(P.UNARY["log"].bind(jnp.astype(x, np.float32)), x.dtype)
        return P.UNARY["log"].bind(x)


@accepts_out_sharding
def gumbel(key: Any, shape: Any = (), dtype: Any = None, mode: str | None = None) -> Any:
    """Standard Gumbel samples: -log(-log(u)), u uniform in [tiny, 1)."""
    if mode not in (None, "low"):
        raise NotImplementedError(f"gumbel mode {mode!r}: meshax implements mode='low' only.")
    dtype = _float_dtype(dtype, "gumbel")
    u = _uniform(_key_array(key, "gumbel"), _canonical_shape(shape), dtype, np.asarray(dtypes.finfo(dtype).tiny, dtype),
                 np.asarray(1, dtype))
    return jnp.negative(_log(jnp.negative(_log(u))))


@accepts_out_sharding
def bernoulli(key: Any, p: Any = 0.5, shape: Any = None, mode: str = "low") -> Any:
    """Booleans that are True with probability p. mode="high" (JAX 0.12) compares with two uniform draws
    (u2 * 2 ** -nmant < p - u1, from one draw of shape (2, *shape)), correct for p below the uniform's resolution."""
    if shape is not None:
        shape = _canonical_shape(shape)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    key = _key_array(key, "bernoulli")
    p = _lift(p)
    dtype = np.dtype(p.dtype)
    if not dtypes.is_floating(np.zeros((), dtype)):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    pshape = tuple(p.shape)
    shape = pshape if shape is None else _canonical_shape(shape)
    _check_broadcast(p, shape, "bernoulli", "p")
    if _is_array(p) and p.weak_type:
        p = jnp.astype(p, dtype)
    if mode == "high":
        batch = tuple(key.shape[:-1])
        u = _uniform(key, (2, *shape), dtype, np.asarray(0, dtype), np.asarray(1, dtype))
        axis = len(batch)  # (a batch of keys puts its dimensions first)
        u1 = jnp.take(u, 0, axis=axis)
        u2 = jnp.multiply(jnp.take(u, 1, axis=axis), np.asarray(2.0 ** -dtypes.finfo(dtype).nmant, dtype))
        return jnp.less(u2, jnp.subtract(p, u1))
    return jnp.less(_uniform(key, shape, dtype, np.asarray(0, dtype), np.asarray(1, dtype)), p)


# ---- integers ----------------------------------------------------------------------------------------------------


def _int_bounds(value: Any) -> Any:
    value = _lift(value)
    if not (issubdtype(value.dtype, np.integer)):
        value = jnp.astype(value, dtypes.default_int_dtype())
    return value


class _HostOps:
    """NumPy in place of meshax.numpy for arithmetic on bounds that are all host values (no device work)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def astype(x: Any, dtype: Any) -> np.ndarray:
        return np.asarray(x).astype(dtype)


def _ops_for(*values: Any) -> Any:
    return jnp if any(_is_array(v) for v in values) else _HostOps()


def _clip_convert(xp: Any, value: Any, dtype: np.dtype) -> Any:
    """`value` clipped to the range of integer `dtype`, then converted."""
    have, want = dtypes.iinfo(value.dtype), dtypes.iinfo(dtype)
    low, high = max(int(have.min), int(want.min)), min(int(have.max), int(want.max))
    if low > int(have.min) or high < int(have.max):
        value = xp.minimum(xp.maximum(value, np.asarray(low, value.dtype)), np.asarray(high, value.dtype))
    return xp.astype(value, dtype)


def _rem(xp: Any, x: Any, span: Any, span_may_be_zero: bool) -> Any:
    """Unsigned remainder with XLA's convention x % 0 == x."""
    if not span_may_be_zero:
        return xp.remainder(x, span)
    zero = xp.equal(span, np.asarray(0, span.dtype))
    safe = xp.where(zero, np.asarray(1, span.dtype), span)
    return xp.where(zero, x, xp.remainder(x, safe))


@accepts_out_sharding
def randint(key: Any, shape: Any, minval: Any, maxval: Any, dtype: Any = None) -> Any:
    """Integers uniform in [minval, maxval), from 2 * nbits random bits (slightly biased, as JAX's).

    Bounds are clipped to the dtype's range. As in JAX, dtypes narrower than 32 bits are drawn
    as int32 in [minval, maxval) with maxval clipped to the dtype's max + 1, then converted."""
    key = _key_array(key, "randint")
    shape = _canonical_shape(shape)
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_int_dtype())
    if not issubdtype(dtype, np.integer):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    minval, maxval = _int_bounds(minval), _int_bounds(maxval)
    _check_broadcast(minval, shape, "randint", "minval")
    _check_broadcast(maxval, shape, "randint", "maxval")
    xp = _ops_for(minval, maxval)
    with np.errstate(all="ignore"):
        if dtype.itemsize < 4:
            wide = np.dtype(np.int32)
            info = dtypes.iinfo(dtype)
            minval = xp.minimum(xp.maximum(xp.astype(minval, wide), np.asarray(info.min, wide)),
                                np.asarray(info.max, wide))
            maxval = xp.minimum(xp.maximum(xp.astype(maxval, wide), np.asarray(info.min, wide)),
                                np.asarray(int(info.max) + 1, wide))
            return jnp.astype(_randint(xp, key, shape, minval, maxval, wide), dtype)
        return _randint(xp, key, shape, minval, maxval, dtype)


def _randint(xp: Any, key: Any, shape: tuple[int, ...], minval: Any, maxval: Any, dtype: np.dtype) -> Any:
    nbits = dtype.itemsize * 8
    unsigned = np.dtype(f"uint{nbits}")
    # Bounds: clipped to the dtype; the span maxval - minval is 1 when empty, and one more when maxval
    # was beyond the dtype (2**nbits then wraps to 0, which XLA's x % 0 == x makes a full-range draw).
    top = min(int(dtypes.iinfo(dtype).max), int(dtypes.iinfo(maxval.dtype).max))
    maybe_zero = int(dtypes.iinfo(maxval.dtype).max) > int(dtypes.iinfo(dtype).max)
    maxval_out_of_range = xp.greater(maxval, np.asarray(top, maxval.dtype)) if maybe_zero else None
    minval = _clip_convert(xp, minval, dtype)
    maxval = _clip_convert(xp, maxval, dtype)
    span = xp.astype(xp.subtract(maxval, minval), unsigned)
    empty = xp.less_equal(maxval, minval)
    span = xp.where(empty, np.asarray(1, unsigned), span)
    if maybe_zero:
        grow = xp.logical_and(maxval_out_of_range, xp.logical_not(empty))
        span = xp.where(grow, xp.add(span, np.asarray(1, unsigned)), span)
    # 2**nbits mod span, as (2**(nbits/2) mod span)**2 mod span, to combine two draws of nbits bits.
    multiplier = _rem(xp, np.asarray(1 << (nbits // 2), unsigned), span, maybe_zero)
    multiplier = _rem(xp, xp.multiply(multiplier, multiplier), span, maybe_zero)
    if xp is not jnp:
        span, multiplier, minval = (np.asarray(v) for v in (span, multiplier, minval))

    keys = split(key)
    higher = _bits(keys[..., 0, :], nbits, shape)
    lower = _bits(keys[..., 1, :], nbits, shape)
    offset = jnp.add(jnp.multiply(_rem(jnp, higher, span, maybe_zero), multiplier),
                     _rem(jnp, lower, span, maybe_zero))
    offset = _rem(jnp, offset, span, maybe_zero)
    return jnp.add(minval, jnp.astype(offset, dtype))


# ---- permutations and sampling -------------------------------------------------------------------------------


def _shuffle(key: Any, x: Any, axis: int) -> Any:
    """Sort `x` along `axis` by random 32-bit keys, repeated until collisions are unlikely."""
    size = math.prod(x.shape)
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split(key)
        key, subkey = keys[0], keys[1]
        sort_keys = _bits(subkey, 32, tuple(x.shape))
        order = jnp.argsort(sort_keys, axis=axis, stable=True)
        x = jnp.take_along_axis(x, order, axis=axis)
    return x


def _concrete_int(x: Any, what: str) -> int:
    if isinstance(x, Tracer):
        raise TypeError(f"{what} needs a concrete integer, not a traced value; mark it static.")
    return int(np.asarray(x))


@accepts_out_sharding
def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of arange(x) (x an int), or of x along `axis` (each slice independently
    if `independent`)."""
    key = _single_key(key, "permutation")
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return _shuffle(key, jnp.arange(int(x), dtype=dtypes.default_int_dtype()), 0)
    x = _lift(x)
    if x.ndim == 0:
        if not issubdtype(x.dtype, np.integer):
            raise TypeError("x must be an integer or at least 1-dimensional")
        return _shuffle(key, jnp.arange(_concrete_int(x, "permutation"), dtype=dtypes.default_int_dtype()), 0)
    axis = jnp._axes(axis, x.ndim)[0]
    if not _is_array(x):
        x = jnp.asarray(x)
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, jnp.arange(x.shape[axis], dtype=dtypes.default_int_dtype()), 0)
    return jnp.take(x, order, axis=axis)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0,
           mode: str | None = None) -> Any:
    """Samples from arange(a) (a an int) or from a's entries along `axis`, optionally weighted by p."""
    key = _single_key(key, "choice")
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of choice must be a sequence, got {shape}")
    shape = _canonical_shape(shape)
    arr = _lift(a)
    if arr.ndim == 0:
        n_inputs = _concrete_int(a, "choice")
    else:
        axis = jnp._axes(axis, arr.ndim)[0]
        n_inputs = arr.shape[axis]
        if not _is_array(arr):
            arr = jnp.asarray(arr)
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size {n_inputs}) "
                         "when 'replace=False'")
    int_dtype = dtypes.default_int_dtype()
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis=axis)
        else:
            drawn = permutation(key, n_inputs if arr.ndim == 0 else arr, axis)
            result = jnp.getitem(drawn, (slice(None),) * (axis if arr.ndim else 0) + (slice(n_draws),))
    else:
        p_arr = _lift(p)
        if not dtypes.is_floating(np.zeros((), p_arr.dtype)):
            p_arr = _cast_to(p_arr, dtypes.default_float_dtype())
        elif _is_array(p_arr) and p_arr.weak_type:
            p_arr = _cast_to(p_arr, p_arr.dtype)
        if not _is_array(p_arr):
            p_arr = jnp.asarray(p_arr)
        if tuple(p_arr.shape) != (n_inputs,):
            raise ValueError(f"p must be None or a 1D vector with the same size as a.shape[axis]; "
                             f"p has shape {tuple(p_arr.shape)} and a.shape[axis] is {n_inputs}.")
        if replace:
            p_cuml = jnp.cumsum(p_arr)
            total = p_cuml[-1]
            u = _uniform(key, shape, np.dtype(p_cuml.dtype), np.asarray(0, p_cuml.dtype), np.asarray(1, p_cuml.dtype))
            r = jnp.multiply(total, jnp.subtract(np.asarray(1, p_cuml.dtype), u))
            # searchsorted(p_cuml, r, side="left") on a nondecreasing p_cuml: the count of entries below r.
            below = jnp.less(p_cuml, jnp.expand_dims(r, -1))
            ind = jnp.astype(jnp.sum(below, axis=-1), int_dtype)
        else:
            g = jnp.add(gumbel(key, (n_inputs,), p_arr.dtype), _log(p_arr))
            # top_k's indices: largest first, ties broken by the lower index.
            ind = jnp.astype(jnp.getitem(jnp.argsort(jnp.negative(g), stable=True), slice(n_draws)), int_dtype)
        result = ind if arr.ndim == 0 else jnp.take(arr, ind, axis=axis)
    out_shape = shape if arr.ndim == 0 else tuple(arr.shape[:axis]) + shape + tuple(arr.shape[axis + 1:])
    return jnp.reshape(result, out_shape)
