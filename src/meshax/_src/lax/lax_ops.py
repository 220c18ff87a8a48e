"""jax.lax's elementwise, reduction, contraction and creation functions over meshax's primitives.

Unlike meshax.numpy, lax does not promote: binary functions require operands of one dtype
(Python scalars take the other operand's dtype family as weak values, as in JAX). Most
functions bind the primitive of the same name directly; a few are short compositions.
"""
from __future__ import annotations

import enum
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ..core import dtypes
from ..primitives import array_primitives as P
from ..core.core import aval_of
from ..numpy import promotion as U
from ..arrays.out_sharding import reshard
from ..core.dtypes import issubdtype

__all__ = [
    "abs", "acos", "acosh", "add", "argmax", "argmin", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "broadcasted_iota", "cbrt", "ceil", "clamp", "conj", "convert_element_type",
    "cos", "cosh", "cummax", "cummin", "cumprod", "cumsum", "div", "dot", "dot_general", "eq", "erf", "exp", "exp2",
    "expm1", "floor", "full", "full_like", "ge", "gt", "imag", "integer_pow", "iota", "is_finite", "le", "log",
    "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg", "nextafter", "pow", "real", "reciprocal",
    "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod", "reduce_sum", "rem", "round",
    "RoundingMethod", "rsqrt", "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign", "sin", "sinh",
    "sqrt", "square", "sub", "tan", "tanh",
]


def _lift(x: Any) -> Any:
    """Arrays and tracers stay; host values become values of their JAX dtype, Python scalars weakly typed ones
    (lax.exp(2.0) is a weak float32, as in JAX)."""
    return U._promote(x)[0]


def _same_dtype(name: str, *xs: Any) -> list[Any]:
    """The operands as arrays of one dtype: strongly typed ones must agree; weak ones (Python scalars) take
    the strong dtype when of the same kind, as JAX's lax does."""
    pairs = [dtypes.dtype_of(x) if not U._is_array(x) else (np.dtype(x.dtype), bool(x.weak_type)) for x in xs]
    strong = {d for d, weak in pairs if not weak}
    if len(strong) > 1:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(d.name for d, _ in pairs)}. (Tip: jnp.{name} is a similar function that "
                        "does automatic type promotion on inputs).")
    target = strong.pop() if strong else None
    if target is not None:
        for d, weak in pairs:
            if weak and d != target and dtypes._category(d) != dtypes._category(target):
                raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                                f"{', '.join(p.name for p, _ in pairs)}.")
    if target is None and len({d for d, _ in pairs}) > 1:
        raise TypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                        f"{', '.join(d.name for d, _ in pairs)}.")
    return U._promote(*xs)


def _unary(name: str, function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def op(x: Any, accuracy: Any = None) -> Any:
        return function(_lift(x))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} (as jax.lax.{name})."
    return op


def _primitive_unary(name: str) -> Callable[[Any], Any]:
    return _unary(name, lambda x: P.UNARY[name].bind(x))


