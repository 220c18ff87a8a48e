"""The elementwise primitives meshax.random is built on: threefry2x32 (4 uint32 operands -> 2 uint32 results), fma
(a * b + c rounded once, as XLA's CPU backend contracts uniform's scaling) and erf_inv (Giles' single-precision
polynomial, as XLA evaluates it)."""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np

from ..core.core import ShapedArray, define_primitive
from ..runtime import compute_pool as device_pool
from ..sharding import placement_rules as rules

_U32 = np.dtype(np.uint32)
_MASK = 0xFFFFFFFF


def _elementwise_rule(n_out: int):
    def rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], **params: Any) -> rules.Layout:
        layout = rules.elementwise(specs, avals, **params)
        return rules.Layout(layout.in_specs, [layout.out_specs[0]] * n_out)

    return rule


def _in_blocks(impl: Any) -> Any:
    """`impl`, an elementwise kernel of NumPy passes, run on blocks of rows of its broadcast operands (the same
    values) spread over this call's threads: each block's temporaries stay in cache, where whole-array ones of
    a large array cost fresh pages on every pass (random.normal of 8192 x 8192 on a 2-core host: 16.8 -> 4.8 s)."""

    def blocked(*operands: Any) -> Any:
        arrays = np.broadcast_arrays(*(np.asarray(a) for a in operands))
        shape = arrays[0].shape
        row = math.prod(shape[1:])
        if math.prod(shape) <= BLOCK_ELEMENTS or shape[0] < 2 or row == 0:
            return impl(*operands)
        rows = max(1, BLOCK_ELEMENTS // row)
        first = impl(*(a[:rows] for a in arrays))  # its types are the results' types
        results = [np.empty(shape, v.dtype) for v in (first if isinstance(first, list) else [first])]

        def block(start: int, values: Any = None) -> None:
            values = impl(*(a[start:start + rows] for a in arrays)) if values is None else values
            for out, value in zip(results, values if isinstance(values, list) else [values]):
                out[start:start + rows] = value

        block(0, first)
        device_pool.spread([functools.partial(block, start) for start in range(rows, shape[0], rows)],
                           device_pool.call_threads())
        return results if isinstance(first, list) else results[0]

    return blocked


BLOCK_ELEMENTS = 1 << 16  # elements of a block: its float64 temporaries (512 KiB each) stay in cache


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


threefry2x32_p = define_primitive("threefry2x32", _in_blocks(_threefry_impl), _threefry_aval, _elementwise_rule(2),
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
        s = np.asarray(p + c64)
        # Only a float64 sum that lies exactly halfway between two float32 values (or in float32's subnormal range,
        # where the halfway bit sits higher) can round differently from the exact sum: those few are redone.
        bits = s.view(np.int64)
        suspect = np.flatnonzero(((bits & _BELOW_F32) == _F32_HALFWAY) | ((bits & _EXPONENT) < _F32_NORMAL))
        if suspect.size:
            where = np.unravel_index(suspect, s.shape)
            ps, cs, ss = np.broadcast_to(p, s.shape)[where], np.broadcast_to(c64, s.shape)[where], s[where]
            bc = ss - ps
            err = (ps - (ss - bc)) + (cs - bc)
            inexact = (err != 0) & ((ss.view(np.int64) & 1) == 0) & np.isfinite(ss)
            s[where] = np.where(inexact, np.nextafter(ss, np.where(err > 0, np.inf, -np.inf)), ss)  # round to odd
        return np.asarray(s.astype(np.float32))


_BELOW_F32 = (1 << 29) - 1  # the float64 mantissa bits below a (normal) float32's last bit
_F32_HALFWAY = 1 << 28
_EXPONENT = 0x7FF << 52
_F32_NORMAL = (1023 - 125) << 52  # float64 exponent bits of 2**-125: below it, float32 subnormals are near


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


fma_p = define_primitive("fma", _in_blocks(_fma_impl), lambda a, b, c, **_: ShapedArray(
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


erf_inv_p = define_primitive("erf_inv", _in_blocks(_erf_inv_impl), lambda x, **_: ShapedArray(x.shape, x.dtype, x.weak_type),
                      rules.elementwise)
