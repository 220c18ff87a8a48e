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


def _one_level(tree: Any) -> tuple[Any, Any]:
    """The registered node kind of `tree`'s type; ValueError for a leaf (as JAX)."""
    from meshax._src.tree.registry import _kind_for_type

    kind = None if _is_public_leaf(tree) else _kind_for_type(type(tree))
    if kind is None:
        raise ValueError(f"can't tree-flatten type: {type(tree)}")
    return kind


def flatten_one_level(tree: Any) -> tuple[Any, Any]:
    """`tree`'s children (one level down) and its node data; ValueError when `tree` is a leaf."""
    children, aux = _one_level(tree).flatten(tree)
    if isinstance(tree, dict):
        children = tuple(children)
    elif isinstance(tree, tuple) and hasattr(type(tree), "_fields"):  # a namedtuple's children: a list, as JAX's
        children = list(children)
    return children, aux


def flatten_one_level_with_keys(tree: Any) -> tuple[Any, Any]:
    """`tree`'s children with their keys, `((key, child), ...)`, and its node data; ValueError for a leaf."""
    from meshax._src.tree.tree_util import _keyed_children

    key_children, aux = _keyed_children(_one_level(tree), tree)
    return tuple(key_children), aux


def is_tree_node(typ: type) -> bool:
    """Whether objects of type `typ` are pytree nodes (registered, builtin containers or namedtuples), not leaves."""
    from meshax._src.tree.registry import _kind_for_type

    return _kind_for_type(typ) is not None and not getattr(typ, "_meshax_public_leaf", False)


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf = None) -> Any:
    """`prefix_tree` broadcast to `full_tree`'s structure: each leaf of the prefix is repeated over the leaves of
    the matching subtree of `full_tree`."""
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = prefix_def.flatten_up_to(full_tree)
    return prefix_def.unflatten([tree_map(lambda _, value=value: value, sub, is_leaf=is_leaf)
                                 for value, sub in zip(prefix_leaves, subtrees)])


def tree_reduce_associative(operation: Callable[[Any, Any], Any], tree: Any, *, identity: Any = _tu._NO_INIT,
                            is_leaf: IsLeaf = None) -> Any:
    """The leaves of `tree` combined pairwise with the associative `operation` (a balanced tree of calls);
    `identity` for an empty tree (TypeError without it)."""
    items = tree_leaves(tree, is_leaf)
    if not items:
        if identity is _tu._NO_INIT:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    return _halves(operation, items)


def _halves(operation: Callable[[Any, Any], Any], items: list) -> Any:
    """`operation` of the reductions of the first half of `items` (rounded down) and of the rest."""
    if len(items) == 1:
        return items[0]
    middle = len(items) // 2
    return operation(_halves(operation, items[:middle]), _halves(operation, items[middle:]))


class _Registry:
    """The pytree registry as an object (jax.tree_util.default_registry): flatten and register through it."""

    def flatten(self, tree: Any, leaf_predicate: IsLeaf = None) -> tuple[list, Any]:
        return tree_flatten(tree, leaf_predicate)

    def flatten_one_level(self, tree: Any) -> tuple[Any, Any]:
        return flatten_one_level(tree)

    def flatten_one_level_with_keys(self, tree: Any) -> tuple[Any, Any]:
        return flatten_one_level_with_keys(tree)

    def flatten_with_path(self, tree: Any, leaf_predicate: IsLeaf = None) -> tuple[list, Any]:
        return tree_flatten_with_path(tree, leaf_predicate)

    def is_node(self, typ: type) -> bool:
        return is_tree_node(typ)

    def register_node(self, nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                      flatten_with_keys_func: Callable | None = None) -> None:
        _tu.register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)

    def register_dataclass_node(self, nodetype: type, data_fields: Any, meta_fields: Any) -> None:
        _tu.register_dataclass(nodetype, data_fields, meta_fields)


default_registry = _Registry()
