"""Elementwise primitives for jax.scipy.special functions without a lax counterpart: each computes with a NumPy or
SciPy kernel in double precision and rounds to the operands' dtype; the callers attach derivatives (`defjvp`)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.core import Primitive, ShapedArray, aval_of, define_primitive
from ..core.dtypes import issubdtype
from ..interpreters.batching import batching_rules
from ..lax.batching_rules import _elementwise
from ..sharding import placement_rules as rules
from .. import numpy as jnp
from ..numpy import _promote_inexact


def _complex_of(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.result_type(dtype, np.complex64))


def kernel(name: str, function: Callable[..., Any], complex_result: bool = False, widen: bool = True) -> Primitive:
    """A primitive computing `function` (NumPy arrays in, one array out) in float64 (complex128 for complex
    operands; in the operands' own dtype unless `widen`), rounded to the operands' dtype, or to its complex
    counterpart when `complex_result`."""

    def out_dtype(dtype: np.dtype) -> np.dtype:
        return _complex_of(dtype) if complex_result else np.dtype(dtype)

    def impl(*xs: np.ndarray, **_: Any) -> np.ndarray:
        wide = np.complex128 if issubdtype(xs[0].dtype, np.complexfloating) else np.float64
        wide = wide if widen else xs[0].dtype
        with np.errstate(all="ignore"):
            out = function(*(np.asarray(x, wide) for x in xs))
        return np.asarray(out).astype(out_dtype(xs[0].dtype))

    def aval(x: ShapedArray, *rest: ShapedArray, **_: Any) -> ShapedArray:
        return ShapedArray(rules.broadcast_shapes(x.shape, *[r.shape for r in rest]), out_dtype(x.dtype), False)

    primitive = define_primitive(name, impl, aval, rules.elementwise)
    batching_rules[primitive] = _elementwise(primitive)
    return primitive


def scipy_kernel(name: str, complex_result: bool = False) -> Primitive:
    """A `kernel` computing SciPy's special function `name` (SciPy imported on first use)."""

    def function(*xs: np.ndarray) -> np.ndarray:
        import scipy.special

        return getattr(scipy.special, name)(*xs)

    return kernel(name, function, complex_result)


def inexact(name: str, *args: Any, real: bool = True) -> list[Any]:
    """The arguments promoted to one inexact dtype and broadcast to one shape; complex ones raise ValueError
    when `real` (as JAX's functions that do not take them)."""
    args = _promote_inexact(*args)
    if real and issubdtype(aval_of(args[0]).dtype, np.complexfloating):
        raise ValueError(f"{name} takes real arguments; got dtype {aval_of(args[0]).dtype}: pass real values.")
    return list(jnp.broadcast_arrays(*args)) if len(args) > 1 else args


def const(value: Any, like: Any) -> Any:
    """`value` as an array of `like`'s dtype."""
    return np.asarray(value, aval_of(like).dtype)

