"""Elementwise primitives beyond the basic set: special functions (erfc, lgamma, digamma, polygamma, igamma,
igammac, zeta, betainc, Bessel i0e/i1e, from SciPy in float64 and rounded), bit counts (population_count, clz) and
reduce_precision; each with its derivative and batching rules as in JAX."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..primitives import array_primitives as P
from ..sharding import placement_rules as rules
from ..core.core import Primitive, ShapedArray, aval_of, define_primitive
from ..interpreters.ad import defjvp, defzero, deflinear
from ..interpreters.batching import batching_rules
from .ad_rules import mul, neg, sub
from .batching_rules import _elementwise
from .lax_ops import _same_dtype
from ..core.dtypes import finfo, issubdtype

__all__ = ["betainc", "bessel_i0e", "bessel_i1e", "bitcast_convert_type", "clz", "digamma", "erfc", "igamma",
           "igammac", "lgamma", "mulhi", "polygamma", "population_count", "reduce_precision", "zeta"]


def _aval(x: ShapedArray, *rest: ShapedArray, **_: Any) -> ShapedArray:
    return ShapedArray(rules.broadcast_shapes(x.shape, *[r.shape for r in rest]), x.dtype,
                       all(a.weak_type for a in (x, *rest)))


def _float64(name: str) -> Callable[..., np.ndarray]:
    """The implementation by SciPy's special function `name`, in float64 (SciPy is imported on first use: it takes
    ~0.25 s, which a program that never calls one should not pay when it first touches `lax`)."""
    def impl(*xs: np.ndarray, **_: Any) -> np.ndarray:
        import scipy.special

        function = getattr(scipy.special, name)
        return np.asarray(function(*(x.astype(np.float64) for x in xs))).astype(xs[0].dtype)

    return impl


def _primitive(name: str, impl: Callable[..., np.ndarray]) -> Primitive:
    primitive = define_primitive(f"{name}", impl, _aval, rules.elementwise)
    batching_rules[primitive] = _elementwise(primitive)
    return primitive


def _apply(name: str, primitive: Primitive, *xs: Any, floats_only: bool = True) -> Any:
    """`primitive` bound to the operands made one dtype, checking they are floating point when `floats_only`."""
    xs = _same_dtype(name, *xs)
    if floats_only and not issubdtype(aval_of(xs[0]).dtype, np.floating):
        raise TypeError(f"lax.{name} requires floating-point arguments; got {aval_of(xs[0]).dtype}.")
    return primitive.bind(*xs)


def _c(value: float, like: Any) -> np.ndarray:
    return np.asarray(value, aval_of(like).dtype)


def _exp(x: Any) -> Any:
    return P.UNARY["exp"].bind(x)


def _no_derivative(name: str, argument: str) -> Callable[..., Any]:
    def rule(*_: Any, **__: Any) -> Any:
        raise NotImplementedError(f"lax.{name} has no derivative with respect to {argument} in meshax (JAX's uses "
                                  f"a series meshax does not implement); differentiate with respect to the others.")

    return rule


erfc_p = _primitive("erfc", _float64("erfc"))
lgamma_p = _primitive("lgamma", _float64("gammaln"))
digamma_p = _primitive("digamma", _float64("psi"))
polygamma_p = _primitive("polygamma", _float64("polygamma"))
igamma_p = _primitive("igamma", _float64("gammainc"))
igammac_p = _primitive("igammac", _float64("gammaincc"))
zeta_p = _primitive("zeta", _float64("zeta"))
betainc_p = _primitive("regularized_incomplete_beta", _float64("betainc"))
bessel_i0e_p = _primitive("bessel_i0e", _float64("i0e"))
bessel_i1e_p = _primitive("bessel_i1e", _float64("i1e"))



def erfc(x: Any, *, accuracy: Any = None) -> Any:
    """The complementary error function 1 - erf(x), elementwise (as jax.lax.erfc); `accuracy` is accepted and has
    no effect on the CPU."""
    return _apply("erfc", erfc_p, x)


def lgamma(x: Any) -> Any:
    """The log of the absolute value of the gamma function, elementwise (as jax.lax.lgamma)."""
    return _apply("lgamma", lgamma_p, x)


def digamma(x: Any) -> Any:
    """The digamma function (the derivative of lgamma), elementwise (as jax.lax.digamma)."""
    return _apply("digamma", digamma_p, x)


def polygamma(m: Any, x: Any) -> Any:
    """The m-th derivative of the digamma function at x, elementwise (as jax.lax.polygamma)."""
    return _apply("polygamma", polygamma_p, m, x)


def igamma(a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma function P(a, x), elementwise (as jax.lax.igamma)."""
    return _apply("igamma", igamma_p, a, x)


