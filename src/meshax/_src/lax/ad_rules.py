"""Derivative rules (jvp and transpose) of the array primitives in primitives.py and random.py.

Nonlinear primitives get jvp rules that scale the tangent by a coefficient computed from
the primals; linear ones get a jvp (the primitive applied to tangents) and a transpose.
Primitives broadcast NumPy-style, so contributions are broadcast to the output's shape and
cotangents are summed back to the input's shape (`unbroadcast`).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..core.core import ShapedArray, aval_of
from ..interpreters.ad import (Zero, defjvp, deflinear, defzero, instantiate, is_undefined, jvp_rules, tangent_aval,
                               transpose_rules, zeros)
from ..core.dtypes import issubdtype

U, B = P.UNARY, P.BINARY


def _const(value: Any, like: Any) -> Any:
    """`value` in `like`'s dtype; a Python scalar where `like` is weakly typed, so that the derivative keeps its
    weak type, as in JAX."""
    aval = aval_of(like)
    constant = np.asarray(value, dtype=aval.dtype)
    if aval.weak_type and constant.ndim == 0 and constant.dtype.kind in "iufc":
        return constant.item()
    return constant


def mul(a: Any, b: Any) -> Any:
    return B["mul"].bind(a, b)


def div(a: Any, b: Any) -> Any:
    return B["div"].bind(a, b)


def add(a: Any, b: Any) -> Any:
    return B["add"].bind(a, b)


def sub(a: Any, b: Any) -> Any:
    return B["sub"].bind(a, b)


def neg(a: Any) -> Any:
    return U["neg"].bind(a)


def select(pred: Any, a: Any, b: Any) -> Any:
    return P.select.bind(pred, a, b)


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    """`x` broadcast NumPy-style to `shape` (unchanged if it has it already)."""
    shape = tuple(shape)
    if tuple(aval_of(x).shape) == shape:
        return x
    ndim = len(aval_of(x).shape)
    return P.broadcast_in_dim.bind(x, shape=shape, broadcast_dimensions=tuple(range(len(shape) - ndim, len(shape))))


def unbroadcast(ct: Any, aval: ShapedArray) -> Any:
    """Sum `ct` over the dimensions that broadcasting `aval` to ct's shape added or stretched."""
    shape = tuple(aval_of(ct).shape)
    if shape == tuple(aval.shape):
        return ct
    lead = len(shape) - aval.ndim
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(aval.shape) if n == 1 and shape[lead + d] != 1)
    summed = P.REDUCE["sum"].bind(ct, axes=axes, keepdims=False) if axes else ct
    if tuple(aval_of(summed).shape) != tuple(aval.shape):
        summed = P.reshape.bind(summed, new_sizes=tuple(aval.shape))
    return summed


def _scaled(coefficient: Any) -> Any:
    """A contribution g * coefficient(ans, *primals), broadcast to the output's shape."""
    return lambda g, ans, *xs, **_: broadcast_to(mul(g, coefficient(ans, *xs)), aval_of(ans).shape)


# ---- elementwise -----------------------------------------------------------------------------------------------


def _sq(x: Any) -> Any:
    return mul(x, x)


_UNARY_COEFFICIENTS = {
    "sin": lambda ans, x: U["cos"].bind(x),
    "cos": lambda ans, x: neg(U["sin"].bind(x)),
    "tan": lambda ans, x: add(_const(1, x), _sq(ans)),
    "asin": lambda ans, x: div(_const(1, x), U["sqrt"].bind(sub(_const(1, x), _sq(x)))),
    "acos": lambda ans, x: neg(div(_const(1, x), U["sqrt"].bind(sub(_const(1, x), _sq(x))))),
    "atan": lambda ans, x: div(_const(1, x), add(_const(1, x), _sq(x))),
    "sinh": lambda ans, x: U["cosh"].bind(x),
    "cosh": lambda ans, x: U["sinh"].bind(x),
    "tanh": lambda ans, x: sub(_const(1, x), _sq(ans)),
    "asinh": lambda ans, x: div(_const(1, x), U["sqrt"].bind(add(_sq(x), _const(1, x)))),
    "acosh": lambda ans, x: div(_const(1, x), U["sqrt"].bind(mul(sub(x, _const(1, x)), add(x, _const(1, x))))),
    "atanh": lambda ans, x: div(_const(1, x), sub(_const(1, x), _sq(x))),
    "exp": lambda ans, x: ans,
    "exp2": lambda ans, x: mul(ans, _const(math.log(2), x)),
    "expm1": lambda ans, x: add(ans, _const(1, x)),
    "log": lambda ans, x: div(_const(1, x), x),
    "log1p": lambda ans, x: div(_const(1, x), add(x, _const(1, x))),
    "log2": lambda ans, x: div(_const(1, x), mul(x, _const(math.log(2), x))),
    "log10": lambda ans, x: div(_const(1, x), mul(x, _const(math.log(10), x))),
    "cbrt": lambda ans, x: div(_const(1 / 3, x), _sq(ans)),
    "logistic": lambda ans, x: mul(ans, sub(_const(1, x), ans)),
    "erf": lambda ans, x: mul(_const(2 / math.sqrt(math.pi), x), U["exp"].bind(neg(_sq(x)))),
    "sqrt": lambda ans, x: div(_const(0.5, x), ans),
    "square": lambda ans, x: mul(_const(2, x), x),
    "reciprocal": lambda ans, x: neg(_sq(ans)),
}
for _name, _coefficient in _UNARY_COEFFICIENTS.items():
    defjvp(U[_name], _scaled(_coefficient))