def _binary(name: str, function: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def op(x: Any, y: Any) -> Any:
        return function(*_same_dtype(name, x, y))

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise {name} of two operands of one dtype (as jax.lax.{name})."
    return op


def _jnp() -> Any:
    from .. import numpy as jnp

    return jnp


# ---- unary -----------------------------------------------------------------------------------------------------------

sin, cos, tan = _primitive_unary("sin"), _primitive_unary("cos"), _primitive_unary("tan")
asin, acos, atan = _primitive_unary("asin"), _primitive_unary("acos"), _primitive_unary("atan")
sinh, cosh, tanh = _primitive_unary("sinh"), _primitive_unary("cosh"), _primitive_unary("tanh")
asinh, acosh, atanh = _primitive_unary("asinh"), _primitive_unary("acosh"), _primitive_unary("atanh")
exp, exp2, expm1 = _primitive_unary("exp"), _primitive_unary("exp2"), _primitive_unary("expm1")
log, log1p, cbrt = _primitive_unary("log"), _primitive_unary("log1p"), _primitive_unary("cbrt")
logistic, erf = _primitive_unary("logistic"), _primitive_unary("erf")
neg, sign, floor, ceil = _primitive_unary("neg"), _primitive_unary("sign"), _primitive_unary("floor"), \
    _primitive_unary("ceil")
sqrt, square, reciprocal = _primitive_unary("sqrt"), _primitive_unary("square"), _primitive_unary("reciprocal")
abs = _primitive_unary("abs")  # noqa: A001
real, imag = _primitive_unary("real"), _primitive_unary("imag")


def conj(x: Any) -> Any:
    """The complex conjugate; a real float becomes complex first (lax.conj(float32) is complex64), as in JAX."""
    x = _lift(x)
    dtype = np.dtype(aval_of(x).dtype)
    if not issubdtype(dtype, np.inexact):
        raise TypeError(f"conj does not accept dtype {dtype}. Accepted dtypes are subtypes of float32, "
                        "complexfloating, float64.")
    if not issubdtype(dtype, np.complexfloating):
        kind = np.dtype(np.complex128 if dtype == np.float64 else np.complex64)
        x = P.convert_element_type.bind(x, new_dtype=kind, weak_type=bool(aval_of(x).weak_type))
    return P.UNARY["conj"].bind(x)
is_finite = _primitive_unary("isfinite")
bitwise_not = _primitive_unary("not")


def rsqrt(x: Any, accuracy: Any = None) -> Any:
    """1 / sqrt(x), elementwise."""
    return P.UNARY["reciprocal"].bind(P.UNARY["sqrt"].bind(_lift(x)))


class RoundingMethod(enum.IntEnum):
    """How lax.round breaks ties."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x: Any, rounding_method: RoundingMethod | int = RoundingMethod.AWAY_FROM_ZERO) -> Any:  # noqa: A001
    """Round to the nearest integer; ties away from zero (default) or to even."""
    x = _lift(x)
    if RoundingMethod(rounding_method) is RoundingMethod.TO_NEAREST_EVEN:
        return P.UNARY["round"].bind(x)
    jnp = _jnp()
    return jnp.copysign(jnp.floor(jnp.add(jnp.abs(x), jnp.asarray(0.5, aval_of(x).dtype))), x)


def integer_pow(x: Any, y: int) -> Any:
    """x ** y for a static integer y, by repeated multiplication (keeps x's dtype)."""
    return P.UNARY["integer_pow"].bind(_lift(x), y=operator.index(y))


# ---- binary ----------------------------------------------------------------------------------------------------------


def _bin(name: str, primitive: str | None = None) -> Callable[[Any, Any], Any]:
    return _binary(name, lambda x, y: P.BINARY[primitive or name].bind(x, y))


add, sub, pow = _bin("add"), _bin("sub"), _bin("pow")  # noqa: A001
max, min = _bin("max"), _bin("min")  # noqa: A001
atan2 = _bin("atan2")


def _converted(x: Any, dtype: np.dtype) -> Any:
    """`x` converted to `dtype`, keeping a Python scalar's weak type (as JAX's mul converts before multiplying)."""
    x = _lift(x)
    source = np.dtype(aval_of(x).dtype)
    if source == dtype:
        return x
    if issubdtype(source, np.complexfloating) and not issubdtype(dtype, np.complexfloating):
        x = P.UNARY["real"].bind(x)
    return P.convert_element_type.bind(x, new_dtype=dtype, weak_type=bool(aval_of(x).weak_type))


def mul(x: Any, y: Any, *, out_dtype: Any = None) -> Any:
    """x * y elementwise for operands of one dtype; with `out_dtype`, both are first converted to it (so their
    dtypes may differ) and the product has that dtype (as jax.lax.mul)."""
    if out_dtype is None:
        return P.BINARY["mul"].bind(*_same_dtype("mul", x, y))
    dtype = dtypes.canonicalize_dtype(out_dtype)
    return P.BINARY["mul"].bind(_converted(x, dtype), _converted(y, dtype))


def nextafter(x1: Any, x2: Any) -> Any:
    """The next representable value after x1 towards x2, elementwise, for operands of one dtype (as
    jax.lax.nextafter)."""
    return P.BINARY["nextafter"].bind(*_same_dtype("nextafter", x1, x2))
bitwise_and, bitwise_or, bitwise_xor = _bin("bitwise_and", "and"), _bin("bitwise_or", "or"), _bin("bitwise_xor", "xor")
eq, ne, lt, le, gt, ge = _bin("eq"), _bin("ne"), _bin("lt"), _bin("le"), _bin("gt"), _bin("ge")
shift_left = _bin("shift_left")
shift_right_arithmetic = _bin("shift_right_arithmetic", "shift_right")


def _div(x: Any, y: Any) -> Any:
    if not issubdtype(aval_of(x).dtype, np.integer):
        return P.BINARY["div"].bind(x, y)
    jnp = _jnp()  # integers: rounded toward zero, as C (and XLA) divide; x / 0 is all ones (-1 or the maximum)
    by_zero = jnp.equal(y, 0)
    y = jnp.where(by_zero, jnp.ones_like(y), y)
    q = jnp.floor_divide(x, y)
    inexact = jnp.not_equal(jnp.multiply(q, y), x)
    if issubdtype(aval_of(x).dtype, np.signedinteger):
        q = jnp.where(jnp.logical_and(inexact, jnp.less(jnp.bitwise_xor(x, y), 0)), jnp.add(q, 1), q)
    return jnp.where(by_zero, jnp.bitwise_not(jnp.zeros_like(q)), q)


def _rem(x: Any, y: Any) -> Any:
    """The remainder with the dividend's sign (C's fmod, as XLA); an integer x rem 0 is x, as XLA gives it."""
    if not issubdtype(aval_of(x).dtype, np.integer):
        return P.BINARY["fmod"].bind(x, y)
    jnp = _jnp()
    by_zero = jnp.equal(y, 0)
    return jnp.where(by_zero, x, P.BINARY["fmod"].bind(x, jnp.where(by_zero, jnp.ones_like(y), y)))


div = _binary("div", _div)
rem = _binary("rem", _rem)


def _shift_right_logical(x: Any, y: Any) -> Any:
    dtype = np.dtype(aval_of(x).dtype)
    if dtype.kind != "i":
        return P.BINARY["shift_right"].bind(x, y)
    unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
    ux = P.convert_element_type.bind(x, new_dtype=unsigned)
    uy = P.convert_element_type.bind(y, new_dtype=unsigned)
    return P.convert_element_type.bind(P.BINARY["shift_right"].bind(ux, uy), new_dtype=dtype)


shift_right_logical = _binary("shift_right_logical", _shift_right_logical)


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002
    """x clipped to [min, max] elementwise."""
    lo, value, hi = _same_dtype("clamp", min, x, max)
    return P.BINARY["min"].bind(P.BINARY["max"].bind(value, lo), hi)


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    """`operand` converted to `new_dtype` (strongly typed)."""
    dtype = dtypes.canonicalize_dtype(new_dtype)
    x = _lift(operand)
    if U._is_array(x) and x.dtype == dtype and not x.weak_type:
        return x
    if issubdtype(dtype, np.integer) and not issubdtype(aval_of(x).dtype, np.integer) and \
            aval_of(x).dtype != np.bool_:
        x = P.UNARY["trunc"].bind(x) if not np.iscomplexobj(np.zeros((), aval_of(x).dtype)) else x
    return P.convert_element_type.bind(x, new_dtype=dtype, weak_type=False)


# ---- reductions and scans -----------------------------------------------------------------------------------------


def _reducer(kind: str) -> Callable[[Any, Sequence[int]], Any]:
    def reduce(operand: Any, axes: Sequence[int], *, out_sharding: Any = None) -> Any:
        x = _lift(operand)
        ndim = aval_of(x).ndim
        result = P.REDUCE[kind].bind(x, axes=tuple(sorted(int(a) % ndim for a in axes)) if ndim else (),
                                     keepdims=False)
        return result if out_sharding is None else reshard(result, out_sharding)

    reduce.__name__ = reduce.__qualname__ = f"reduce_{kind}"
    reduce.__doc__ = f"The {kind} of `operand` over `axes` (as jax.lax.reduce_{kind})."
    return reduce


reduce_sum, reduce_prod = _reducer("sum"), _reducer("prod")
reduce_max, reduce_min = _reducer("max"), _reducer("min")
reduce_and, reduce_or = _reducer("and"), _reducer("or")


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    """Index of the largest entry along `axis`."""
    x = _lift(operand)
    return P.argmax.bind(x, axes=(int(axis) % aval_of(x).ndim,), index_dtype=dtypes.canonicalize_dtype(index_dtype))


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    """Index of the smallest entry along `axis`."""
    x = _lift(operand)
    return P.argmin.bind(x, axes=(int(axis) % aval_of(x).ndim,), index_dtype=dtypes.canonicalize_dtype(index_dtype))


def _cumulative(kind: str) -> Callable[..., Any]:
    def scan(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        x = _lift(operand)
        return P.CUMULATIVE[kind].bind(x, axis=int(axis) % aval_of(x).ndim, reverse=bool(reverse))

    scan.__name__ = scan.__qualname__ = kind
    scan.__doc__ = f"The running {kind[3:]} along `axis` (as jax.lax.{kind})."
    return scan


cumsum, cumprod, cummax, cummin = (_cumulative(k) for k in ("cumsum", "cumprod", "cummax", "cummin"))


# ---- contractions -------------------------------------------------------------------------------------------------


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """The contraction of `lhs` and `rhs` over ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))."""
    (lc, rc), (lb, rb) = dimension_numbers
    a, b = U._promote(lhs, rhs)
    numbers = ((tuple(int(d) for d in lc), tuple(int(d) for d in rc)), (tuple(int(d) for d in lb),
                                                                         tuple(int(d) for d in rb)))
    params: dict[str, Any] = {}
    if preferred_element_type is not None:
        params["preferred_element_type"] = dtypes.canonicalize_dtype(preferred_element_type)
    if out_sharding is not None:
        params["out_sharding"] = out_sharding
    return P.dot_general.bind(a, b, dimension_numbers=numbers, **params)


def dot(lhs: Any, rhs: Any, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """The contraction of `lhs` and `rhs` over `dimension_numbers` (as dot_general); without them, the vector/matrix
    product of operands of rank 1 or 2 (the last dimension of `lhs` with the first of `rhs`), as jax.lax.dot."""
    a, b = _lift(lhs), _lift(rhs)
    if dimension_numbers is None:
        if aval_of(a).ndim not in (1, 2) or aval_of(b).ndim not in (1, 2):
            raise ValueError("jax.lax.dot: dimension_numbers must be specified when not performing simple un-batched "
                             "matrix-matrix, matrix-vector, or vector-vector products; got lhs_shape="
                             f"{aval_of(a).shape} rhs_shape={aval_of(b).shape}")
        dimension_numbers = (((aval_of(a).ndim - 1,), (0,)), ((), ()))
    return dot_general(a, b, dimension_numbers, precision, preferred_element_type, out_sharding)


# ---- creation -----------------------------------------------------------------------------------------------------


def iota(dtype: Any, size: int, *, sharding: Any = None) -> Any:
    """0, 1, ..., size-1 of `dtype`."""
    return broadcasted_iota(dtype, (int(size),), 0)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int, *, out_sharding: Any = None) -> Any:
    """An array of `shape` whose entries count along `dimension`."""
    shape = tuple(int(n) for n in shape)
    result = P.iota.bind(shape=shape, dtype=dtypes.canonicalize_dtype(dtype), dimension=int(dimension) % len(shape))
    return result if out_sharding is None else reshard(result, out_sharding)


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None, *, sharding: Any = None) -> Any:
    """An array of `shape` filled with `fill_value` (weakly typed when both it and dtype are Python-typed)."""
    jnp = _jnp()
    shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
    return jnp.full(tuple(int(n) for n in shape), fill_value, dtype, device=sharding)


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None, sharding: Any = None) -> Any:
    """An array like `x` (its shape and dtype unless given) filled with `fill_value`."""
    jnp = _jnp()
    return jnp.full_like(x, fill_value, dtype=dtype, shape=shape)
