"""In-band desync checks for reductions: a few extra elements that travel with the data.

Each member appends elements computed from its history hash (history.py) to the buffer it
reduces. After the reduction every member can predict the trailer's value only if all
members appended the same elements:

- max and min: the trailer is (w, -w) for a word w >= 1; it comes back as (max w, -min w),
  which equals (w, -w) exactly when every member's w is w.
- sum: the trailer is (d, d*d) for each digit d of the hash; it comes back as (sum d,
  sum d*d), which equals (n*d, n*d*d) exactly when every member's digit is d (the sum of
  squared differences from d is then zero). Digits are small enough that every partial
  sum is an exact integer in the dtype, so the order of the reduction does not matter.

A member whose buffer has another size or dtype makes the trailers land elsewhere or read
as other numbers, so they disagree too. Reductions in other dtypes (or `prod`) are checked
by a separate small allreduce instead.
"""
from __future__ import annotations

import functools
import struct

import numpy as np

_EXACT_BITS = {("f", 4): 24, ("f", 8): 53, ("c", 8): 24, ("c", 16): 53, ("i", 4): 31, ("i", 8): 63}
_HASH_BITS = 32


def _bits(dtype: np.dtype) -> int | None:
    return _EXACT_BITS.get((dtype.kind, dtype.itemsize))


def _digit_bits(bits: int, members: int) -> int:
    return min(_HASH_BITS, (bits - members.bit_length()) // 2)


@functools.lru_cache(maxsize=256)
def trailer_length(dtype: np.dtype, op: str, members: int) -> int:
    """How many elements the check appends to a reduction `op` of `dtype` over `members` processes (0: none)."""
    bits = _bits(dtype)
    if bits is None or op == "prod":
        return 0
    if op in ("max", "min"):
        return 0 if dtype.kind == "c" else 2
    digit = _digit_bits(bits, members)
    return 0 if digit < 4 else 2 * -(-_HASH_BITS // digit)


_FORMATS = {("f", 4): "f", ("f", 8): "d", ("c", 8): "f", ("c", 16): "d", ("i", 4): "i", ("i", 8): "q"}


def _values(chain: int, dtype: np.dtype, op: str, members: int, length: int) -> tuple[list[int], list[int]]:
    """(this member's check elements, what they reduce to if every member agrees)."""
    bits = _bits(dtype)
    assert bits is not None
    if op in ("max", "min"):
        word = 1 + chain % ((1 << min(bits, _HASH_BITS)) - 1)
        return [word, -word], [word, -word]
    size = _digit_bits(bits, members)
    mine, reduced = [], []
    for i in range(length // 2):
        digit = (chain >> (size * i)) & ((1 << size) - 1)
        mine += [digit, digit * digit]
        reduced += [members * digit, members * digit * digit]
    return mine, reduced


def _layout(dtype: np.dtype, length: int) -> str:
    """The struct format of a trailer of `length` elements (complex ones as real, imaginary pairs)."""
    code = _FORMATS[(dtype.kind, dtype.itemsize)]
    return "<" + code * (length * (2 if dtype.kind == "c" else 1))


def _spread(values: list[int], dtype: np.dtype) -> list[int]:
    return [part for value in values for part in (value, 0)] if dtype.kind == "c" else values


def write_trailer(tail: np.ndarray, chain: int, op: str, members: int) -> tuple:
    """Fill `tail` (trailer_length elements, contiguous) with this member's check elements; returns what the
    reduced trailer must read if every member agrees (for `trailer_agrees`)."""
    mine, reduced = _values(chain, tail.dtype, op, members, tail.size)
    fmt = _layout(tail.dtype, tail.size)
    struct.pack_into(fmt, tail.data.cast("B"), 0, *_spread(mine, tail.dtype))
    return fmt, tuple(_spread(reduced, tail.dtype))


def trailer_agrees(tail: np.ndarray, expected: tuple) -> bool:
    """Whether the reduced `tail` reads as `write_trailer` predicted: every member appended the same."""
    fmt, values = expected
    return struct.unpack_from(fmt, tail.data.cast("B"), 0) == values
