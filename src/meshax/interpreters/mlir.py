"""Lowering registration (as jax.interpreters.mlir). meshax runs primitives with NumPy, not through XLA, so a
lowering given as `lower_fun(f)` is `f` itself: it becomes the primitive's implementation. A raw MLIR lowering
rule cannot run in meshax; registering one is accepted (libraries register them at import) and a primitive
with nothing else to run fails clearly when evaluated."""
from __future__ import annotations

from typing import Any, Callable

from meshax._src.interpreters.staging import inline_rules

__all__ = ["lower_fun", "register_lowering"]


class LoweredFunction:
    """A lowering written as a Python function of the primitive's operands (what `lower_fun` returns)."""

    def __init__(self, fun: Callable[..., Any], multiple_results: bool) -> None:
        self.fun = fun
        self.multiple_results = multiple_results


def lower_fun(fun: Callable[..., Any], multiple_results: bool = True) -> LoweredFunction:
    return LoweredFunction(fun, multiple_results)


def register_lowering(primitive: Any, rule: Any, platform: str | None = None, **_: Any) -> Any:
    """Use a `lower_fun` lowering as the primitive's implementation when it has none."""
    if isinstance(rule, LoweredFunction) and primitive not in inline_rules:
        inline_rules[primitive] = rule.fun
    return rule
