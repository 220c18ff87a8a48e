"""The byte format of a serialized Exported, and the codec of the values inside it.

A blob is: the magic bytes, the format version (4 bytes), the length of the header (8 bytes), a SHA-256 digest of
everything after it (32 bytes), the header (JSON, UTF-8), then the raw bytes of the arrays the header refers to.
Every value in the header is plain JSON or a one-key object naming its kind ({"tuple": [...]}, {"dtype": "int8"},
...); decoding accepts only the kinds listed here, so a blob can rebuild no object other than these.
"""
from __future__ import annotations

import enum
import hashlib
import json
import struct
import sys
from typing import Any, Callable

import numpy as np

MAGIC = b"MESHAX-EXPORT\x00"
FORMAT_VERSION = 1
_FIXED = struct.Struct("<IQ32s")


class BlobError(ValueError):
    """A blob that is not a serialized meshax Exported, is damaged, or needs devices this job lacks."""


def pack(header: dict[str, Any], buffers: list[bytes]) -> bytearray:
    """The blob holding `header` (JSON-encodable) and `buffers` (referenced from it by index)."""
    offsets, position = [], 0
    for buffer in buffers:
        offsets.append([position, len(buffer)])
        position += len(buffer)
    text = json.dumps({"buffers": offsets, "body": header}, separators=(",", ":"), allow_nan=False).encode()
    payload = text + b"".join(buffers)
    return bytearray(MAGIC + _FIXED.pack(FORMAT_VERSION, len(text), hashlib.sha256(payload).digest()) + payload)


def unpack(blob: Any) -> tuple[dict[str, Any], list[memoryview]]:
    """The header and the buffers of a blob made by `pack`; BlobError if it is foreign, truncated or damaged."""
    try:
        data = memoryview(bytes(blob))
    except TypeError:
        raise BlobError(f"deserialize needs the bytearray that Exported.serialize() returned; got "
                        f"{type(blob).__name__}.") from None
    if bytes(data[:len(MAGIC)]) != MAGIC:
        raise BlobError("deserialize: the blob is not a serialized meshax Exported (its first bytes are not "
                        f"{MAGIC!r}); pass the bytearray that meshax.export's Exported.serialize() returned.")
    start = len(MAGIC) + _FIXED.size
    if len(data) < start:
        raise BlobError(f"deserialize: the blob is truncated ({len(data)} bytes, shorter than its fixed header); "
                        "pass the whole bytearray that Exported.serialize() returned.")
    version, header_length, digest = _FIXED.unpack(data[len(MAGIC):start])
    if version != FORMAT_VERSION:
        raise BlobError(f"deserialize: the blob has format version {version}, and this meshax reads version "
                        f"{FORMAT_VERSION}; serialize it again with this meshax version.")
    payload = data[start:]
    if hashlib.sha256(payload).digest() != digest:
        raise BlobError("deserialize: the blob is corrupt (its checksum does not match its contents); serialize "
                        "the function again, and copy the bytes unchanged.")
    try:
        document = json.loads(bytes(payload[:header_length]))
        buffers = [payload[header_length + offset:header_length + offset + size]
                   for offset, size in document["buffers"]]
        return document["body"], buffers
    except (ValueError, KeyError, TypeError) as error:
        raise BlobError(f"deserialize: the blob's header is malformed ({error}); serialize the function again.") \
            from None