def _integer_pow_contribution(g: Any, ans: Any, x: Any, *, y: int) -> Any:
    """d(x ** y) = y * x ** (y - 1) dx, with x itself for y = 2 (as JAX's rule, so jaxprs and residuals agree)."""
    if y == 0:
        return broadcast_to(mul(g, _const(0, x)), aval_of(ans).shape)
    if y == 1:
        return g
    power = x if y == 2 else U["integer_pow"].bind(x, y=y - 1)
    return broadcast_to(mul(g, mul(_const(y, x), power)), aval_of(ans).shape)


defjvp(U["integer_pow"], _integer_pow_contribution)


def _abs_contribution(g: Any, ans: Any, x: Any) -> Any:
    """d|x|: the sign of a real x (1 at 0, as JAX); Re(conj(z) dz) / |z| for a complex z (0 at 0)."""
    if aval_of(x).dtype.kind != "c":
        return mul(g, select(B["ge"].bind(x, _const(0, x)), _const(1, x), _const(-1, x)))
    along = U["real"].bind(mul(U["conj"].bind(x), g))
    safe = select(B["eq"].bind(ans, _const(0, ans)), _const(1, ans), ans)
    return select(B["eq"].bind(ans, _const(0, ans)), _const(0, ans), div(along, safe))


defjvp(U["abs"], _abs_contribution)
for _name in ("sign", "floor", "ceil", "round", "trunc", "not", "isnan", "isinf", "isfinite", "signbit"):
    defzero(U[_name])
deflinear(U["neg"], lambda ct, x: [neg(ct)])
deflinear(U["conj"], lambda ct, x: [U["conj"].bind(ct)])
deflinear(U["real"], lambda ct, x: [P.convert_element_type.bind(ct, new_dtype=x.aval.dtype, weak_type=False)])
deflinear(U["imag"], lambda ct, x: [mul(P.convert_element_type.bind(ct, new_dtype=x.aval.dtype, weak_type=False),
                                        np.asarray(-1j, x.aval.dtype)) if x.aval.dtype.kind == "c" else zeros(x.aval)])


def _balanced(x: Any, y: Any, ans: Any) -> Any:
    """1 where x alone attains the max/min, 1/2 on ties, 0 otherwise (JAX's rule for max/min)."""
    one, half, zero = _const(1, ans), _const(0.5, ans), _const(0, ans)
    return select(B["eq"].bind(x, ans), select(B["eq"].bind(y, ans), half, one), zero)


def _replace_zero(x: Any) -> Any:
    return select(B["eq"].bind(x, _const(0, x)), _const(1, x), x)


_BINARY_CONTRIBUTIONS = {
    "mul": (lambda ans, x, y: y, lambda ans, x, y: x),
    "div": (lambda ans, x, y: div(_const(1, y), y), lambda ans, x, y: neg(div(ans, y))),
    "rem": (lambda ans, x, y: _const(1, ans), lambda ans, x, y: neg(U["floor"].bind(div(x, y)))),
    "fmod": (lambda ans, x, y: _const(1, ans), lambda ans, x, y: neg(U["trunc"].bind(div(x, y)))),
    "pow": (lambda ans, x, y: select(B["eq"].bind(y, _const(0, y)), _const(0, y),
                                     mul(_replace_zero(y), B["pow"].bind(x, sub(y, _const(1, y))))),
            lambda ans, x, y: mul(U["log"].bind(_replace_zero(x)), ans)),
    "max": (lambda ans, x, y: _balanced(x, y, ans), lambda ans, x, y: _balanced(y, x, ans)),
    "min": (lambda ans, x, y: _balanced(x, y, ans), lambda ans, x, y: _balanced(y, x, ans)),
    "atan2": (lambda ans, x, y: div(y, add(_sq(x), _sq(y))), lambda ans, x, y: neg(div(x, add(_sq(x), _sq(y))))),
    "hypot": (lambda ans, x, y: div(x, ans), lambda ans, x, y: div(y, ans)),
    "logaddexp": (lambda ans, x, y: U["exp"].bind(sub(x, ans)), lambda ans, x, y: U["exp"].bind(sub(y, ans))),
    "copysign": (lambda ans, x, y: select(B["eq"].bind(U["signbit"].bind(x), U["signbit"].bind(ans)),
                                          _const(1, ans), _const(-1, ans)), None),
}
for _name, (_dx, _dy) in _BINARY_CONTRIBUTIONS.items():
    defjvp(B[_name], _scaled(_dx), _scaled(_dy) if _dy else None)
