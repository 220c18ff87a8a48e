"""Helpers for writing transformations (as jax.api_util): flattening a function's arguments and results."""
from __future__ import annotations

from typing import Any, Callable

from meshax._src.core.core import aval_of
from meshax._src.tree.tree_util import tree_flatten, tree_unflatten
from meshax.extend.linear_util import Store, WrappedFun

__all__ = ["debug_info", "flatten_fun", "flatten_fun_nokwargs", "shaped_abstractify"]


def debug_info(traced_for: str, fun: Callable[..., Any], args: Any, kwargs: Any, **_: Any) -> str:
    """A description of `fun` for error messages."""
    return f"{traced_for} of {getattr(fun, '__qualname__', fun)}"


def flatten_fun(fun: WrappedFun, in_tree: Any) -> tuple[WrappedFun, Store]:
    """`fun` of (args, kwargs) as a function of their flat leaves returning flat leaves; the store gets the
    output tree."""
    store = Store()

    def flat(*leaves: Any) -> list[Any]:
        args, kwargs = tree_unflatten(in_tree, list(leaves))
        out_leaves, out_tree = tree_flatten(fun.call_wrapped(*args, **kwargs))
        store.store(out_tree)
        return out_leaves

    return WrappedFun(flat, debug_info=fun.debug_info), store


def flatten_fun_nokwargs(fun: WrappedFun, in_tree: Any) -> tuple[WrappedFun, Store]:
    """Like flatten_fun, for a tree of positional arguments only."""
    store = Store()

    def flat(*leaves: Any) -> list[Any]:
        args = tree_unflatten(in_tree, list(leaves))
        out_leaves, out_tree = tree_flatten(fun.call_wrapped(*args))
        store.store(out_tree)
        return out_leaves

    return WrappedFun(flat, debug_info=fun.debug_info), store


def shaped_abstractify(x: Any) -> Any:
    return aval_of(x)
