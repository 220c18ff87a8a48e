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

import numpy as np

_EXACT_BITS = {("f", 4): 24, ("f", 8): 53, ("c", 8): 24, ("c", 16): 53, ("i", 4): 31, ("i", 8): 63}
_HASH_BITS = 32


def _bits(dtype: np.dtype) -> int | None:
    return _EXACT_BITS.get((dtype.kind, dtype.itemsize))


def _digit_bits(bits: int, members: int) -> int:
    return min(_HASH_BITS, (bits - members.bit_length()) // 2)


def trailer_length(dtype: np.dtype, op: str, members: int) -> int:
    """How many elements the check appends to a reduction `op` of `dtype` over `members` processes (0: none)."""
    bits = _bits(dtype)
    if bits is None or op == "prod":
        return 0
    if op in ("max", "min"):
        return 0 if dtype.kind == "c" else 2
    digit = _digit_bits(bits, members)
    return 0 if digit < 4 else 2 * -(-_HASH_BITS // digit)


def _word(chain: int, bits: int) -> int:
    usable = min(bits, _HASH_BITS)
    return 1 + chain % ((1 << usable) - 1)


def _digits(chain: int, bits: int, members: int, count: int) -> list[int]:
    size = _digit_bits(bits, members)
    return [(chain >> (size * i)) & ((1 << size) - 1) for i in range(count)]


def _expected(chain: int, dtype: np.dtype, op: str, members: int, count: int, reduced: bool) -> list[int]:
    bits = _bits(dtype)
    assert bits is not None
    if op in ("max", "min"):
        word = _word(chain, bits)
        return [word, -word]
    scale = members if reduced else 1
    values = []
    for digit in _digits(chain, bits, members, count // 2):
        values += [scale * digit, scale * digit * digit]
    return values


def write_trailer(tail: np.ndarray, chain: int, op: str, members: int) -> None:
    """Fill `tail` (trailer_length elements) with this member's check elements."""
    tail[...] = _expected(chain, tail.dtype, op, members, tail.size, reduced=False)


def trailer_agrees(tail: np.ndarray, chain: int, op: str, members: int) -> bool:
    """Whether the reduced `tail` shows that every member appended the same check elements as this one."""
    return bool(np.array_equal(tail, np.asarray(_expected(chain, tail.dtype, op, members, tail.size, reduced=True),
                                                dtype=tail.dtype)))