defjvp(B["add"], lambda g, ans, x, y: broadcast_to(g, aval_of(ans).shape),
       lambda g, ans, x, y: broadcast_to(g, aval_of(ans).shape))
defjvp(B["sub"], lambda g, ans, x, y: broadcast_to(g, aval_of(ans).shape),
       lambda g, ans, x, y: broadcast_to(neg(g), aval_of(ans).shape))
for _name in ("floor_divide", "and", "or", "xor", "shift_left", "shift_right", "nextafter",
              "eq", "ne", "lt", "le", "gt", "ge"):
    defzero(B[_name])


def _binary_linear_transpose(ct: Any, x: Any, y: Any, *, which: str) -> list[Any]:
    """Transpose of add/sub, or of mul/div with one linear operand."""
    if which in ("add", "sub"):
        cx = unbroadcast(ct, x.aval) if is_undefined(x) else None
        cy = unbroadcast(ct if which == "add" else neg(ct), y.aval) if is_undefined(y) else None
        return [cx, cy]
    if which == "mul":
        if is_undefined(x):
            return [unbroadcast(mul(ct, y), x.aval), None]
        return [None, unbroadcast(mul(x, ct), y.aval)]
    return [unbroadcast(div(ct, y), x.aval), None]  # div: only the numerator can be linear


for _name in ("add", "sub", "mul", "div"):
    transpose_rules[B[_name]] = (lambda name: lambda ct, x, y: _binary_linear_transpose(ct, x, y, which=name))(_name)


def _select_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    pred, on_true, on_false = primals
    ans = select(pred, on_true, on_false)
    if isinstance(tangents[1], Zero) and isinstance(tangents[2], Zero):
        return ans, Zero(tangent_aval(aval_of(ans)))
    tt = broadcast_to(instantiate(tangents[1]), aval_of(ans).shape)
    tf = broadcast_to(instantiate(tangents[2]), aval_of(ans).shape)
    return ans, select(pred, tt, tf)


def _select_transpose(ct: Any, pred: Any, on_true: Any, on_false: Any) -> list[Any]:
    zero = np.zeros((), aval_of(ct).dtype)  # a scalar (a literal when staged): select broadcasts it
    if aval_of(ct).weak_type:  # a strong zero would make the cotangents strong (jnp.where's gradient keeps weak)
        zero = P.convert_element_type.bind(zero, new_dtype=zero.dtype, weak_type=True)
    ct_true = unbroadcast(select(pred, ct, zero), on_true.aval) if is_undefined(on_true) else None
    ct_false = unbroadcast(select(pred, zero, ct), on_false.aval) if is_undefined(on_false) else None
    return [None, ct_true, ct_false]


jvp_rules[P.select] = _select_jvp
transpose_rules[P.select] = _select_transpose


def _convert_jvp(primals: list[Any], tangents: list[Any], *, new_dtype: Any, weak_type: bool = False
                 ) -> tuple[Any, Any]:
    ans = P.convert_element_type.bind(primals[0], new_dtype=new_dtype, weak_type=weak_type)
    t = tangents[0]
    if isinstance(t, Zero) or not issubdtype(np.dtype(new_dtype), np.inexact):
        return ans, Zero(tangent_aval(aval_of(ans)))
    return ans, P.convert_element_type.bind(t, new_dtype=new_dtype, weak_type=weak_type)


jvp_rules[P.convert_element_type] = _convert_jvp
transpose_rules[P.convert_element_type] = lambda ct, x, *, new_dtype, weak_type=False: [
    P.convert_element_type.bind(ct, new_dtype=x.aval.dtype, weak_type=x.aval.weak_type)]
