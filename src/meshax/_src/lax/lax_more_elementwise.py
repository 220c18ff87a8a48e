"""jax.lax's remaining elementwise functions: log2, one_minus_square, polynomial, igamma_grad_a, random_gamma_grad
and stage, each as a primitive (named as JAX's) with its derivative and batching rules where JAX has them."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..sharding import placement_rules as rules
from ..arrays.array import Array
from ..core.core import Primitive, Tracer, ShapedArray, aval_of, define_primitive
from ..interpreters.ad import Zero, add_tangents, defjvp, jvp_rules, tangent_aval
from ..interpreters.batching import batching_rules
from .ad_rules import _const, mul
from .batching_rules import _elementwise
from .lax_ops import _jnp, _lift, _same_dtype
from ..core.dtypes import issubdtype

__all__ = ["igamma_grad_a", "log2", "one_minus_square", "polynomial", "random_gamma_grad", "stage"]


def _aval(x: ShapedArray, *rest: ShapedArray, **_: Any) -> ShapedArray:
    """The broadcast shape and the first operand's dtype, weakly typed when every operand is."""
    return ShapedArray(rules.broadcast_shapes(x.shape, *[r.shape for r in rest]), x.dtype,
                       all(a.weak_type for a in (x, *rest)))


def _primitive(name: str, impl: Callable[..., np.ndarray]) -> Primitive:
    primitive = define_primitive(name, impl, _aval, rules.elementwise)
    batching_rules[primitive] = _elementwise(primitive)
    return primitive


def _check_dtype(name: str, x: Any, kinds: Sequence[type], accepted: str, position: int | None = None) -> None:
    """TypeError (as JAX's) unless `x`'s dtype is a subtype of one of `kinds`."""
    dtype = np.dtype(aval_of(x).dtype)
    if not any(issubdtype(dtype, kind) for kind in kinds):
        where = "" if position is None else f" at position {position}"
        raise TypeError(f"{name} does not accept dtype {dtype}{where}. Accepted dtypes{where} are subtypes of "
                        f"{accepted}.")


# ---- log2, one_minus_square, stage -----------------------------------------------------------------------------


def log2(x: Any, *, accuracy: Any = None) -> Any:
    """The base-2 logarithm, elementwise (as jax.lax.log2); `accuracy` is accepted and has no effect on the CPU."""
    x = _lift(x)
    _check_dtype("log2", x, (np.floating, np.complexfloating), "floating, complexfloating")
    return P.UNARY["log2"].bind(x)


one_minus_square_p = _primitive("one_minus_square", lambda x: ((1 - x) * (1 + x)).astype(x.dtype, copy=False))
defjvp(one_minus_square_p, lambda g, ans, x: mul(g, mul(x, _const(-2, x))))


def one_minus_square(x: Any) -> Any:
    """1 - x**2, elementwise, computed as (1 - x) * (1 + x) in x's dtype (as jax.lax.one_minus_square)."""
    return one_minus_square_p.bind(_lift(x))


def stage(x: Any, /) -> Any:
    """`x` lifted into the current trace (a meshax array outside any transformation), as jax.lax.stage."""
    x = _lift(x)
    return x if isinstance(x, (Array, Tracer)) else _jnp().asarray(x)


# ---- polynomial ----------------------------------------------------------------------------------------------------


def _horner(x: np.ndarray, *coeffs: np.ndarray) -> np.ndarray:
    """sum_i coeffs[i] * x**i, evaluated from the highest coefficient down, in x's dtype."""
    acc = np.zeros(np.broadcast_shapes(x.shape, *[c.shape for c in coeffs]), x.dtype)
    for c in reversed(coeffs):
        acc = (acc * x + c).astype(x.dtype, copy=False)
    return acc


polynomial_p = _primitive("polynomial", _horner)


def _polynomial_dx(g: Any, ans: Any, x: Any, *coeffs: Any) -> Any:
    dtype = aval_of(x).dtype
    derivative = [mul(c, np.asarray(i, dtype)) for i, c in enumerate(coeffs) if i]
    return mul(g, polynomial_p.bind(x, *derivative))


def _polynomial_dcoeff(i: int) -> Callable[..., Any]:
    def contribution(g: Any, ans: Any, x: Any, *coeffs: Any) -> Any:
        power = P.UNARY["integer_pow"].bind(x, y=i) if i else np.ones((), aval_of(x).dtype)
        return mul(g, power)

    return contribution


