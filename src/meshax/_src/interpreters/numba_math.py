"""float32 exp, tanh and logistic that vectorize inside a numba loop.

numba computes `np.exp` and `np.tanh` of a float32 by calling libm once per element (~10-20 ns each); a GRU's scan
compiled whole spent 40 of its 74 ms there, where NumPy's SIMD loops take a few. These are written with
arithmetic, `floor`, selects and one integer-to-float bit cast only, which LLVM vectorizes like any other loop
body (as XLA's CPU backend writes its own): exp by Cody and Waite's reduction to [-ln2/2, ln2/2] and a degree-6
polynomial, its power of two made from the exponent's bits; tanh by an odd polynomial below 0.625 and
1 - 2 / (exp(2|x|) + 1) above; logistic as 1 / (1 + exp(-x)). Each is within 2 ulp of float32's correctly
rounded value (tests/test_numba_math.py measures it against NumPy's), NaN in gives NaN, and results below
float32's normal range flush to zero, as XLA's do (meshax flushes subnormals).

Only compiled code imports this module (the kernels numba_lowering writes name it); it imports numba.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

_F = np.float32


@intrinsic
def _float_from_bits(typingctx, bits):  # noqa: ARG001 - numba's intrinsic signature
    """The float32 whose bits are the int32 `bits`."""
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):  # noqa: ARG001
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@numba.njit(inline="always", error_model="numpy")
def _power_of_two(n):
    """Two normal float32 whose product is 2.0 ** n, for an integral float32 `n` in [-252, 254]."""
    whole = np.int32(n)
    half = np.int32(whole >> 1)
    return _float_from_bits(np.int32((half + 127) << 23)), _float_from_bits(np.int32((whole - half + 127) << 23))


@numba.njit(inline="always", error_model="numpy")
def exp32(x):
    """exp of the float32 `x`."""
    clamped = _F(-104.0) if x < _F(-104.0) else (_F(89.0) if x > _F(89.0) else x)
    n = np.floor(clamped * _F(1.44269504088896341) + _F(0.5))
    r = clamped - n * _F(0.693359375) - n * _F(-2.12194440e-4)
    p = _F(1.9875691500e-4)
    p = p * r + _F(1.3981999507e-3)
    p = p * r + _F(8.3334519073e-3)
    p = p * r + _F(4.1665795894e-2)
    p = p * r + _F(1.6666665459e-1)
    p = p * r + _F(5.0000001201e-1)
    low, high = _power_of_two(n)
    y = (p * r * r + r + _F(1.0)) * low * high  # in this order: 2 ** 128 alone would overflow
    y = _F(0.0) if y < _F(1.17549435e-38) else y  # below the normal range: flushed, as the caller's mode does
    return x if x != x else y


@numba.njit(inline="always", error_model="numpy")
def tanh32(x):
    """tanh of the float32 `x`."""
    a = abs(x)
    z = x * x
    p = _F(-5.70498872745e-3)
    p = p * z + _F(2.06390887954e-2)
    p = p * z - _F(5.37397155531e-2)
    p = p * z + _F(1.33314422036e-1)
    p = p * z - _F(3.33332819422e-1)
    small = p * z * a + a
    large = _F(1.0) - _F(2.0) / (exp32(a + a) + _F(1.0))
    return np.copysign(small if a < _F(0.625) else large, x)  # tanh(-0.0) is -0.0


@numba.njit(inline="always", error_model="numpy")
def logistic32(x):
    """logistic (1 / (1 + exp(-x))) of the float32 `x`."""
    return _F(1.0) / (_F(1.0) + exp32(-x))
