"""Custom derivative rules (as jax.custom_derivatives): custom_jvp, custom_vjp and their call primitives."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshax._src.api_extra import closure_convert, custom_gradient
from meshax._src.core import ShapedArray, aval_of
from meshax._src.custom_derivatives import custom_jvp, custom_jvp_call_p, custom_vjp, custom_vjp_call_p

__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp", "custom_jvp_call_p",
           "custom_vjp", "custom_vjp_call_p", "zero_from_primal"]


class SymbolicZero:
    """A tangent or cotangent known to be zero, of abstract value `aval` (for rules defined with
    symbolic_zeros=True)."""

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    def __repr__(self) -> str:
        return f"SymbolicZero({self.aval})"


@dataclass
class CustomVJPPrimal:
    """A primal input of a custom_vjp fwd rule defined with symbolic_zeros=True: its value and whether it is
    perturbed (differentiated)."""

    value: Any
    perturbed: bool


def zero_from_primal(value: Any, symbolic_zeros: bool = False) -> Any:
    """The zero tangent of `value`: a SymbolicZero, or an array of zeros."""
    from meshax._src.interpreters.ad import tangent_aval, zeros

    aval = tangent_aval(aval_of(value))
    return SymbolicZero(aval) if symbolic_zeros else zeros(aval)
