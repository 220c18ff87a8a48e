"""custom_vjp rules defined with symbolic_zeros=True: the types their fwd and bwd see (as JAX's)."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from ..tree.tree_util import tree_map


class SymbolicZero:
    """A tangent or cotangent known to be zero, of abstract value `aval`."""

    def __init__(self, aval: Any) -> None:
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    def __repr__(self) -> str:
        return f"SymbolicZero({self.aval})"


@dataclass
class CustomVJPPrimal:
    """A primal input of a fwd rule defined with symbolic_zeros=True: its value and whether it is perturbed."""

    value: Any
    perturbed: bool


def wrap_symbolic(fwd: Callable[..., Any], bwd: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """fwd marked to get its differentiable inputs as CustomVJPPrimal leaves (custom_vjp's forward rule wraps
    them, knowing which tangents are zero); bwd whose SymbolicZero cotangents count as None (zero)."""

    @functools.wraps(fwd)
    def fwd_marked(*args: Any) -> Any:
        return fwd(*args)

    fwd_marked.symbolic_zeros = True

    def bwd_plain(*args: Any) -> Any:
        cts = bwd(*args)
        return tree_map(lambda c: None if isinstance(c, SymbolicZero) else c, cts,
                        is_leaf=lambda c: isinstance(c, SymbolicZero))

    return fwd_marked, bwd_plain
