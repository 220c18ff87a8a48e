"""meshax.numpy's elementwise functions: NumPy's ufuncs (each promotes its operands, then binds one primitive),
casts, clip and selection, and the elementwise functions composed from them."""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from ..core import dtypes
from ..primitives import array_primitives as P
from ..arrays.key_arrays import KeyArray
from ..arrays.placement import device_put
from ..core.core import Tracer, aval_of
from .promotion import ArrayLike, _as_array, _cast, _dtype, _lift, _promote, _promote_inexact, _weak
from ..core.dtypes import issubdtype


def _refuse_out_where(name: str, out: Any, where: Any) -> None:
    """jnp's ufuncs take out= and where= for NumPy's sake, but support neither (as JAX's)."""
    if out is not None:
        raise NotImplementedError(f"out argument of {name}: JAX arrays are immutable; use the returned array.")
    if where is not None:
        raise NotImplementedError(f"where argument of {name}: use where(mask, {name}(...), other) instead.")


# the primitives JAX refuses booleans for (NumPy's boolean `-` is an error too), checked before tracing
_NUMERIC_ONLY = frozenset({"sub", "neg"})


def _refuse_bool(name: str) -> None:
    raise TypeError(f"{name} does not accept dtype bool; use logical_xor or logical_not for booleans, or cast them "
                    "to a number type first.")


def _unary(name: str, inexact: bool = False, strong: bool = False):
    """The elementwise function `name`; `strong` results are never weakly typed (JAX's log10, isinf and
    signbit of a Python scalar are strong; its log2 is a primitive of its own since 0.12, and keeps weak types)."""
    primitive = P.UNARY[name]

    def function(x: ArrayLike, /) -> Any:
        (x,) = _promote_inexact(x) if inexact else _promote(x)
        if name in _NUMERIC_ONLY and x.dtype == np.bool_:
            _refuse_bool(name)
        result = primitive.bind(x)
        return _cast(result, result.dtype, False) if strong else result

    function.__name__ = name
    return function


def _binary(name: str, inexact: bool = False):
    primitive = P.BINARY[name]

    def function(x: ArrayLike, y: ArrayLike, /) -> Any:
        x, y = _promote_inexact(x, y) if inexact else _promote(x, y)
        if name in _NUMERIC_ONLY and x.dtype == np.bool_:
            _refuse_bool(name)
        return primitive.bind(x, y)

    function.__name__ = name
    return function


sin, cos, tan = _unary("sin", True), _unary("cos", True), _unary("tan", True)
arcsin, arccos, arctan = _unary("asin", True), _unary("acos", True), _unary("atan", True)
sinh, cosh, tanh = _unary("sinh", True), _unary("cosh", True), _unary("tanh", True)
arcsinh, arccosh, arctanh = _unary("asinh", True), _unary("acosh", True), _unary("atanh", True)
exp, exp2, expm1 = _unary("exp", True), _unary("exp2", True), _unary("expm1", True)
log, log1p = _unary("log", True), _unary("log1p", True)
log2, log10 = _unary("log2", True), _unary("log10", True, strong=True)
sqrt, cbrt = _unary("sqrt", True), _unary("cbrt", True)
negative, absolute, sign = _unary("neg"), _unary("abs"), _unary("sign")
floor, ceil, trunc = _unary("floor"), _unary("ceil"), _unary("trunc")
conjugate, real, imag = _unary("conj"), _unary("real"), _unary("imag")
isnan = _unary("isnan")
isinf, signbit = _unary("isinf", strong=True), _unary("signbit", strong=True)
abs = absolute
conj = conjugate
arcsin.__name__ = "arcsin"
add, subtract, multiply = _binary("add"), _binary("sub"), _binary("mul")
true_divide, floor_divide = _binary("div", True), _binary("floor_divide")
divide = true_divide
remainder, fmod = _binary("rem"), _binary("fmod")
mod = remainder
maximum, minimum = _binary("max"), _binary("min")
arctan2, hypot, copysign = _binary("atan2", True), _binary("hypot", True), _binary("copysign", True)
nextafter, logaddexp = _binary("nextafter", True), _binary("logaddexp", True)
bitwise_and, bitwise_or, bitwise_xor = _binary("and"), _binary("or"), _binary("xor")
left_shift, right_shift = _binary("shift_left"), _binary("shift_right")
equal, not_equal, less, less_equal = _binary("eq"), _binary("ne"), _binary("lt"), _binary("le")
greater, greater_equal = _binary("gt"), _binary("ge")


def square(x: ArrayLike, /) -> Any:
    """x * x; booleans square as the default integer type (as in JAX)."""
    (x,) = _promote(x)
    if aval_of(x).dtype == np.bool_:
        x = _cast(x, dtypes.default_int_dtype())
    return P.UNARY["square"].bind(x)


