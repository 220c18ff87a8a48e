"""Pytree utilities, mirroring ``jax.tree_util``.

As in JAX, a typed PRNG key array (``meshax.random.key``) is a leaf for these functions; inside meshax's
transformations it is a node over its uint32 key data (which is how keys pass through jit, vmap and shard_map).
"""
from typing import Any, Callable

from meshax._src.tree import tree_util as _tu
from meshax._src.tree.tree_util import *  # noqa: F401,F403
from meshax._src.tree.tree_util import __all__  # noqa: F401

IsLeaf = Callable[[Any], bool] | None


def _is_public_leaf(x: Any) -> bool:
    """Whether `x` is a leaf although it is a registered node inside meshax (a typed key array)."""
    return getattr(type(x), "_meshax_public_leaf", False)


def _with_public_leaves(is_leaf: IsLeaf) -> Callable[[Any], bool]:
    if is_leaf is None:
        return _is_public_leaf
    return lambda x: _is_public_leaf(x) or is_leaf(x)


def tree_flatten(tree: Any, is_leaf: IsLeaf = None) -> tuple[list, Any]:
    return _tu.tree_flatten(tree, _with_public_leaves(is_leaf))


def tree_leaves(tree: Any, is_leaf: IsLeaf = None) -> list:
    return _tu.tree_leaves(tree, _with_public_leaves(is_leaf))


def tree_structure(tree: Any, is_leaf: IsLeaf = None) -> Any:
    return _tu.tree_structure(tree, _with_public_leaves(is_leaf))


def tree_map(f: Callable, tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    return _tu.tree_map(f, tree, *rest, is_leaf=_with_public_leaves(is_leaf))


def tree_flatten_with_path(tree: Any, is_leaf: IsLeaf = None) -> tuple[list, Any]:
    return _tu.tree_flatten_with_path(tree, _with_public_leaves(is_leaf))


def tree_leaves_with_path(tree: Any, is_leaf: IsLeaf = None) -> list:
    return _tu.tree_leaves_with_path(tree, _with_public_leaves(is_leaf))


def tree_map_with_path(f: Callable, tree: Any, *rest: Any, is_leaf: IsLeaf = None) -> Any:
    return _tu.tree_map_with_path(f, tree, *rest, is_leaf=_with_public_leaves(is_leaf))


def tree_reduce(function: Callable, tree: Any, initializer: Any = _tu._NO_INIT, is_leaf: IsLeaf = None) -> Any:
    return _tu.tree_reduce(function, tree, initializer, _with_public_leaves(is_leaf))


def tree_all(tree: Any, *, is_leaf: IsLeaf = None) -> bool:
    return _tu.tree_all(tree, is_leaf=_with_public_leaves(is_leaf))


def all_leaves(iterable: Any, is_leaf: IsLeaf = None) -> bool:
    return _tu.all_leaves(iterable, _with_public_leaves(is_leaf))
