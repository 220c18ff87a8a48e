"""Custom derivative rules (as jax.custom_derivatives): custom_jvp, custom_vjp and their call primitives."""
from __future__ import annotations

from typing import Any

from meshax._src.compat.top_level import closure_convert, custom_gradient
from meshax._src.core.core import aval_of
from meshax._src.transforms.custom_derivatives import custom_jvp, custom_jvp_call_p, custom_vjp, custom_vjp_call_p
from meshax._src.transforms.symbolic_zeros import CustomVJPPrimal, SymbolicZero
from meshax._src.compat.small_modules import custom_vjp_primal_tree_values, linear_call, remat_opt_p

__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp", "custom_jvp_call_p",
           "custom_vjp", "custom_vjp_call_p", "custom_vjp_primal_tree_values", "linear_call", "remat_opt_p",
           "zero_from_primal"]


def zero_from_primal(value: Any, symbolic_zeros: bool = False) -> Any:
    """The zero tangent of `value`: a SymbolicZero, or an array of zeros."""
    from meshax._src.interpreters.ad import tangent_aval, zeros

    aval = tangent_aval(aval_of(value))
    return SymbolicZero(aval) if symbolic_zeros else zeros(aval)
