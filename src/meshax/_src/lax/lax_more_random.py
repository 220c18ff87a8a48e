"""jax.lax's stateless bit generator and stateful uniform sampler: rng_bit_generator (XLA's Philox4x32-10 and
ThreeFry-2x32 bit generators, bit for bit: the key is a uint32[4] holding a 64-bit key and a 64-bit counter) and
rng_uniform."""
from __future__ import annotations

import itertools
import math
import warnings
from typing import Any, Sequence

import numpy as np

from ..core.core import ShapedArray, aval_of, define_primitive
from ..core.dtypes import issubdtype
from ..primitives import array_primitives as P
from ..primitives.random_bits import _threefry_impl
from ..sharding import placement_rules as rules
from .lax_more_enums import RandomAlgorithm
from .lax_ops import _lift

__all__ = ["rng_bit_generator", "rng_uniform"]

_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)
_PHILOX_M = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)
_BIT_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))


def _split64(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """uint64 values as their low and high uint32 words."""
    return (values & np.uint64(0xFFFFFFFF)).astype(_U32), (values >> np.uint64(32)).astype(_U32)


def _philox(counter: list[np.ndarray], k0: int, k1: int) -> list[np.ndarray]:
    """Philox4x32 with 10 rounds on four uint32 counter words."""
    x = list(counter)
    for _ in range(10):
        p0, p1 = _PHILOX_M[0] * x[0].astype(_U64), _PHILOX_M[1] * x[2].astype(_U64)
        (lo0, hi0), (lo1, hi1) = _split64(p0), _split64(p1)
        x = [hi1 ^ x[1] ^ np.uint32(k0), lo1, hi0 ^ x[3] ^ np.uint32(k1), lo0]
        k0, k1 = (k0 + _PHILOX_W[0]) & 0xFFFFFFFF, (k1 + _PHILOX_W[1]) & 0xFFFFFFFF
    return x


def _philox_bits(key: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """XLA's Philox generator: a 128-bit counter (the key's counter word low, its key word high) advanced once per
    four outputs; returns the bits and the number of counters used."""
    n = math.prod(shape)
    blocks = -(-n // 4) if n else 0
    with np.errstate(over="ignore"):
        low = np.uint64(int(key[2]) | int(key[3]) << 32) + np.arange(blocks, dtype=_U64)
    carry = (low < np.uint64(int(key[2]) | int(key[3]) << 32)).astype(_U64)
    with np.errstate(over="ignore"):
        high = np.uint64(int(key[0]) | int(key[1]) << 32) + carry
    words = _philox([*_split64(low), *_split64(high)], int(key[0]), int(key[1]))
    return np.stack(words, axis=1).reshape(-1)[:n].reshape(shape), blocks


def _threefry_split_dim(shape: tuple[int, ...]) -> int:
    """The dimension XLA's ThreeFry generator halves: the first even one, else the first largest."""
    even = [d for d, size in enumerate(shape) if size % 2 == 0]
    return even[0] if even else int(np.argmax(shape))


def _threefry_bits(key: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """XLA's ThreeFry generator: one dimension halved, a 64-bit counter per element of the half shape, the two
    output words of each counter side by side along that dimension; returns the bits and counters used."""
    full = shape or (1,)
    dim = _threefry_split_dim(full)
    half = full[:dim] + (-(-full[dim] // 2),) + full[dim + 1:]
    count = math.prod(half)
    with np.errstate(over="ignore"):
        counter = np.uint64(int(key[2]) | int(key[3]) << 32) + np.arange(count, dtype=_U64)
    x0, x1 = _threefry_impl(np.uint32(key[0]), np.uint32(key[1]), *_split64(counter))
    pairs = np.stack([x0.reshape(half), x1.reshape(half)], axis=dim + 1)
    joined = pairs.reshape(half[:dim] + (2 * half[dim],) + half[dim + 1:])
    return joined[tuple(slice(0, n) for n in full)].reshape(shape), count


def _rng_bit_generator_impl(key: np.ndarray, *, shape: tuple[int, ...], dtype: np.dtype, algorithm: Any,
                            out_sharding: Any = None) -> list[np.ndarray]:
    key = np.asarray(key, _U32)
    generate = _threefry_bits if algorithm == RandomAlgorithm.RNG_THREE_FRY else _philox_bits
    bits, used = generate(key, tuple(shape))
    counter = (int(key[2]) | int(key[3]) << 32) + used
    new_key = np.array([key[0], key[1], counter & 0xFFFFFFFF, (counter >> 32) & 0xFFFFFFFF], _U32)
    return [new_key, bits.astype(dtype)]


def _rng_bit_generator_aval(key: ShapedArray, *, shape: tuple[int, ...], dtype: np.dtype, algorithm: Any,
                            out_sharding: Any = None) -> list[ShapedArray]:
    return [ShapedArray(tuple(key.shape), key.dtype), ShapedArray(tuple(shape), np.dtype(dtype))]


def _replicated_outputs(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, shape: tuple[int, ...],
                        **_: Any) -> rules.Layout:
    return rules.replicate_all(specs, avals, out_ndims=(1, len(shape)))


rng_bit_generator_p = define_primitive("rng_bit_generator", _rng_bit_generator_impl, _rng_bit_generator_aval,
                                       _replicated_outputs, multiple_results=True)


def rng_bit_generator(key: Any, shape: Sequence[int], dtype: Any = np.uint32,
                      algorithm: RandomAlgorithm = RandomAlgorithm.RNG_DEFAULT, *, out_sharding: Any = None
                      ) -> tuple[Any, Any]:
    """(new key, random bits of `shape` and unsigned `dtype`) from a uint32[4] key, as jax.lax.rng_bit_generator
    on the CPU: RNG_DEFAULT and RNG_PHILOX are XLA's Philox4x32-10, RNG_THREE_FRY its ThreeFry-2x32."""
    dtype = np.dtype(dtype)
    if dtype not in _BIT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    if dtype == _U64:
        warnings.warn("Explicitly requested dtype uint64 requested in rng_bit_generator is not available, and will "
                      "be truncated to dtype uint32. To enable more dtypes, set the jax_enable_x64 configuration "
                      "option or the JAX_ENABLE_X64 shell environment variable.", stacklevel=2)
        dtype = _U32
    key = _lift(key)
    aval = aval_of(key)
    if tuple(aval.shape) != (4,) or np.dtype(aval.dtype) != _U32:
        raise TypeError(f"rng_bit_generator needs a uint32[4] key; got {np.dtype(aval.dtype)}{list(aval.shape)}. "
                        "Pass four uint32 words.")
    shape = tuple(int(n) for n in shape)
    new_key, bits = rng_bit_generator_p.bind(key, shape=shape, dtype=dtype, algorithm=RandomAlgorithm(algorithm),
                                             out_sharding=out_sharding)
    return new_key, bits


# ---- rng_uniform -----------------------------------------------------------------------------------------------------

_calls = itertools.count(1)  # each rng_uniform call draws from its own stream, the same in every process


def _rng_uniform_impl(a: np.ndarray, b: np.ndarray, *, shape: tuple[int, ...], stream: int) -> np.ndarray:
    generator = np.random.default_rng([stream, 0x6C61785F])
    if issubdtype(a.dtype, np.integer):
        low, high = int(a), int(b)
        return generator.integers(low, max(high, low + 1), size=shape).astype(a.dtype)
    return (a + (b - a) * generator.random(size=shape, dtype=np.float64)).astype(a.dtype)


rng_uniform_p = define_primitive(
    "rng_uniform", _rng_uniform_impl,
    lambda a, b, *, shape, stream: ShapedArray(tuple(shape), a.dtype),
    lambda specs, avals, *, shape, **_: rules.replicate_all(specs, avals, out_ndims=(len(shape),)))


def rng_uniform(a: Any, b: Any, shape: Sequence[int]) -> Any:
    """Values drawn uniformly from [a, b) of `shape` (as jax.lax.rng_uniform: a stateful sampler whose values are
    meshax's own; each call site draws a new stream, fixed once traced under jit)."""
    a, b = _lift(a), _lift(b)
    if np.dtype(aval_of(a).dtype) != np.dtype(aval_of(b).dtype):
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got {np.dtype(aval_of(a).dtype)} and "
                         f"{np.dtype(aval_of(b).dtype)}.")
    for name, value in (("a", a), ("b", b)):
        if tuple(aval_of(value).shape):
            raise TypeError(f"rng_uniform needs scalar bounds; got {name} of shape {tuple(aval_of(value).shape)}.")
    strong = [P.convert_element_type.bind(v, new_dtype=np.dtype(aval_of(v).dtype), weak_type=False) for v in (a, b)]
    return rng_uniform_p.bind(*strong, shape=tuple(int(n) for n in shape), stream=next(_calls))
