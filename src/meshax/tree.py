"""The ``jax.tree`` namespace: short names for the pytree functions of :mod:`meshax.tree_util`.

This module never imports NumPy: it only forwards to :mod:`meshax._src.tree.tree_util`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from meshax import tree_util as _public
from meshax._src.tree import tree_util as _tu

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map", "map_with_path",
           "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]

IsLeaf = Callable[[Any], bool] | None
_NO_INIT = _tu._NO_INIT


def map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:  # noqa: A001
    """``f`` applied leafwise to ``tree`` and the matching leaves (or subtrees) of ``rest``."""
    return _public.tree_map(f, tree, *rest, is_leaf=is_leaf)


def leaves(tree: Any, is_leaf: IsLeaf = None) -> list:
    """The leaves of ``tree``, in flattening order."""
    return _public.tree_leaves(tree, is_leaf)


def structure(tree: Any, is_leaf: IsLeaf = None) -> Any:
    """The PyTreeDef of ``tree``."""
    return _public.tree_structure(tree, is_leaf)


def flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list, Any]:
    """``(leaves, treedef)`` of ``tree``."""
    return _public.tree_flatten(tree, is_leaf)


def unflatten(treedef: Any, leaves: Any) -> Any:
    """The pytree of structure ``treedef`` holding ``leaves``."""
    return _tu.tree_unflatten(treedef, leaves)


def reduce(function: Callable[[Any, Any], Any], tree: Any, initializer: Any = _NO_INIT,
           is_leaf: IsLeaf = None) -> Any:  # noqa: A001
    """``functools.reduce`` over the leaves of ``tree``."""
    return _public.tree_reduce(function, tree, initializer, is_leaf)


def reduce_associative(operation: Callable[[Any, Any], Any], tree: Any, *, identity: Any = _NO_INIT,
                       is_leaf: IsLeaf = None) -> Any:
    """Combine the leaves of ``tree`` pairwise with the associative ``operation`` (a balanced tree of calls)."""
    return _public.tree_reduce_associative(operation, tree, identity=identity, is_leaf=is_leaf)


def transpose(outer_treedef: Any, inner_treedef: Any, pytree_to_transpose: Any) -> Any:
    """Turn an outer-of-inner pytree into an inner-of-outer one."""
    return _tu.tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose)


def all(tree: Any, *, is_leaf: IsLeaf = None) -> bool:  # noqa: A001
    """Whether every leaf of ``tree`` is truthy."""
    return _public.tree_all(tree, is_leaf=is_leaf)


def map_with_path(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    """Like :func:`map`, with ``f(key_path, leaf, *others)``."""
    return _public.tree_map_with_path(f, tree, *rest, is_leaf=is_leaf)


def leaves_with_path(tree: Any, is_leaf: IsLeaf = None) -> list:
    """``[(key_path, leaf), ...]`` of ``tree``."""
    return _public.tree_leaves_with_path(tree, is_leaf)


def flatten_with_path(tree: Any, is_leaf: IsLeaf = None) -> tuple[list, Any]:
    """``([(key_path, leaf), ...], treedef)`` of ``tree``."""
    return _public.tree_flatten_with_path(tree, is_leaf)


def broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf = None) -> Any:
    """``prefix_tree`` broadcast to ``full_tree``'s structure: each leaf of the prefix is repeated over the
    leaves of the corresponding subtree of ``full_tree``."""
    return _public.tree_broadcast(prefix_tree, full_tree, is_leaf)


def static(**kwargs: Any) -> Any:
    """A dataclass field (``dataclasses.field``'s arguments) marked ``static``: register_dataclass makes it node
    data rather than a child."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


def __getattr__(name: str):
    """Names of jax.tree that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.tree", name)