def _polynomial_jvp(primals: list[Any], tangents: list[Any]) -> tuple[Any, Any]:
    """The tangent of sum_i c_i x**i: d/dx from x's tangent, x**i from each coefficient's."""
    x, coeffs = primals[0], primals[1:]
    ans = polynomial_p.bind(*primals)
    contributions = [_polynomial_dx] + [_polynomial_dcoeff(i) for i in range(len(coeffs))]
    out: Any = Zero(tangent_aval(aval_of(ans)))
    for t, contribution in zip(tangents, contributions):
        if not isinstance(t, Zero):
            out = add_tangents(out, contribution(t, ans, x, *coeffs))
    return ans, out


jvp_rules[polynomial_p] = _polynomial_jvp


def _coefficient(c: Any, x: Any, dtype: np.dtype) -> Any:
    """A coefficient in x's dtype: a host scalar takes x's weak type, an array or traced value becomes strongly
    typed (as lax.convert_element_type makes it)."""
    if not isinstance(c, Tracer) and np.ndim(c) == 0 and not isinstance(c, Array):
        return P.convert_element_type.bind(np.asarray(c, dtype), new_dtype=dtype,
                                           weak_type=bool(aval_of(x).weak_type))
    return P.convert_element_type.bind(_lift(c), new_dtype=dtype, weak_type=False)


def polynomial(x: Any, coeffs: Sequence[Any], *, unroll: int | None = None) -> Any:
    """sum_i coeffs[i] * x**i, elementwise (as jax.lax.polynomial): coefficients lowest power first, each
    converted to x's dtype and broadcast with x; weakly typed when x and every coefficient are (a host scalar
    coefficient counts as weak when x is)."""
    x = _lift(x)
    dtype = np.dtype(aval_of(x).dtype)
    converted = [_coefficient(c, x, dtype) for c in coeffs]
    if len(converted) == 1:  # the coefficient alone, broadcast with x (as JAX)
        c = converted[0]
        shape = rules.broadcast_shapes(aval_of(x).shape, aval_of(c).shape)
        return c if tuple(aval_of(c).shape) == shape else _jnp().broadcast_to(c, shape)
    return polynomial_p.bind(x, *converted)


# ---- incomplete gamma derivatives --------------------------------------------------------------------------------


def _igamma_da64(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d/da of the regularized lower incomplete gamma function, in float64 by a five-point central difference
    (truncation error ~h**4, h a thousandth of a)."""
    import scipy.special

    a, x = np.broadcast_arrays(a.astype(np.float64), x.astype(np.float64))
    h = 1e-3 * np.maximum(a, 1e-300)
    f = scipy.special.gammainc
    return (-f(a + 2 * h, x) + 8 * f(a + h, x) - 8 * f(a - h, x) + f(a - 2 * h, x)) / (12 * h)


def _igamma_grad_a_impl(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    return _igamma_da64(a, x).astype(a.dtype)


def _random_gamma_grad_impl(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d sample / d a of a standard gamma sample x: -(dP/da) / (dP/dx) at P(a, x) held fixed."""
    import scipy.special

    a64, x64 = np.broadcast_arrays(a.astype(np.float64), x.astype(np.float64))
    with np.errstate(all="ignore"):
        log_density = (a64 - 1) * np.log(x64) - x64 - scipy.special.gammaln(a64)
        return (-_igamma_da64(a64, x64) / np.exp(log_density)).astype(a.dtype)


igamma_grad_a_p = _primitive("igamma_grad_a", _igamma_grad_a_impl)
random_gamma_grad_p = _primitive("random_gamma_grad", _random_gamma_grad_impl)


def igamma_grad_a(a: Any, x: Any) -> Any:
    """The derivative of lax.igamma(a, x) with respect to a, elementwise (as jax.lax.igamma_grad_a)."""
    a, x = _same_dtype("igamma_grad_a", a, x)
    _check_dtype("igamma_grad_a", a, (np.floating,), "floating", position=0)
    return igamma_grad_a_p.bind(a, x)


def random_gamma_grad(a: Any, x: Any) -> Any:
    """The derivative of a standard gamma sample x with respect to its shape a, elementwise (as
    jax.lax.random_gamma_grad)."""
    a, x = _same_dtype("random_gamma_grad", a, x)
    _check_dtype("random_gamma_grad", a, (np.floating,), "floating", position=0)
    return random_gamma_grad_p.bind(a, x)  # neither has a derivative rule, as in JAX
