"""The core of meshax.random: the threefry-2x32, fma and erf_inv primitives, key handling (PRNGKey, split,
fold_in, ...) and raw random bits, as JAX's default PRNG computes them bit for bit.

The scheme and its extensions are described in meshax._src.random, which re-exports this module's
public names; the distributions built on these bits live in meshax._src.random.distributions.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..core import dtypes
from .. import numpy as jnp
from ..arrays.placement import host_value
from ..arrays.array import Array
from ..arrays.out_sharding import accepts_out_sharding
from ..core.core import Tracer
from ..primitives.random_bits import erf_inv_p, fma_p, threefry2x32_p  # noqa: F401  (meshax.random's primitives)
from ..core.dtypes import issubdtype
from ..arrays.key_arrays import KeyArray, KeyDType

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "bits", "random_bits", "clone",
    "threefry2x32", "erf_inv",
]

_U32 = np.dtype(np.uint32)
_MASK = 0xFFFFFFFF


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
    """The uint32[..., 2] data of `key`: a typed key array's data, or a raw key (checked)."""
    if isinstance(key, KeyArray):
        key = key._data
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


def _cast_to(x: Any, dtype: np.dtype) -> Any:
    x = _lift(x)
    if _is_array(x):
        return x if x.dtype == dtype and not x.weak_type else jnp.astype(x, dtype)
    return np.asarray(x, dtype)


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
    try:
        seed = _lift(seed)
    except TypeError:
        from ..runtime.watch import user_site

        dtype = seed.dtype if hasattr(seed, "dtype") else np.asarray(seed).dtype
        raise TypeError(f"Value {seed!r:.100} with dtype {dtype} is not a valid JAX array type. Only arrays of numeric "
                        f"types are supported by JAX. The PRNG key seed (at {user_site()}) must be an integer, "
                        "e.g. PRNGKey(0).") from None
    if seed.ndim:
        raise TypeError(f"PRNGKey accepts a scalar seed, but was given an array of shape {tuple(seed.shape)} != (). "
                        "Use a loop, or fold_in on a batch of keys.")
    if not (issubdtype(seed.dtype, np.integer) or seed.dtype == np.bool_):
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


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """A typed key array of shape () (dtype key<fry>) for `seed`: its data is PRNGKey(seed). Its PRNG is named by
    `impl` or (JAX 0.12) by a key `dtype` (one of the two)."""
    if impl is not None and dtype is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to jax.random.key")
    if dtype is not None:
        impl = _impl_of_key_dtype(dtype)
    return KeyArray(PRNGKey(seed, impl=impl))


def key_data(keys: Any) -> Any:
    """The uint32[..., 2] data of typed keys (raw keys are their own data)."""
    return _key_array(keys, "key_data")


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> KeyArray:
    """Typed keys overlaying uint32[..., 2] data (as key_data returns it); their PRNG is named by `impl` or by a
    key `dtype` (one of the two)."""
    if impl is not None and dtype is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to jax.random.wrap_key_data")
    if dtype is not None:
        impl = _impl_of_key_dtype(dtype)
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"meshax.random implements only the threefry2x32 PRNG; got impl={impl!r}.")
    return KeyArray(_key_array(key_bits_array, "wrap_key_data"))


def _impl_of_key_dtype(dtype: Any) -> Any:
    """The PRNG a `dtype=` argument names: a key dtype's own, or (as JAX reads it) an implementation's name."""
    if isinstance(dtype, KeyDType):
        return dtype.impl
    if isinstance(dtype, str):
        return dtype
    raise TypeError(f"unrecognized type {type(dtype)} for specifying PRNG implementation.")


def _like(key: Any, data: Any) -> Any:
    """New key data returned as `key` came: typed if it was typed, raw if raw."""
    return KeyArray(data) if isinstance(key, KeyArray) else data


def clone(key: Any) -> Any:
    """Keys are immutable values here: the key itself."""
    return _like(key, _key_array(key, "clone"))


def split(key: Any, num: int | tuple[int, ...] = 2) -> Any:
    """`num` new keys (an int or a shape): key i is threefry2x32(key, [i >> 32, i & 0xFFFFFFFF])."""
    data = _key_array(key, "split")
    shape = _canonical_shape(num, "num")
    return _like(key, _stack_key(*_hash(data, shape)))


def fold_in(key: Any, data: Any) -> Any:
    """A new key from `key` and 32-bit `data`: threefry2x32(key, [0, uint32(data)])."""
    typed, key = key, _key_array(key, "fold_in")
    if isinstance(data, (int, np.integer)) and not isinstance(data, (bool, np.bool_)):
        if not 0 <= int(data) <= _MASK:
            raise OverflowError(f"Python integer {int(data)} out of bounds for uint32")
        data = np.uint32(int(data))
    data = _as_u32(data)
    k0, k1 = key[..., 0], key[..., 1]
    out0, out1 = threefry2x32_p.bind(k0, k1, np.uint32(0), data)
    return _like(typed, _stack_key(out0, out1))


@accepts_out_sharding
def bits(key: Any, shape: Any = (), dtype: Any = None) -> Any:
    """Uniform random bits of an unsigned dtype (uint8/16/32, uint64 with x64)."""
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_uint_dtype())
    if not issubdtype(dtype, np.unsignedinteger):
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
