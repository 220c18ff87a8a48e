"""Transcendentals and logaddexp of float32 (and float16, bfloat16) arrays, computed in float32 by NumPy's kernels.

Every element's value depends on that element alone, whatever the array's size, layout or split into blocks
and devices: one method per function and dtype, never chosen by size.

Measured over ~3.5 million float32 inputs per function (every binade, random bit patterns, infinities, NaNs,
and dense runs of neighbours around the points where methods change or results cancel: multiples of pi/2, 1,
-1, 0, the overflow and underflow edges), largest error in ulps against float64 rounded to float32 (normal
results; XLA flushes subnormals to zero, as meshax does while it computes), NumPy 2.5 with AVX-512 (AVX2 in brackets where
larger), and JAX 0.12's on CPU:

    sin 1 (JAX 1)    cos 1 (1)      tan 4 (1)       asin 3 (2)      acos 2 (2)      atan 2 (5)
    sinh 2 (24)      cosh 2 (24)    tanh 1 (4)      asinh 1 [2] (2) acosh 1 [2] (3) atanh 1 [2] (2)
    exp 2 (1)        exp2 3 (68)    expm1 3 (1)     log 3 (1)       log1p 2 (2)     log2 2 (2)
    log10 3 (3)      cbrt 2 (1)     logistic 3 (2)  erf 3 (7)       logaddexp 2 (2, away from cancellation)

A float32 ulp is at most 1.2e-7 of the value, so 3 ulps is 3.6e-7: well inside the 2e-6 relative tolerance
that meshax's results are held to against JAX's. The trigonometric functions are computed in float64 and
rounded (0 ulps but for rare double roundings): tan is 4 ulps off near large multiples of pi/2 in float32
where XLA's is within 1, and XLA's sin and cos are the float64 values rounded for 98.7% of inputs against
84.5% for NumPy's float32 kernels (over 1M uniform in [-100, 100]): the seeds' toy program prints
sum(sin(0..31)) as JAX does only so. They cost more (sin 61 vs 1.2 ms of CPU over 2M elements), and are
rarely on a training step's path. The others run 10 to 50 times faster than through float64 (CPU time over
(16, 128, 1024): tanh 0.8 vs 17 ms; exp 1.0 vs 10.6 ms).

Float16 and bfloat16 are computed in float32 and rounded, as XLA computes them. Float64 and complex arrays use
NumPy's kernels of their own type.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

_HALF = frozenset({"float16", "bfloat16"})
_IN_FLOAT64 = frozenset({"sin", "cos", "tan"})  # rounded from float64, as XLA's values are (module docstring)

# erf(x) / x - 1 as a polynomial in x * x for |x| < 0.875 (a Chebyshev least-squares fit of degree 6 in float64,
# rounded to float32; evaluated in float32 as x + x * p, at most 1 ulp from erf)
_ERF_SMALL = tuple(np.float32(c) for c in (0.12837917, -0.37612635, 0.11283723, -0.026861247, 0.0052062045,
                                           -0.00082074484, 8.668693e-05))
# erfc(x) * exp(x * x) as a polynomial in 1 / x for 0.875 <= x <= 3.92 (degree 8, fitted alike; erf = 1 -
# exp(-x * x) * p is at most 3 ulps from erf there, over every 7th float32, and 1 beyond, where it rounds to 1)
_ERF_LARGE = tuple(np.float32(c) for c in (0.00033726852, 0.5579584, 0.04943486, -0.4997401, 0.5612466,
                                           -0.33317828, 0.10239904, -0.009109167, -0.001765071))
_ERF_SPLIT = np.float32(0.875)
_ERF_SCALE = np.float32(2.0 ** 32)  # a power of two: scaling by it is exact below the split


def _polynomial(coefficients: tuple[np.floating, ...], v: np.ndarray) -> np.ndarray:
    """sum(c[k] * v ** k) by Horner's rule, in v's dtype, in place on one buffer."""
    acc = v * coefficients[-1]
    for c in coefficients[-2:0:-1]:
        acc += c
        acc *= v
    acc += coefficients[0]
    return acc


def _erf32(x: np.ndarray) -> np.ndarray:
    """erf of a float32 array, in float32 (3 ulps at most; 10 ms of CPU over 2M elements of N(0, 1/2), where
    SciPy's float32 erf takes 24 ms and math.erf element by element 290). The elements at or beyond the split
    are gathered by position (np.flatnonzero, take, put: 2.6 ms where boolean indexing takes 13)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        out = _polynomial(_ERF_SMALL, flat * flat)
        scaled = flat * _ERF_SCALE  # x * p + x at 2**32 x: the same bits, and no x * p lost to subnormal flushing
        out *= scaled
        out += scaled
        out *= np.float32(1 / _ERF_SCALE)
        large = np.flatnonzero(np.abs(flat) >= _ERF_SPLIT)
        if large.size:
            a = flat.take(large)
            b = np.abs(a)
            tail = _polynomial(_ERF_LARGE, np.reciprocal(b))
            b *= b
            np.negative(b, out=b)
            tail *= np.exp(b, out=b)
            np.subtract(np.float32(1), tail, out=tail)
            out.put(large, np.copysign(tail, a, out=tail))
    return out.reshape(x.shape)


def _erf64(x: np.ndarray) -> np.ndarray:
    """erf of a float64 array by SciPy (imported on first use, as lax/special.py's functions)."""
    import scipy.special

    return scipy.special.erf(x)


def _logistic(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """1 / (1 + exp(-x)), in x's dtype, written into `out` where given (below -88.7 float32's exp overflows and
    the result is 0, as XLA's, which flushes results below 1.2e-38 to 0; at most 3 ulps from the correctly
    rounded value above that)."""
    e = np.negative(x, out=np.empty_like(x) if out is None else out)  # an array even where x is 0-d
    np.exp(e, out=e)  # overflows to inf without a warning: meshax computes with NumPy's errors ignored
    e += 1
    return np.reciprocal(e, out=e)


def _logaddexp32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log(exp(x) + exp(y)) of float32 arrays as max(x, y) + log1p(exp(-|x - y|)), by NumPy's float32 SIMD
    kernels (6 ms of CPU over 2M elements, where np.logaddexp's float32 loop, one libm call at a time, takes 40;
    at most 2 ulps from the correctly rounded value, as np.logaddexp's); x + y where x - y is NaN (equal
    infinities, NaNs)."""
    top = np.maximum(x, y)
    gap = np.asarray(np.subtract(x, y))  # an array even where x and y are 0-d; inf - inf is NaN, as np.logaddexp
    undefined = np.isnan(gap)
    np.abs(gap, out=gap)
    np.negative(gap, out=gap)
    np.exp(gap, out=gap)
    np.log1p(gap, out=gap)
    gap += top
    if undefined.any():
        np.copyto(gap, np.add(x, y), where=undefined)
    return gap


def logaddexp(x: np.ndarray, y: np.ndarray, **_: Any) -> np.ndarray:
    """The implementation of the primitive logaddexp (operands of one dtype)."""
    if x.dtype == np.float32:
        return _logaddexp32(x, y)
    if x.dtype.name in _HALF:
        return _logaddexp32(x.astype(np.float32), y.astype(np.float32)).astype(x.dtype)
    return np.logaddexp(x, y)


# functions whose float32 kernel is not NumPy's function of that name
_FLOAT32 = {"erf": _erf32}
_OTHER = {"erf": _erf64, "logistic": _logistic}


def transcendental(name: str, function: Callable[[np.ndarray], np.ndarray] | None = None
                   ) -> Callable[..., np.ndarray]:
    """The implementation of the unary transcendental `name` (`function`: NumPy's function of that name, for
    the dtypes without a kernel here)."""
    other = _OTHER.get(name, function)
    if name in _IN_FLOAT64:
        single = _through_float64(other)
    else:
        single = _FLOAT32.get(name, other)

    # the float32 kernel writing into a given buffer, where it can (else the value is copied there)
    single_into = _logistic if single is _logistic else (single if isinstance(single, np.ufunc) else None)

    def impl(x: np.ndarray, out: np.ndarray | None = None, **_: Any) -> np.ndarray:
        if x.dtype == np.float32:
            if out is not None and single_into is not None:
                return single_into(x, out=out)
            value = single(x)
        elif x.dtype.name in _HALF:
            value = single(x.astype(np.float32)).astype(x.dtype)
        else:
            value = other(x)
        if out is None:
            return value
        out[...] = value
        return out

    impl.precise = True  # each element's value depends on that element alone: blocks may be joined
    impl.writes_out = True  # impl(x, out=buffer) leaves the value in `buffer` (of its shape and type)
    return impl


def _through_float64(function: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    def single(x: np.ndarray) -> np.ndarray:
        return function(x.astype(np.float64)).astype(np.float32)

    return single

