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
one `pack_into` and one `pack` (the prediction) before the reduction and one comparison of
bytes after it.
"""
from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

_EXACT_BITS = {("f", 4): 24, ("f", 8): 53, ("c", 8): 24, ("c", 16): 53, ("i", 4): 31, ("i", 8): 63}
_FORMATS = {("f", 4): "f", ("f", 8): "d", ("c", 8): "f", ("c", 16): "d", ("i", 4): "i", ("i", 8): "q"}
_HASH_BITS = 32
_MIN_DIGIT_BITS = 8  # fewer bits per element, and a check would need too many elements


class Trailer:
    """The check elements of reductions `op` of `dtype` over `members` processes, at the end of a buffer of
    `buffer_bytes`. `write` and `agrees` run on every checked reduction, so each kind of check is its own
    subclass with nothing to decide per call, and the prediction is bytes: after the reduction (when the
    process comes back from waiting, its caches cold) checking it is one comparison of bytes, not a
    conversion of the reduced elements to Python numbers."""

    __slots__ = ("length", "nbytes", "offset", "members", "_pack_into", "_pack")

    def __init__(self, dtype: np.dtype, layout: str, members: int, buffer_bytes: int) -> None:
        packer = struct.Struct("<" + layout)  # pad bytes (half a complex element) are zeros, and reduce to zeros
        self._pack_into, self._pack = packer.pack_into, packer.pack
        self.members = members
        self.nbytes = packer.size
        self.length = self.nbytes // dtype.itemsize
        self.offset = buffer_bytes - self.nbytes

    def write(self, buffer: Any, chain: int) -> bytes:
        """Put this member's check for history hash `chain` at the end of `buffer` (any writable buffer: a
        bytearray is fastest); returns the bytes the reduced check must be if every member agrees."""
        raise NotImplementedError  # each kind of check writes its own

    def agrees(self, buffer: Any, expected: bytes) -> bool:
        """Whether the reduced check at the end of `buffer` (a bytearray, or a 1-d array of the reduction's dtype,
        `buffer_bytes` long) is the bytes `write` predicted: every member agrees. Bytes are equal exactly when
        the values are, except that they also tell -0.0 from 0.0, which members that agree never produce
        (their sums and extremes are exact)."""
        if type(buffer) is bytearray:
            return buffer.startswith(expected, self.offset)
        return buffer[-self.length:].tobytes() == expected


class _ExtremeTrailer(Trailer):
    """max and min: (w, -w) for a word w >= 1 of the hash comes back as (max w, -min w)."""

    __slots__ = ("_modulus",)

    def __init__(self, dtype: np.dtype, code: str, bits: int, members: int, buffer_bytes: int) -> None:
        super().__init__(dtype, code * 2, members, buffer_bytes)
        self._modulus = (1 << min(bits, _HASH_BITS)) - 1

    def write(self, buffer: Any, chain: int) -> bytes:
        word = 1 + chain % self._modulus
        self._pack_into(buffer, self.offset, word, -word)
        return self._pack(word, -word)


class _SumTrailer(Trailer):
    """sum: the hash in digits of `size` bits, which come back as the members' sums of each digit."""

    __slots__ = ("_size", "_mask")

    def __init__(self, dtype: np.dtype, code: str, bits: int, members: int, buffer_bytes: int) -> None:
        self._size = _digit_bits(bits, members)
        self._mask = (1 << self._size) - 1
        digits = -(-_HASH_BITS // self._size)
        pad = "x" * (dtype.itemsize // 2) if dtype.kind == "c" and digits % 2 else ""
        super().__init__(dtype, code * digits + pad, members, buffer_bytes)

    def write(self, buffer: Any, chain: int) -> bytes:
        size, mask, members = self._size, self._mask, self.members
        digits = [(chain >> shift) & mask for shift in range(0, _HASH_BITS, size)]
        self._pack_into(buffer, self.offset, *digits)
        return self._pack(*[members * digit for digit in digits])


class _OneDigitSumTrailer(_SumTrailer):
    """sum with the whole hash in one digit: float64 over fewer than 2**21 processes, int64 (and complex128)."""

    __slots__ = ()

    def write(self, buffer: Any, chain: int) -> bytes:
        digit = chain & self._mask
        self._pack_into(buffer, self.offset, digit)
        return self._pack(self.members * digit)


class _TwoDigitSumTrailer(_SumTrailer):
    """sum with the hash in two digits: float32 and complex64 over up to 255 processes, int32 over fewer than
    32768; the common case, spelled out, since it runs on every small reduction."""

    __slots__ = ()

    def write(self, buffer: Any, chain: int) -> bytes:
        low, high = chain & self._mask, chain >> self._size
        self._pack_into(buffer, self.offset, low, high)
        return self._pack(self.members * low, self.members * high)


def _digit_bits(bits: int, members: int) -> int:
    """The largest digit size such that `members` digits add up exactly within `bits` bits."""
    return min(_HASH_BITS, bits - members.bit_length())


@functools.lru_cache(maxsize=256)
def trailer(dtype: np.dtype, op: str, members: int, buffer_bytes: int) -> Trailer | None:
    """The check of reductions `op` of `dtype` over `members` processes at the end of buffers of `buffer_bytes`,
    or None if they cannot carry one."""
    key = (dtype.kind, dtype.itemsize)
    bits = _EXACT_BITS.get(key)
    if bits is None or op == "prod" or (op in ("max", "min") and dtype.kind == "c"):
        return None
    if op in ("max", "min"):
        return _ExtremeTrailer(dtype, _FORMATS[key], bits, members, buffer_bytes)
    size = _digit_bits(bits, members)
    if size < _MIN_DIGIT_BITS:
        return None
    kind = {1: _OneDigitSumTrailer, 2: _TwoDigitSumTrailer}.get(-(-_HASH_BITS // size), _SumTrailer)
    return kind(dtype, _FORMATS[key], bits, members, buffer_bytes)
