"""A device memory profile in pprof's format (github.com/google/pprof: a gzip'd `Profile` protocol buffer), as
jax.profiler.device_memory_profile returns one: per live buffer a sample of (1 allocation, its bytes), labelled
with its device and kind, at a location named after the Array it belongs to (its shape and dtype)."""
from __future__ import annotations

import gzip
from typing import Iterable


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # int64 fields: two's complement
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes | int) -> bytes:
    """One protocol buffer field: a varint, or a length-delimited `payload` (a message, a string, packed numbers)."""
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _packed(values: Iterable[int]) -> bytes:
    return b"".join(_varint(v) for v in values)


class _Strings:
    """pprof's string table: index 0 is the empty string."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        return self.index.setdefault(text, len(self.index))


def memory_profile(buffers: Iterable[tuple[str, str, str, int]]) -> bytes:
    """The gzip'd pprof Profile of `buffers`: (what it belongs to, device, kind, bytes) each."""
    strings = _Strings()
    sample_types = [_field(1, _field(1, strings("allocations")) + _field(2, strings("count"))),
                    _field(1, _field(1, strings("space")) + _field(2, strings("bytes")))]
    samples, locations, functions = [], [], []
    function_ids: dict[str, int] = {}
    for owner, device, kind, nbytes in buffers:
        fid = function_ids.get(owner)
        if fid is None:
            fid = function_ids[owner] = len(function_ids) + 1
            functions.append(_field(5, _field(1, fid) + _field(2, strings(owner)) + _field(3, strings(owner))))
            locations.append(_field(4, _field(1, fid) + _field(4, _field(1, fid))))
        labels = (_field(3, _field(1, strings("device")) + _field(2, strings(device)))
                  + _field(3, _field(1, strings("kind")) + _field(2, strings(kind))))
        samples.append(_field(2, _field(1, _packed([fid])) + _field(2, _packed([1, nbytes])) + labels))
    table = b"".join(_field(6, text.encode()) for text in strings.index)
    return gzip.compress(b"".join(sample_types + samples + locations + functions) + table)