def igammac(a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma function Q(a, x), elementwise (as jax.lax.igammac)."""
    return _apply("igammac", igammac_p, a, x)


def zeta(x: Any, q: Any) -> Any:
    """The Hurwitz zeta function of x and q, elementwise (as jax.lax.zeta)."""
    return _apply("zeta", zeta_p, x, q)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete beta function I_x(a, b), elementwise (as jax.lax.betainc)."""
    return _apply("betainc", betainc_p, a, b, x)


def bessel_i0e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of order 0, elementwise (as jax.lax.bessel_i0e)."""
    return _apply("bessel_i0e", bessel_i0e_p, x)


def bessel_i1e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of order 1, elementwise (as jax.lax.bessel_i1e)."""
    return _apply("bessel_i1e", bessel_i1e_p, x)


defjvp(erfc_p, lambda g, ans, x: mul(g, mul(_c(-2 / math.sqrt(math.pi), x), _exp(neg(mul(x, x))))))
defjvp(lgamma_p, lambda g, ans, x: mul(g, digamma_p.bind(x)))
defjvp(digamma_p, lambda g, ans, x: mul(g, polygamma_p.bind(_c(1, x), x)))
defjvp(polygamma_p, _no_derivative("polygamma", "m"),
       lambda g, ans, m, x: mul(g, polygamma_p.bind(P.BINARY["add"].bind(m, _c(1, m)), x)))


def _igamma_dx(g: Any, ans: Any, a: Any, x: Any) -> Any:
    """d/dx of the regularized lower incomplete gamma function: x^(a-1) e^-x / Gamma(a)."""
    log_density = sub(sub(mul(sub(a, _c(1, a)), P.UNARY["log"].bind(x)), x), lgamma_p.bind(a))
    return mul(g, _exp(log_density))


defjvp(igamma_p, _no_derivative("igamma", "a"), _igamma_dx)
defjvp(igammac_p, _no_derivative("igammac", "a"), lambda g, ans, a, x: neg(_igamma_dx(g, ans, a, x)))
defjvp(zeta_p, _no_derivative("zeta", "x"),
       lambda g, ans, x, q: mul(g, mul(neg(x), zeta_p.bind(P.BINARY["add"].bind(x, _c(1, x)), q))))


def _betainc_dx(g: Any, ans: Any, a: Any, b: Any, x: Any) -> Any:
    log = P.UNARY["log"].bind
    one = _c(1, x)
    log_beta = sub(P.BINARY["add"].bind(lgamma_p.bind(a), lgamma_p.bind(b)), lgamma_p.bind(P.BINARY["add"].bind(a, b)))
    log_density = sub(P.BINARY["add"].bind(mul(sub(a, one), log(x)), mul(sub(b, one), log(sub(one, x)))), log_beta)
    return mul(g, _exp(log_density))


defjvp(betainc_p, _no_derivative("betainc", "a"), _no_derivative("betainc", "b"), _betainc_dx)
defjvp(bessel_i0e_p, lambda g, ans, x: mul(g, sub(bessel_i1e_p.bind(x), mul(P.UNARY["sign"].bind(x), ans))))


def _i1e_dx(g: Any, ans: Any, x: Any) -> Any:
    """i0e(x) - i1e(x) (sign(x) + 1/x), whose limit at 0 is 1/2."""
    zero = P.BINARY["eq"].bind(x, _c(0, x))
    safe = P.select.bind(zero, P.BINARY["add"].bind(x, _c(1, x)), x)
    slope = sub(bessel_i0e_p.bind(x), mul(ans, P.BINARY["add"].bind(P.UNARY["sign"].bind(x),
                                                                     P.UNARY["reciprocal"].bind(safe))))
    return mul(g, P.select.bind(zero, P.BINARY["add"].bind(mul(x, _c(0, x)), _c(0.5, x)), slope))


defjvp(bessel_i1e_p, _i1e_dx)

# ---- bits ----------------------------------------------------------------------------------------------------


def _clz_impl(x: np.ndarray) -> np.ndarray:
    bits = x.dtype.itemsize * 8
    unsigned = x.view(np.dtype(f"uint{bits}"))
    length = np.zeros(x.shape, np.int64)
    value = unsigned.copy()
    shift = bits // 2
    while shift:
        high = value >> np.asarray(shift, value.dtype)
        moved = high != 0
        length = np.where(moved, length + shift, length)
        value = np.where(moved, high, value)
        shift //= 2
    length = length + (value != 0)
    return (bits - length).astype(x.dtype)


population_count_p = _primitive("population_count",
                                lambda x: np.bitwise_count(x.view(f"uint{x.dtype.itemsize * 8}")).astype(x.dtype))
clz_p = _primitive("clz", _clz_impl)


def population_count(x: Any) -> Any:
    """The number of set bits of each entry of an integer array (as jax.lax.population_count)."""
    return _apply("population_count", population_count_p, x, floats_only=False)


def clz(x: Any) -> Any:
    """The number of leading zero bits of each entry of an integer array (as jax.lax.clz)."""
    return _apply("clz", clz_p, x, floats_only=False)


defzero(population_count_p)
defzero(clz_p)


def _mulhi_impl(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The high half of the double-width product (64-bit operands from 32-bit halves)."""
    bits = x.dtype.itemsize * 8
    signed = issubdtype(x.dtype, np.signedinteger)
    if bits <= 32:
        wide = np.int64 if signed else np.uint64
        return ((x.astype(wide) * y.astype(wide)) >> np.asarray(bits, wide)).astype(x.dtype)
    u = np.dtype(np.uint64)
    a, b = x.view(u), y.view(u)
    mask, shift = u.type(0xFFFFFFFF), u.type(32)
    a_lo, a_hi, b_lo, b_hi = a & mask, a >> shift, b & mask, b >> shift
    cross = (a_lo * b_lo >> shift) + (a_hi * b_lo & mask) + (a_lo * b_hi & mask)
    high = a_hi * b_hi + (a_hi * b_lo >> shift) + (a_lo * b_hi >> shift) + (cross >> shift)
    if signed:  # two's complement: subtract the other operand wherever one is negative
        high = high - np.where(x < 0, b, u.type(0)) - np.where(y < 0, a, u.type(0))
    return high.view(x.dtype)


mulhi_p = _primitive("mulhi", _mulhi_impl)
defzero(mulhi_p)


def mulhi(x: Any, y: Any) -> Any:
    """The high half of the double-width product of two integer arrays of one dtype."""
    x, y = _same_dtype("mulhi", x, y)
    if not issubdtype(aval_of(x).dtype, np.integer):
        raise TypeError(f"lax.mulhi requires integer arguments; got {aval_of(x).dtype}.")
    return mulhi_p.bind(x, y)


def _bitcast_aval(x: ShapedArray, *, new_dtype: np.dtype) -> ShapedArray:
    old, new = x.dtype.itemsize, np.dtype(new_dtype).itemsize
    if old == new:
        shape = x.shape
    elif old > new:
        shape = x.shape + (old // new,)
    elif x.shape and x.shape[-1] == new // old:
        shape = x.shape[:-1]
    else:
        raise TypeError(f"bitcast_convert_type from {x.dtype} to {np.dtype(new_dtype)} needs a last dimension of size "
                        f"{new // old}; got shape {x.shape}.")
    return ShapedArray(shape, np.dtype(new_dtype))


def _bitcast_impl(x: np.ndarray, *, new_dtype: np.dtype) -> np.ndarray:
    shape = _bitcast_aval(ShapedArray(x.shape, x.dtype), new_dtype=new_dtype).shape
    return np.ascontiguousarray(x).view(new_dtype).reshape(shape)


bitcast_convert_type_p = define_primitive(
    "bitcast_convert_type", _bitcast_impl, _bitcast_aval,
    lambda specs, avals, **p: rules.replicate_all(specs, avals, p["out_ndims"]))
batching_rules[bitcast_convert_type_p] = _elementwise(bitcast_convert_type_p)
defzero(bitcast_convert_type_p)


def bitcast_convert_type(operand: Any, new_dtype: Any) -> Any:
    """`operand`'s bits read as `new_dtype` (a narrower type adds a last dimension, a wider one consumes it)."""
    return bitcast_convert_type_p.bind(_same_dtype("bitcast_convert_type", operand)[0], new_dtype=np.dtype(new_dtype))

# ---- reduce_precision -----------------------------------------------------------------------------------------


def _reduce_precision_impl(x: np.ndarray, *, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """x rounded (to nearest even) to `mantissa_bits` of mantissa, overflowing to infinity and underflowing to zero
    past `exponent_bits` of exponent; NaNs stay NaN."""
    info = finfo(x.dtype)
    source_mantissa, source_exponent = info.nmant, info.nexp
    uint = np.dtype(f"uint{x.dtype.itemsize * 8}")
    bits = x.view(uint).copy()
    one = uint.type(1)
    if mantissa_bits < source_mantissa:
        shift = uint.type(source_mantissa - mantissa_bits)
        last = one << shift
        bias = (bits & last) >> shift
        bits = (bits + bias + ((last >> one) - one)) & ~(last - one)
    if exponent_bits < source_exponent:
        exponent_mask = uint.type(((1 << source_exponent) - 1) << source_mantissa)
        sign_mask = uint.type(1 << (source_exponent + source_mantissa))
        bias = (1 << (source_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exponent_mask
        overflow = exponent > uint.type((bias + reduced_bias) << source_mantissa)
        underflow = exponent <= uint.type((bias - reduced_bias) << source_mantissa)
        bits = np.where(overflow, (bits & sign_mask) | exponent_mask, np.where(underflow, bits & sign_mask, bits))
    out = bits.astype(uint).view(x.dtype)
    return np.where(np.isnan(x), x, out) if mantissa_bits > 0 else out


reduce_precision_p = define_primitive("reduce_precision", _reduce_precision_impl,
                                      lambda x, **_: x, rules.elementwise)
batching_rules[reduce_precision_p] = _elementwise(reduce_precision_p)
deflinear(reduce_precision_p, lambda ct, x, **params: [reduce_precision_p.bind(ct, **params)])


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """`operand` rounded to a floating-point format with the given exponent and mantissa widths."""
    x = _same_dtype("reduce_precision", operand)[0]
    if not issubdtype(aval_of(x).dtype, np.floating):
        raise TypeError(f"lax.reduce_precision requires a floating-point operand; got {aval_of(x).dtype}.")
    return reduce_precision_p.bind(x, exponent_bits=int(exponent_bits), mantissa_bits=int(mantissa_bits))
