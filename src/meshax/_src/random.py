"""meshax.random: JAX's default PRNG (threefry-2x32 with raw uint32[2] keys), bit for bit.

Keys are ordinary meshax arrays of dtype uint32 whose last dimension has size 2 (JAX's
"raw" keys, what `jax.random.PRNGKey` returns). `key(seed)` returns the same raw key
rather than a typed key array, and `key_data` / `wrap_key_data` / `clone` return raw keys as they are.

The scheme is JAX's default with `jax_threefry_partitionable=True` (the default of the JAX 0.10
used as the test oracle):

* a seed s becomes the key [s >> 32, s & 0xFFFFFFFF] (the high word is 0 unless x64 is on);
* every random value at position i of a shape (i is the row-major flat index, a 64-bit
  counter split in two words) comes from the hash threefry2x32(key, [i >> 32, i & 0xFFFFFFFF]);
* split(key, shape)[i] is that hash itself (both output words), fold_in(key, d) is the
  hash of the counter [0, uint32(d)] (so fold_in(key, i) == split(key, n)[i]);
* 32 random bits are out0 ^ out1 (8 and 16 bits: its low bits; 64: out0 << 32 | out1).

The distributions follow JAX's observable algorithms: uniform sets the top mantissa bits of a float in
[1, 2) (computed here as an exact integer-times-power-of-two) and scales it with one fused multiply-add
for float32/float64, as XLA's CPU backend contracts it; normal is sqrt(2) * erfinv(u) with Giles'
single-precision erfinv, as XLA evaluates it; randint combines two draws of nbits bits.

Three elementwise primitives carry the work besides meshax.numpy: `threefry2x32` (4 uint32 operands
-> 2 uint32 results), `fma` and `erf_inv`; so everything runs eagerly on sharded keys, under jit and
inside shard_map (which evaluates the same primitives per device).

Extension: where JAX needs `jax.vmap` for a batch of keys, the key-level functions here
(split, fold_in, bits, uniform, normal, randint, bernoulli, truncated_normal, gumbel) also
accept a key array of shape (*batch, 2) and return `batch + shape` results equal to
`jax.vmap` of the JAX function (fold_in's data broadcasts against the batch); permutation and
choice need a single key.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from . import dtypes
from . import numpy as jnp
from . import primitives as P
from . import rules
from .api import host_value
from .array import Array
from .core import ShapedArray, Tracer, define_primitive

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "random_bits", "uniform",
    "normal", "randint", "bernoulli", "permutation", "choice", "truncated_normal", "gumbel", "clone",
    "threefry2x32", "erf_inv",
]

_U32 = np.dtype(np.uint32)
_MASK = 0xFFFFFFFF


# ---- primitives ---------------------------------------------------------------------------------------------


def _elementwise_rule(n_out: int):
    def rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], **params: Any) -> rules.Layout:
        layout = rules.elementwise(specs, avals, **params)
        return rules.Layout(layout.in_specs, [layout.out_specs[0]] * n_out)

    return rule


# Threefry-2x32, 20 rounds (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3").
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def _threefry_impl(k0: Any, k1: Any, x0: Any, x1: Any) -> list[np.ndarray]:
    k0, k1, x0, x1 = np.broadcast_arrays(*(np.asarray(a, _U32) for a in (k0, k1, x0, x1)))
    schedule = (k0, k1, k0 ^ k1 ^ _PARITY)
    with np.errstate(over="ignore"):
        x0 = x0 + schedule[0]
        x1 = x1 + schedule[1]
        for group in range(5):
            for r in _ROTATIONS[group % 2]:
                x0 += x1
                x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))
                x1 ^= x0
            x0 += schedule[(group + 1) % 3]
            x1 += schedule[(group + 2) % 3]
            x1 += np.uint32(group + 1)
    return [np.asarray(x0, _U32), np.asarray(x1, _U32)]


def _threefry_aval(*avals: ShapedArray, **_: Any) -> list[ShapedArray]:
    for aval in avals:
        if aval.dtype != _U32:
            raise TypeError(f"threefry2x32 needs uint32 operands; got {[str(a) for a in avals]}.")
    shape = rules.broadcast_shapes(*[a.shape for a in avals])
    return [ShapedArray(shape, _U32), ShapedArray(shape, _U32)]


threefry2x32_p = define_primitive("threefry2x32", _threefry_impl, _threefry_aval, _elementwise_rule(2),
                           multiple_results=True)


def _fma_impl(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c with one rounding, as XLA's CPU backend contracts a multiply-add.

    float32: the product is exact in float64; the sum's exact error (TwoSum) decides a
    round-to-odd float64 result, which then rounds correctly to float32. Other dtypes:
    two roundings."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if a.dtype == np.float64:
        return _fma64(a, b, c)
    if a.dtype != np.float32:
        return a * b + c
    with np.errstate(invalid="ignore", over="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        c64 = c.astype(np.float64)
        s = p + c64
        bc = s - p
        err = (p - (s - bc)) + (c64 - bc)
        inexact = (err != 0) & ((s.view(np.int64) & 1) == 0) & np.isfinite(s)
        if np.any(inexact):
            s = np.where(inexact, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        return np.asarray(s.astype(np.float32))


def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float64 a * b + c from error-free transformations (Veltkamp/Dekker product, Knuth's TwoSum):
    correctly rounded except in rare near-halfway cases."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b
        if not np.all(np.isfinite(p)):
            return np.asarray(a * b + c)

        def halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            t = 134217729.0 * x  # 2**27 + 1
            high = t - (t - x)
            return high, x - high

        ah, al = halves(a)
        bh, bl = halves(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # a * b == p + e exactly
        s = p + c
        bc = s - p
        t = (p - (s - bc)) + (c - bc)  # p + c == s + t exactly
        return np.asarray(s + (t + e))


fma_p = define_primitive("fma", _fma_impl, lambda a, b, c, **_: ShapedArray(
    rules.broadcast_shapes(a.shape, b.shape, c.shape), a.dtype), rules.elementwise)


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision.
_GILES_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erf_inv_f32(x: np.ndarray) -> np.ndarray:
    f32 = np.float32
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        square = (x * x).astype(np.float64)
        w = (-np.log1p(-square)).astype(f32)
        small = w < f32(5)
        w = np.where(small, w - f32(2.5), np.sqrt(w) - f32(3)).astype(f32)
        p = np.where(small, f32(_GILES_SMALL[0]), f32(_GILES_LARGE[0])).astype(f32)
        for lo, hi in zip(_GILES_SMALL[1:], _GILES_LARGE[1:]):
            p = _fma_impl(p, w, np.where(small, f32(lo), f32(hi)).astype(f32))
        result = (p * x).astype(f32)
        return np.where(np.abs(x) == f32(1), x * f32(np.inf), result).astype(f32)


def _erf_inv_impl(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == np.float64:
        # Giles' float32 approximation refined by Newton steps on math.erf (to about 1 ulp).
        y = _erf_inv_f32(x.astype(np.float32)).astype(np.float64)
        erf = np.vectorize(math.erf, otypes=[np.float64])
        with np.errstate(invalid="ignore", over="ignore"):
            for _ in range(2):
                finite = np.isfinite(y)
                step = (erf(np.where(finite, y, 0.0)) - x) / (2 / math.sqrt(math.pi) * np.exp(-y * y))
                y = np.where(finite & np.isfinite(step), y - step, y)
        return y
    return _erf_inv_f32(x.astype(np.float32)).astype(x.dtype)


erf_inv_p = define_primitive("erf_inv", _erf_inv_impl, lambda x, **_: ShapedArray(x.shape, x.dtype, x.weak_type),
                      rules.elementwise)


def threefry2x32(k0: Any, k1: Any, x0: Any, x1: Any) -> list[Any]:
    """The threefry-2x32 hash of counters (x0, x1) under key (k0, k1), elementwise with broadcasting."""
    return threefry2x32_p.bind(*(_as_u32(v) for v in (k0, k1, x0, x1)))


def erf_inv(x: Any) -> Any:
    """The inverse error function, as XLA computes it (Giles' polynomial; float16/bfloat16 via float32)."""
    x = _lift(x)
    if not dtypes.is_floating(np.zeros((), x.dtype)):
        x = _cast_to(x, dtypes.default_float_dtype())
    return erf_inv_p.bind(x)


def _fma(a: Any, b: Any, c: Any) -> Any:
    return fma_p.bind(a, b, c)


# ---- helpers -------------------------------------------------------------------------------------------------


def _is_array(x: Any) -> bool:
    return isinstance(x, (Array, Tracer))


def _lift(x: Any) -> Any:
    """Arrays and tracers stay; anything else becomes a NumPy value of its JAX dtype."""
    if _is_array(x):
        return x
    if hasattr(x, "__jax_array__") or type(x).__module__.startswith("jax"):
        return np.asarray(x)
    return host_value(x)[0]


def _as_u32(x: Any) -> Any:
    x = _lift(x)
    return x if x.dtype == _U32 else jnp.astype(x, _U32)


def _key_array(key: Any, what: str) -> Any:
    key = _lift(key)
    if key.dtype != _U32 or key.ndim < 1 or key.shape[-1] != 2:
        raise TypeError(
            f"{what}: a key must be a uint32 array whose last dimension has size 2 (as PRNGKey returns); "
            f"got {key.dtype}{list(key.shape)}."
        )
    if not _is_array(key):
        key = jnp.asarray(key)
    return key


def _single_key(key: Any, what: str) -> Any:
    key = _key_array(key, what)
    if key.ndim != 1:
        raise ValueError(f"{what} accepts a single key, but was given a key array of shape {tuple(key.shape)}; "
                         "index or split it first.")
    return key


def _canonical_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        out = tuple(operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(f"{what} must be a sequence of integers; got {shape!r}.") from None
    if any(n < 0 for n in out):
        raise ValueError(f"{what} {out} has a negative dimension.")
    return out


def _counters(shape: tuple[int, ...]) -> tuple[Any, Any]:
    """The two words (high, low) of each position's row-major flat index, as uint32 host values."""
    size = math.prod(shape)
    if size > 1 << 64:
        raise NotImplementedError("random arrays of more than 2**64 elements")
    if size <= 1 << 32:
        return np.uint32(0), np.arange(size, dtype=_U32).reshape(shape)
    index = np.arange(size, dtype=np.uint64).reshape(shape)
    return (index >> np.uint64(32)).astype(_U32), (index & np.uint64(_MASK)).astype(_U32)


def _hash(key: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """threefry2x32 of every counter of `shape` under each key of the batch: two uint32[*batch, *shape]."""
    k0, k1 = key[..., 0], key[..., 1]
    if key.ndim > 1 and shape:
        batch = tuple(key.shape[:-1])
        k0 = jnp.reshape(k0, batch + (1,) * len(shape))
        k1 = jnp.reshape(k1, batch + (1,) * len(shape))
    hi, lo = _counters(shape)
    out0, out1 = threefry2x32_p.bind(k0, k1, hi, lo)
    return out0, out1


def _bits(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    out0, out1 = _hash(key, shape)
    if bit_width == 64:
        wide = np.dtype(np.uint64)
        return jnp.bitwise_or(jnp.left_shift(jnp.astype(out0, wide), np.uint64(32)), jnp.astype(out1, wide))
    bits32 = jnp.bitwise_xor(out0, out1)
    if bit_width == 32:
        return bits32
    return jnp.astype(bits32, np.dtype(f"uint{bit_width}"))


def _stack_key(out0: Any, out1: Any) -> Any:
    return jnp.stack([out0, out1], axis=-1)


def _float_dtype(dtype: Any, what: str) -> np.dtype:
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    if not dtypes.is_floating(np.zeros((), dtype)):
        raise ValueError(f"dtype argument to `{what}` must be a float dtype, got {dtype}")
    return dtype


def _cast_to(x: Any, dtype: np.dtype) -> Any:
    x = _lift(x)
    if _is_array(x):
        return x if x.dtype == dtype and not x.weak_type else jnp.astype(x, dtype)
    return np.asarray(x, dtype)


def _check_broadcast(value: Any, shape: tuple[int, ...], what: str, name: str) -> None:
    vshape = tuple(np.shape(value)) if not _is_array(value) else tuple(value.shape)
    if len(vshape) > len(shape) or any(a not in (1, b) for a, b in zip(vshape[::-1], shape[::-1])):
        raise ValueError(f"{what}: {name} of shape {vshape} is not broadcast-compatible with shape {shape}.")


def _random_bits_for(dtype: np.dtype) -> tuple[int, int]:
    info = dtypes.finfo(dtype)
    nbits, nmant = int(info.bits), int(info.nmant)
    return (8 if nmant < 8 else nbits), nmant


# ---- keys ----------------------------------------------------------------------------------------------------


def _seed_words(seed: Any) -> Any:
    if isinstance(seed, (bool, np.bool_)):
        return np.array([0, int(seed)], _U32)
    if isinstance(seed, (int, np.integer)):
        seed = int(seed)
        if not -(1 << 63) <= seed < (1 << 64):
            raise OverflowError(f"Python int {seed} too large to convert to a 64-bit seed.")
        hi = (seed >> 32) & _MASK if dtypes.x64_enabled() else 0
        return np.array([hi, seed & _MASK], _U32)
    if isinstance(seed, (float, complex, np.floating, np.complexfloating)):
        raise TypeError(f"PRNG key seed must be an integer; got {seed!r}")
    seed = _lift(seed)
    if seed.ndim:
        raise TypeError(f"PRNGKey accepts a scalar seed, but was given an array of shape {tuple(seed.shape)} != (). "
                        "Use a loop, or fold_in on a batch of keys.")
    if not (np.issubdtype(seed.dtype, np.integer) or seed.dtype == np.bool_):
        raise TypeError(f"PRNG key seed must be an integer; got {seed.dtype}")
    if not _is_array(seed):
        return _seed_words(seed.item())
    lo = jnp.astype(seed, _U32)
    if np.dtype(seed.dtype).itemsize == 8:
        hi = jnp.astype(jnp.right_shift(jnp.astype(seed, np.uint64), np.uint64(32)), _U32)
    else:
        hi = np.uint32(0)
    return jnp.stack([hi, lo])


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:
    """A raw threefry key, uint32[2]: [high word, low word] of the seed (the high word is 0 without x64)."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"meshax.random implements only the threefry2x32 PRNG; got impl={impl!r}.")
    words = _seed_words(seed)
    return words if _is_array(words) else jnp.asarray(words)


def key(seed: Any, *, impl: Any = None) -> Any:
    """Like `jax.random.key`, but returns the raw uint32[2] key (meshax has no typed key arrays)."""
    return PRNGKey(seed, impl=impl)


def key_data(keys: Any) -> Any:
    """The uint32 data of raw keys: the keys themselves."""
    return _key_array(keys, "key_data")


def wrap_key_data(key_bits_array: Any, *, impl: Any = None) -> Any:
    """Keys from their uint32 data: the data itself, as meshax keys are raw."""
    return _key_array(key_bits_array, "wrap_key_data")


def clone(key: Any) -> Any:
    """Keys are immutable values here: the key itself."""
    return _key_array(key, "clone")


def split(key: Any, num: int | tuple[int, ...] = 2) -> Any:
    """`num` new keys (an int or a shape): key i is threefry2x32(key, [i >> 32, i & 0xFFFFFFFF])."""
    key = _key_array(key, "split")
    shape = _canonical_shape(num, "num")
    return _stack_key(*_hash(key, shape))


def fold_in(key: Any, data: Any) -> Any:
    """A new key from `key` and 32-bit `data`: threefry2x32(key, [0, uint32(data)])."""
    key = _key_array(key, "fold_in")
    if isinstance(data, (int, np.integer)) and not isinstance(data, (bool, np.bool_)):
        if not 0 <= int(data) <= _MASK:
            raise OverflowError(f"Python integer {int(data)} out of bounds for uint32")
        data = np.uint32(int(data))
    data = _as_u32(data)
    k0, k1 = key[..., 0], key[..., 1]
    out0, out1 = threefry2x32_p.bind(k0, k1, np.uint32(0), data)
    return _stack_key(out0, out1)


def bits(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Uniform random bits of an unsigned dtype (uint8/16/32, uint64 with x64)."""
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_uint_dtype())
    if not np.issubdtype(dtype, np.unsignedinteger):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dtype}")
    key = _key_array(key, "bits")
    return _bits(key, dtype.itemsize * 8, _canonical_shape(shape))


def random_bits(key: Any, bit_width: int, shape: Any) -> Any:
    """`bit_width` (8, 16, 32 or 64) random bits for every position of `shape`."""
    if bit_width not in (8, 16, 32, 64):
        raise ValueError(f"bit_width must be 8, 16, 32 or 64; got {bit_width}.")
    if bit_width == 64 and not dtypes.x64_enabled():
        raise ValueError("64-bit random bits need jax_enable_x64.")
    return _bits(_key_array(key, "random_bits"), bit_width, _canonical_shape(shape))


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


def uniform(key: Any, shape: Any = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0) -> Any:
    """Uniform floats in [minval, maxval)."""
    dtype = _float_dtype(dtype, "uniform")
    return _uniform(_key_array(key, "uniform"), _canonical_shape(shape), dtype, minval, maxval)


def _normal_real(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    low = np.nextafter(np.asarray(-1, dtype), np.asarray(0, dtype))
    u = _uniform(key, shape, dtype, low, np.asarray(1, dtype))
    return jnp.multiply(np.asarray(np.sqrt(2), dtype), erf_inv_p.bind(u))


def normal(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Standard normal samples: sqrt(2) * erfinv(u), u uniform in (-1, 1)."""
    key = _key_array(key, "normal")
    shape = _canonical_shape(shape)
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    if np.issubdtype(dtype, np.complexfloating):
        real_dtype = np.zeros((), dtype).real.dtype
        keys = split(key)
        re = jnp.astype(_normal_real(keys[..., 0, :], shape, real_dtype), dtype)
        im = jnp.astype(_normal_real(keys[..., 1, :], shape, real_dtype), dtype)
        return jnp.divide(jnp.add(re, jnp.multiply(np.asarray(1j, dtype), im)), np.asarray(np.sqrt(2), dtype))
    dtype = _float_dtype(dtype, "normal")
    return _normal_real(key, shape, dtype)


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


def gumbel(key: Any, shape: Any = (), dtype: Any = None, mode: str | None = None) -> Any:
    """Standard Gumbel samples: -log(-log(u)), u uniform in [tiny, 1)."""
    if mode not in (None, "low"):
        raise NotImplementedError(f"gumbel mode {mode!r}: meshax implements mode='low' only.")
    dtype = _float_dtype(dtype, "gumbel")
    u = _uniform(_key_array(key, "gumbel"), _canonical_shape(shape), dtype, np.asarray(dtypes.finfo(dtype).tiny, dtype),
                 np.asarray(1, dtype))
    return jnp.negative(_log(jnp.negative(_log(u))))


def bernoulli(key: Any, p: Any = 0.5, shape: Any = None) -> Any:
    """Booleans that are True with probability p."""
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
    return jnp.less(_uniform(key, shape, dtype, np.asarray(0, dtype), np.asarray(1, dtype)), p)


# ---- integers ----------------------------------------------------------------------------------------------------


def _int_bounds(value: Any) -> Any:
    value = _lift(value)
    if not (np.issubdtype(value.dtype, np.integer)):
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


def randint(key: Any, shape: Any, minval: Any, maxval: Any, dtype: Any = None) -> Any:
    """Integers uniform in [minval, maxval), from 2 * nbits random bits (slightly biased, as JAX's).

    Bounds are clipped to the dtype's range. As in JAX, dtypes narrower than 32 bits are drawn
    as int32 in [minval, maxval) with maxval clipped to the dtype's max + 1, then converted."""
    key = _key_array(key, "randint")
    shape = _canonical_shape(shape)
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_int_dtype())
    if not np.issubdtype(dtype, np.integer):
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


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of arange(x) (x an int), or of x along `axis` (each slice independently
    if `independent`)."""
    key = _single_key(key, "permutation")
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return _shuffle(key, jnp.arange(int(x), dtype=dtypes.default_int_dtype()), 0)
    x = _lift(x)
    if x.ndim == 0:
        if not np.issubdtype(x.dtype, np.integer):
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
