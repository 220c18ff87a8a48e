"""The class of jax.lax's `*_p` names that meshax composes from its own primitives (jax_primitives.py)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core.core import Primitive


class JaxParamsPrimitive(Primitive):
    """A primitive name of jax.lax whose `bind` takes JAX's operands and parameters and returns what JAX's bind
    returns, by calling meshax's function `fn(*operands, **params)`. `required` are the parameters JAX's bind must
    get; `optional` those it defaults (name -> default)."""

    def __init__(self, name: str, fn: Callable[..., Any], required: Sequence[str] = (),
                 optional: dict[str, Any] | None = None, multiple_results: bool = False) -> None:
        super().__init__(name, multiple_results)
        self.fn = fn
        self.required = tuple(required)
        self.optional = dict(optional or {})

    def bind(self, *args: Any, **params: Any) -> Any:
        """JAX's `X_p.bind(*operands, **params)`: the same result, computed by meshax's function."""
        missing = [k for k in self.required if k not in params]
        if missing:
            raise TypeError(f"{self.name}_p.bind() is missing the parameter(s) {missing}; pass all of "
                            f"{list(self.required)} as JAX's bind takes them.")
        unknown = [k for k in params if k not in self.required and k not in self.optional]
        if unknown:
            raise TypeError(f"{self.name}_p.bind() got the unexpected parameter(s) {unknown}; it takes "
                            f"{list(self.required) + list(self.optional)}.")
        out = self.fn(*args, **{**self.optional, **params})
        return list(out) if self.multiple_results else out
