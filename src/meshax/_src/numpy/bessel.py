"""jnp.i0, the modified Bessel function of the first kind of order zero, from the exponentially scaled one (it
sits just above lax, though jnp's namespace holds it)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.core import ShapedArray, aval_of, define_primitive
from ..core.dtypes import issubdtype
from ..interpreters.ad import defjvp
from ..interpreters.batching import batching_rules
from ..lax import lax_ops
from ..lax.batching_rules import _elementwise
from ..lax.special import bessel_i1e
from ..sharding import placement_rules as rules
from .promotion import ArrayLike, _as_array, _promote_inexact

__all__ = ["i0"]


def _i0_impl(x: np.ndarray) -> np.ndarray:
    """exp(|x|) i0e(x) in x's precision: infinite where exp(|x|) overflows, NaN at +-inf (as JAX computes it)."""
    import scipy.special

    with np.errstate(all="ignore"):
        return (np.exp(np.abs(x)) * scipy.special.i0e(x.astype(np.float64)).astype(x.dtype)).astype(x.dtype)


_i0_p = define_primitive("i0", _i0_impl, lambda x: ShapedArray(x.shape, x.dtype, x.weak_type), rules.elementwise)
batching_rules[_i0_p] = _elementwise(_i0_p)
defjvp(_i0_p, lambda g, ans, x: lax_ops.mul(g, lax_ops.mul(lax_ops.exp(lax_ops.abs(x)), bessel_i1e(x))))


def i0(x: ArrayLike) -> Any:
    """I_0(x) of real x; its derivative is I_1(x) (0 at x = 0)."""
    (x,) = (_as_array(v) for v in _promote_inexact(x))
    if issubdtype(aval_of(x).dtype, np.complexfloating):
        raise ValueError(f"i0 takes real values; got dtype {aval_of(x).dtype}: pass the real part.")
    return _i0_p.bind(x)
