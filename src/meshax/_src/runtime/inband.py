"""In-band desync checks for reductions: a few extra elements that travel with the data.

Each member appends elements computed from its history hash (history.py) to the buffer it
reduces. After the reduction every member can predict the trailer's value only if all
members appended the same elements:

- max and min: the trailer is (w, -w) for a word w >= 1; it comes back as (max w, -min w),
  which equals (w, -w) exactly when every member's w is w.
- sum: the trailer holds the hash cut into digits d, small enough that n of them add up
  exactly in the dtype; it comes back as the members' sums, which equal n*d for every digit
  exactly when the members' digits sum to n times this member's. With two different
  histories among the members (k of one, n - k of the other) that means k * (d' - d) = 0,
  i.e. equal hashes; with more, a coincidence among unrelated hashes.

A member whose buffer has another size or dtype makes the trailers land elsewhere or read
as other numbers, so they disagree too. Reductions in other dtypes (or `prod`) are checked
by a separate small allreduce instead. This runs on every small reduction, so a check is
one `pack_into` before the reduction and one `unpack_from` after it.
"""
from __future__ import annotations

import functools
import struct

import numpy as np

_EXACT_BITS = {("f", 4): 24, ("f", 8): 53, ("c", 8): 24, ("c", 16): 53, ("i", 4): 31, ("i", 8): 63}
_FORMATS = {("f", 4): "f", ("f", 8): "d", ("c", 8): "f", ("c", 16): "d", ("i", 4): "i", ("i", 8): "q"}
_HASH_BITS = 32
_MIN_DIGIT_BITS = 8  # fewer bits per element, and a check would need too many elements


class Trailer:
    """The check elements of reductions `op` of `dtype` over `members` processes, at the end of a buffer of
    `buffer_bytes`."""

    __slots__ = ("length", "nbytes", "_struct", "_offset", "_members", "_size", "_digits", "_modulus")

    def __init__(self, dtype: np.dtype, op: str, members: int, buffer_bytes: int) -> None:
        bits = _EXACT_BITS[(dtype.kind, dtype.itemsize)]
        code = _FORMATS[(dtype.kind, dtype.itemsize)]
        self._members, self._modulus = members, 0
        if op in ("max", "min"):
            self._modulus, layout = (1 << min(bits, _HASH_BITS)) - 1, code * 2
        else:
            self._size = _digit_bits(bits, members)
            self._digits = -(-_HASH_BITS // self._size)
            layout = code * self._digits + ("x" * (dtype.itemsize // 2) if dtype.kind == "c" and self._digits % 2 else "")
        self._struct = struct.Struct("<" + layout)  # pad bytes (half a complex element) stay zero
        self.nbytes = self._struct.size
        self.length = self.nbytes // dtype.itemsize
        self._offset = buffer_bytes - self.nbytes

    def write(self, buffer: bytearray, chain: int) -> tuple:
        """Put this member's check for history hash `chain` at the end of `buffer`; returns what the reduced
        check must read if every member agrees (for `agrees`)."""
        if self._modulus:
            word = 1 + chain % self._modulus
            self._struct.pack_into(buffer, self._offset, word, -word)
            return word, -word
        size, members = self._size, self._members
        if self._digits == 2:  # the common case, spelled out: this runs on every small reduction
            low, high = chain & ((1 << size) - 1), chain >> size
            self._struct.pack_into(buffer, self._offset, low, high)
            return members * low, members * high
        digits = [(chain >> shift) & ((1 << size) - 1) for shift in range(0, _HASH_BITS, size)]
        self._struct.pack_into(buffer, self._offset, *digits)
        return tuple([members * digit for digit in digits])

    def agrees(self, buffer: bytearray, expected: tuple) -> bool:
        """Whether the reduced check at the end of `buffer` reads as `write` predicted: every member agrees."""
        return self._struct.unpack_from(buffer, self._offset) == expected


def _digit_bits(bits: int, members: int) -> int:
    """The largest digit size such that `members` digits add up exactly within `bits` bits."""
    return min(_HASH_BITS, bits - members.bit_length())


@functools.lru_cache(maxsize=256)
def trailer(dtype: np.dtype, op: str, members: int, buffer_bytes: int) -> Trailer | None:
    """The check of reductions `op` of `dtype` over `members` processes at the end of buffers of `buffer_bytes`,
    or None if they cannot carry one."""
    bits = _EXACT_BITS.get((dtype.kind, dtype.itemsize))
    if bits is None or op == "prod" or (op in ("max", "min") and dtype.kind == "c"):
        return None
    if op == "sum" and _digit_bits(bits, members) < _MIN_DIGIT_BITS:
        return None
    return Trailer(dtype, op, members, buffer_bytes)