def isfinite(x: ArrayLike, /) -> Any:
    """Whether each element is finite; integers and booleans always are (a strongly typed answer, as JAX's)."""
    (x,) = _promote(x)
    result = P.UNARY["isfinite"].bind(x)
    return result if issubdtype(aval_of(x).dtype, np.inexact) else _cast(result, result.dtype, False)


def fabs(x: ArrayLike, /) -> Any:
    (x,) = _promote_inexact(x)
    if issubdtype(aval_of(x).dtype, np.complexfloating):
        raise TypeError("ufunc 'fabs' does not support complex dtypes; use absolute for the magnitude.")
    return P.UNARY["abs"].bind(x)


def reciprocal(x: ArrayLike, /) -> Any:
    (x,) = _promote_inexact(x)
    return P.UNARY["reciprocal"].bind(x)


def _known_int(y: Any) -> int | None:
    """`y` as a Python int if it is an integer scalar known now (not traced), else None."""
    if isinstance(y, Tracer) or np.ndim(y) != 0:
        return None
    try:
        return operator.index(y)
    except TypeError:
        return None


def power(x: ArrayLike, y: ArrayLike, /) -> Any:
    """x ** y; a real float x to a known integer power y != 0 is a chain of products, as in JAX (NumPy's pow
    rounds differently)."""
    n = _known_int(y)
    if n:
        (base,) = _promote(x)
        dtype = aval_of(base).dtype
        if dtypes.is_floating(dtype) or (n > 0 and dtypes.issubdtype(dtype, np.integer)):
            return P.UNARY["integer_pow"].bind(base, y=n)
    x, y = _promote(x, y)
    return P.BINARY["pow"].bind(x, y)


pow = power


def float_power(x: ArrayLike, y: ArrayLike, /) -> Any:
    """x ** y in the operands' promoted inexact type (weak if both are; float16 stays float16, as in JAX)."""
    x, y = _promote_inexact(x, y)
    return P.BINARY["pow"].bind(x, y)


def round(a: ArrayLike, decimals: int = 0, out: None = None) -> Any:
    """Round half to even at `decimals` places; integers stay as they are (negative `decimals` are refused for
    them, as in JAX)."""
    _refuse_out_where("round", out, None)
    (a,) = _promote(a)
    if a.dtype == np.bool_:
        raise ValueError("round: data type bool is not inexact; cast booleans to a number type first.")
    if issubdtype(a.dtype, np.integer):
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return _as_array(a)
    if decimals:
        factor = 10.0 ** decimals
        return divide(round(multiply(a, factor)), factor)
    return P.UNARY["round"].bind(a)


around = round


def rint(x: ArrayLike, /) -> Any:
    """Round half to even to an integer value, in an inexact type (integers become the default float, strongly
    typed, as in JAX)."""
    (x,) = _promote(x)
    if not issubdtype(aval_of(x).dtype, np.inexact):
        return _cast(x, dtypes.default_float_dtype())
    return P.UNARY["round"].bind(x)


def invert(x: ArrayLike, /) -> Any:
    (x,) = _promote(x)
    return P.UNARY["not"].bind(x)


bitwise_not = invert


def logical_not(x: ArrayLike, /) -> Any:
    return invert(astype(x, np.bool_))


def _logical(name: str):
    """A logical ufunc: weakly typed when its promoted operands are (as JAX's)."""
    def function(x: ArrayLike, y: ArrayLike, /) -> Any:
        x, y = _promote(x, y)
        weak = _weak(x)
        return P.BINARY[name].bind(_cast(x, np.bool_, weak), _cast(y, np.bool_, weak))

    function.__name__ = f"logical_{name}"
    return function


logical_and, logical_or, logical_xor = _logical("and"), _logical("or"), _logical("xor")


def positive(x: ArrayLike, /) -> Any:
    return _as_array(_promote(x)[0])


def _where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Any:
    """`where` with both `x` and `y` (searching's `where` adds the one-argument form, which is nonzero); between
    typed key arrays, key by key (each key's words chosen together)."""
    if isinstance(x, KeyArray) or isinstance(y, KeyArray):
        if not (isinstance(x, KeyArray) and isinstance(y, KeyArray)):
            raise TypeError(f"where: a key array and a {type(y if isinstance(x, KeyArray) else x).__name__} cannot "
                            "be combined; pass key arrays as both x and y.")
        condition = _as_array(astype(condition, np.bool_))
        return KeyArray(_where(condition.reshape(condition.shape + (1,)), x._data, y._data))
    x, y = _promote(x, y)
    return P.select.bind(astype(condition, np.bool_), x, y)


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike], default: ArrayLike = 0) -> Any:
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: {len(condlist)} conditions but {len(choicelist)} choices.")
    result = default
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        result = _where(condition, choice, result)
    return _as_array(_promote(result)[0])


