"""Forward- and reverse-mode rule tables (as jax.interpreters.ad).

`primitive_jvps[p] = rule(primals, tangents, **params) -> (primal_out, tangent_out)` and
`primitive_transposes[p] = rule(ct, *args, **params) -> cotangents` are meshax's own jvp and transpose tables;
tangents and cotangents that are known to be zero are `Zero` instances, linear inputs of a transposed equation
`UndefinedPrimal`s, exactly as in JAX.
"""
from __future__ import annotations

from typing import Any, Callable

from meshax._src.core.core import Tracer, aval_of
from meshax._src.interpreters.ad import (JVPTrace, UndefinedPrimal, Zero, add_any_p, add_tangents, deflinear,
                                         instantiate, is_undefined, jvp_rules, tangent_aval, transpose_rules, zeros)
from meshax._src.interpreters.ad import defjvp as _defjvp

__all__ = ["JVPTrace", "JVPTracer", "UndefinedPrimal", "Zero", "add_jaxvals", "add_jaxvals_p", "add_tangents",
           "defbilinear", "defjvp", "defjvp2", "deflinear", "deflinear2", "get_primitive_transpose",
           "instantiate_zeros", "is_undefined_primal", "jvp", "linearize", "primitive_jvps", "primitive_transposes",
           "zeros_like_aval"]

primitive_jvps = jvp_rules
primitive_transposes = transpose_rules
is_undefined_primal = is_undefined
add_jaxvals_p = add_any_p
JVPTracer = Tracer  # meshax has one Tracer class; a JVP tracer is one whose trace is a JVPTrace


def add_jaxvals(x: Any, y: Any) -> Any:
    return add_any_p.bind(x, y)


def instantiate_zeros(tangent: Any) -> Any:
    """`tangent`, with a symbolic Zero made a real array of zeros."""
    return instantiate(tangent)


def zeros_like_aval(aval: Any) -> Any:
    return zeros(aval)


def _zero_from_primal(cls: type, value: Any, instantiate: bool = False) -> Zero:
    return Zero(tangent_aval(aval_of(value)))


Zero.from_primal_value = classmethod(_zero_from_primal)  # JAX's constructor of a primal's zero tangent


def get_primitive_transpose(primitive: Any) -> Callable[..., Any]:
    try:
        return transpose_rules[primitive]
    except KeyError:
        raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for '{primitive.name}' not "
                                  "implemented") from None


def defjvp(primitive: Any, *jvp_fns: Callable[..., Any] | None) -> None:
    """A jvp rule from one function per input: jvp_fn(tangent, *primals, **params) -> that input's contribution."""
    contributions = [None if f is None else (lambda f: lambda t, ans, *primals, **params: f(t, *primals, **params))(f)
                     for f in jvp_fns]
    _defjvp(primitive, *contributions)


def defjvp2(primitive: Any, *jvp_fns: Callable[..., Any] | None) -> None:
    """Like defjvp, with the primal output too: jvp_fn(tangent, ans, *primals, **params)."""
    _defjvp(primitive, *jvp_fns)


def deflinear2(primitive: Any, transpose: Callable[..., Any]) -> None:
    """A primitive linear in all inputs; `transpose(ct, *args, **params)` gives the input cotangents."""
    deflinear(primitive, transpose)


def defbilinear(primitive: Any, lhs_rule: Callable[..., Any] | None, rhs_rule: Callable[..., Any] | None) -> None:
    """A primitive linear in each of its two inputs separately (like a product)."""
    _defjvp(primitive,
            lambda t, ans, x, y, **params: primitive.bind(instantiate(t), y, **params),
            lambda t, ans, x, y, **params: primitive.bind(x, instantiate(t), **params))

    def transpose(ct: Any, x: Any, y: Any, **params: Any) -> list[Any]:
        if is_undefined(x):
            return [None if lhs_rule is None else lhs_rule(ct, x, y, **params), None]
        return [None, None if rhs_rule is None else rhs_rule(ct, x, y, **params)]

    transpose_rules[primitive] = transpose


def jvp(fun: Callable[..., Any], primals: Any, tangents: Any) -> Any:
    from meshax._src.transforms.autodiff import jvp as _jvp

    return _jvp(fun, primals, tangents)


def linearize(fun: Callable[..., Any], *primals: Any) -> Any:
    from meshax._src.transforms.autodiff import linearize as _linearize

    return _linearize(fun, *primals)


def __getattr__(name: str):
    """Names of jax.interpreters.ad that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.interpreters.ad", name)
