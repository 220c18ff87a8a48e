"""Numerical integration (as jax.scipy.integrate)."""
from __future__ import annotations

from typing import Any

from .. import numpy as jnp
from ..numpy import _promote_inexact
from ..numpy import numerics as _numerics


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """The integral of y along axis by the trapezoidal rule, at sample points x (else spaced dx apart); y and x
    are promoted together before any arithmetic."""
    if x is not None:
        y, x = _promote_inexact(jnp.asarray(y), jnp.asarray(x))
    return _numerics.trapezoid(y, x=x, dx=dx, axis=axis)