def clip(arr: ArrayLike = None, /, min: ArrayLike = None, max: ArrayLike = None) -> Any:
    """`arr` limited to [min, max] (either bound may be None); JAX 0.12 dropped the a/a_min/a_max keywords."""
    low, high = min, max
    result = _as_array(_promote(arr)[0])
    if low is not None:
        result = maximum(result, low)
    if high is not None:
        result = minimum(result, high)
    return result


def astype(x: ArrayLike, dtype: Any, copy: bool = False, device: Any = None) -> Any:
    if isinstance(x, KeyArray):  # typed keys convert to their own dtype only, as in JAX
        if dtype != x.dtype:
            raise ValueError(f"Cannot convert_element_type from {x.dtype} to {np.dtype(dtype)}: a key array converts "
                             "to its own dtype only; random.key_data(keys) gives its uint32 words.")
        return x if device is None else device_put(x, device)
    result = _cast(_as_array(x), _dtype(dtype))
    return result if device is None else device_put(result, device)


def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    a, b = _promote_inexact(a, b)
    close = less_equal(absolute(subtract(a, b)), add(atol, multiply(rtol, absolute(b))))
    close = logical_or(close, equal(a, b))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


acos, acosh, asin, asinh, atan, atanh, atan2 = arccos, arccosh, arcsin, arcsinh, arctan, arctanh, arctan2
bitwise_invert, bitwise_left_shift, bitwise_right_shift = invert, left_shift, right_shift


def divmod(x: ArrayLike, y: ArrayLike, /) -> tuple[Any, Any]:
    return floor_divide(x, y), remainder(x, y)


def deg2rad(x: ArrayLike, /) -> Any:
    (x,) = _promote_inexact(x)
    return multiply(x, _cast(np.pi / 180, x.dtype, _weak(x)))


def rad2deg(x: ArrayLike, /) -> Any:
    (x,) = _promote_inexact(x)
    return multiply(x, _cast(180 / np.pi, x.dtype, _weak(x)))


radians, degrees = deg2rad, rad2deg


def fmax(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    """The larger of each pair, ignoring NaN unless both are NaN."""
    x1, x2 = _promote(x1, x2)
    if not issubdtype(x1.dtype, np.inexact):
        return maximum(x1, x2)
    return _where(isnan(x1), x2, _where(isnan(x2), x1, maximum(x1, x2)))


def fmin(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    x1, x2 = _promote(x1, x2)
    if not issubdtype(x1.dtype, np.inexact):
        return minimum(x1, x2)
    return _where(isnan(x1), x2, _where(isnan(x2), x1, minimum(x1, x2)))


def heaviside(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    x1, x2 = _promote_inexact(x1, x2)
    zero, one = _cast(0, x1.dtype, _weak(x1)), _cast(1, x1.dtype, _weak(x1))
    return _where(less(x1, 0), zero, _where(greater(x1, 0), one, x2))


def logaddexp2(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    x1, x2 = _promote_inexact(x1, x2)
    peak = maximum(x1, x2)
    delta = subtract(x1, x2)
    spread = divide(log1p(exp2(negative(absolute(delta)))), _cast(np.log(2), x1.dtype, _weak(x1)))
    return _where(isnan(delta), add(x1, x2), add(peak, spread))


# sin(y)/y = sum over k of (-1)**k y**(2k) / (2k+1)!: the coefficients through y**14
_SINC_SERIES = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(8))


def sinc(x: ArrayLike, /) -> Any:
    """sin(pi x) / (pi x), 1 at 0; at 0 the value is sin(y)/y's Maclaurin series, so derivatives there (of
    every order up to 14) are the series' (as JAX's: the 2nd is -pi**2/3), not those of the guarded quotient."""
    (x,) = _promote_inexact(x)
    weak = _weak(x)
    scaled = multiply(x, _cast(np.pi, x.dtype, weak))
    at_zero = equal(x, 0)
    safe = _where(at_zero, _cast(1, x.dtype, weak), scaled)
    y2 = square(_where(at_zero, scaled, _cast(0, x.dtype, weak)))
    series = _cast(_SINC_SERIES[-1], x.dtype, weak)
    for coefficient in reversed(_SINC_SERIES[:-1]):  # Horner's rule in y**2
        series = add(_cast(coefficient, x.dtype, weak), multiply(y2, series))
    return _where(at_zero, series, divide(sin(safe), safe))


def modf(x: ArrayLike, /, out: None = None) -> tuple[Any, Any]:
    _refuse_out_where("modf", out, None)
    (x,) = _promote_inexact(x)
    whole = trunc(x)
    return subtract(x, whole), whole


def ldexp(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    (x1,) = _promote_inexact(x1)
    if not issubdtype(aval_of(_lift(x2)).dtype, np.integer):
        raise TypeError("ldexp: the exponents must be integers.")
    return multiply(x1, exp2(astype(x2, x1.dtype)))
