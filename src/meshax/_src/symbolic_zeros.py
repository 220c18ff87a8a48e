"""custom_vjp rules defined with symbolic_zeros=True: the types their fwd and bwd see (as JAX's)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .tree_util import tree_map


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


def wrap_symbolic(fwd: Callable[..., Any], bwd: Callable[..., Any], nondiff_argnums: Sequence[int]
                  ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """fwd and bwd as meshax calls them: fwd gets every differentiable input as a CustomVJPPrimal (meshax counts
    every such input as perturbed, so bwd computes all cotangents); zero cotangents bwd returns as SymbolicZero
    count as None."""

    def fwd_plain(*args: Any) -> Any:
        wrapped = [a if i in nondiff_argnums else tree_map(lambda x: CustomVJPPrimal(x, True), a)
                   for i, a in enumerate(args)]
        return fwd(*wrapped)

    def bwd_plain(*args: Any) -> Any:
        cts = bwd(*args)
        return tree_map(lambda c: None if isinstance(c, SymbolicZero) else c, cts,
                        is_leaf=lambda c: isinstance(c, SymbolicZero))

    return fwd_plain, bwd_plain
