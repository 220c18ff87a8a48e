"""meshax.numpy's bit packing: packbits (each 8 truth values along an axis into one uint8) and unpackbits (each
uint8 into its 8 bits)."""
from __future__ import annotations

import numpy as np

from ..core.core import aval_of
from ..core.dtypes import issubdtype
from .promotion import ArrayLike, _axes
from .ufuncs import astype, bitwise_and, multiply, not_equal, right_shift
from .shape_ops import expand_dims, moveaxis, pad, ravel, reshape
from .creation import asarray
from .reductions import sum

__all__ = ["packbits", "unpackbits"]


def _bit_order(bitorder: str) -> np.ndarray:
    """The place value of each of a byte's 8 bits, first bit first."""
    if bitorder not in ("little", "big"):
        raise ValueError("'order' must be either 'little' or 'big'")
    weights = np.array([1, 2, 4, 8, 16, 32, 64, 128], np.uint8)
    return weights if bitorder == "little" else weights[::-1].copy()


def _last(a: ArrayLike, axis: int | None) -> tuple[object, int | None]:
    """`a` (flattened when `axis` is None) with `axis` moved last, and where to move it back to."""
    a = asarray(a)
    if axis is None:
        return ravel(a), None
    (axis,) = _axes(axis, a.ndim)
    return moveaxis(a, axis, -1), axis


def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> object:
    """Whether each element is nonzero, packed 8 to a uint8 along `axis` (the array flattened if None; the last
    byte padded with zeros)."""
    a = asarray(a)
    kind = aval_of(a).dtype
    if not (issubdtype(kind, np.integer) or kind == np.bool_):
        raise TypeError("Expected an input array of integer or boolean data type")
    weights = _bit_order(bitorder)
    bits, axis = _last(astype(not_equal(a, 0), np.uint8), axis)
    extra = -bits.shape[-1] % 8
    bits = pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, extra)])
    bits = reshape(bits, bits.shape[:-1] + (bits.shape[-1] // 8, 8))
    packed = sum(multiply(bits, asarray(weights)), axis=-1, dtype=np.uint8)
    return packed if axis is None else moveaxis(packed, -1, axis)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> object:
    """The 8 bits of each uint8 along `axis` (the array flattened if None), as uint8 0s and 1s; `count` keeps that
    many bits (negative: drops that many from the end; past the end: pads with zeros)."""
    a = asarray(a)
    if aval_of(a).dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    shifts = np.log2(_bit_order(bitorder)).astype(np.uint8)
    data, axis = _last(a, axis)
    bits = bitwise_and(right_shift(expand_dims(data, -1), asarray(shifts)), np.uint8(1))
    bits = reshape(bits, data.shape[:-1] + (data.shape[-1] * 8,))
    if count is not None:
        total = bits.shape[-1]
        keep = count if count >= 0 else max(total + count, 0)
        bits = bits[..., :keep] if keep <= total else pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return bits if axis is None else moveaxis(bits, -1, axis)