class Codec:
    """Encodes and decodes values of the known kinds; arrays go to `buffers`. `extra` maps a kind name to the
    (type, encode, decode) of kinds that other modules add (jaxprs, shardings)."""

    def __init__(self, buffers: list[Any] | None = None,
                 extra: dict[str, tuple[type, Callable, Callable]] | None = None) -> None:
        self.buffers = [] if buffers is None else buffers
        self.extra = extra or {}

    # ---- encoding ----
    def encode(self, value: Any, where: str = "value") -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int) and not isinstance(value, enum.Enum):
            return value
        if isinstance(value, float):
            return {"float": value.hex()}
        if isinstance(value, complex):
            return {"complex": [value.real.hex(), value.imag.hex()]}
        for kind, (cls, encode, _) in self.extra.items():
            if isinstance(value, cls):
                return {kind: encode(self, value)}
        if isinstance(value, enum.Enum):
            return {"enum": [_enum_name(type(value)), value.name]}
        if isinstance(value, tuple) and type(value) is tuple:
            return {"tuple": [self.encode(v, where) for v in value]}
        if isinstance(value, list):
            return {"list": [self.encode(v, where) for v in value]}
        if isinstance(value, (frozenset, set)):
            return {"frozenset": [self.encode(v, where) for v in sorted(value, key=repr)]}
        if isinstance(value, dict):
            return {"dict": [[self.encode(k, where), self.encode(v, where)] for k, v in value.items()]}
        if isinstance(value, slice):
            return {"slice": [self.encode(value.start), self.encode(value.stop), self.encode(value.step)]}
        if isinstance(value, np.dtype):
            return {"dtype": dtype_name(value)}
        if isinstance(value, type) and issubclass(value, np.generic):
            return {"scalar_type": dtype_name(np.dtype(value))}
        if isinstance(value, (np.ndarray, np.generic)):
            return {"array" if isinstance(value, np.ndarray) else "scalar": self._array(np.asarray(value), where)}
        raise TypeError(f"export can't serialize {where} = {value!r} of type {type(value).__name__}: meshax.export "
                        "serializes arrays, numbers, strings, dtypes, tuples, lists, dicts, slices, enums, "
                        "shardings and jaxprs; host callbacks and other Python objects can't be exported.")

    def _array(self, array: np.ndarray, where: str) -> list[Any]:
        if array.dtype == object:
            raise TypeError(f"export can't serialize {where}, an array of Python objects; use a numeric dtype.")
        self.buffers.append(np.ascontiguousarray(array).tobytes())
        return [dtype_name(array.dtype), list(array.shape), len(self.buffers) - 1]

    # ---- decoding ----
    def decode(self, data: Any) -> Any:
        if data is None or isinstance(data, (bool, str, int)):
            return data
        if not (isinstance(data, dict) and len(data) == 1):
            raise BlobError(f"deserialize: unknown value {str(data)[:80]} in the blob; it is corrupt or was not "
                            "written by meshax.export.")
        (kind, body), = data.items()
        decoder = _DECODERS.get(kind)
        if decoder is not None:
            return decoder(self, body)
        if kind in self.extra:
            return self.extra[kind][2](self, body)
        raise BlobError(f"deserialize: unknown value kind {kind!r} in the blob; it was written by another version "
                        "of meshax.export or is corrupt.")

    def array(self, body: list[Any]) -> np.ndarray:
        name, shape, index = body
        dtype = dtype_from_name(name)
        buffer = self.buffers[index]
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if len(buffer) != expected:
            raise BlobError(f"deserialize: an array of shape {tuple(shape)} and dtype {name} has {len(buffer)} "
                            f"bytes instead of {expected}; the blob is corrupt.")
        return np.frombuffer(buffer, dtype=dtype).reshape(shape).copy()


def _decode_float(codec: Codec, body: str) -> float:
    return float.fromhex(body)


_DECODERS: dict[str, Callable[[Codec, Any], Any]] = {
    "float": _decode_float,
    "complex": lambda c, b: complex(float.fromhex(b[0]), float.fromhex(b[1])),
    "tuple": lambda c, b: tuple(c.decode(v) for v in b),
    "list": lambda c, b: [c.decode(v) for v in b],
    "frozenset": lambda c, b: frozenset(c.decode(v) for v in b),
    "dict": lambda c, b: {c.decode(k): c.decode(v) for k, v in b},
    "slice": lambda c, b: slice(*(c.decode(v) for v in b)),
    "dtype": lambda c, b: dtype_from_name(b),
    "scalar_type": lambda c, b: dtype_from_name(b).type,
    "array": lambda c, b: c.array(b),
    "scalar": lambda c, b: c.array(b)[()],
    "enum": lambda c, b: _enum_member(*b),
}


def dtype_name(dtype: np.dtype) -> str:
    """The name a dtype is serialized by (NumPy's, or ml_dtypes' for bfloat16 and the float8 types)."""
    return np.dtype(dtype).name


def dtype_from_name(name: str) -> np.dtype:
    """The dtype serialized as `name`; BlobError for a name that is not a known dtype."""
    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16 and the float8 types with NumPy)

        if hasattr(ml_dtypes, name):
            return np.dtype(getattr(ml_dtypes, name))
        dtype = np.dtype(name)
    except (TypeError, ImportError):
        raise BlobError(f"deserialize: unknown dtype {name!r} in the blob; it is corrupt.") from None
    if dtype.kind not in "biufc":
        raise BlobError(f"deserialize: dtype {name!r} in the blob is not an array dtype; it is corrupt.")
    return dtype


# The enums that parameters of primitives may hold, found by name when decoding (registered by their modules).
ENUMS: dict[str, type] = {}


def register_enum(cls: type) -> None:
    ENUMS[_enum_name(cls)] = cls


def _enum_name(cls: type) -> str:
    name = f"{cls.__module__}.{cls.__qualname__}"
    if name not in ENUMS:
        ENUMS[name] = cls  # an enum seen while encoding is known to this process from then on
    return name


def _enum_member(cls_name: str, member: str) -> Any:
    cls = ENUMS.get(cls_name) or _meshax_enum(cls_name)
    if cls is None or member not in cls.__members__:
        raise BlobError(f"deserialize: unknown enum value {cls_name}.{member} in the blob; it was written by "
                        "another version of meshax or is corrupt.")
    return cls[member]


def _meshax_enum(cls_name: str) -> type | None:
    """The enum class of meshax called `cls_name` (module.qualname) in a meshax module already loaded; None for any
    other name or object (a blob imports nothing)."""
    module_name, _, qualname = cls_name.rpartition(".")
    module = sys.modules.get(module_name) if module_name.startswith("meshax.") else None
    cls = getattr(module, qualname, None) if module is not None and "." not in qualname else None
    return cls if isinstance(cls, type) and issubclass(cls, enum.Enum) else None
