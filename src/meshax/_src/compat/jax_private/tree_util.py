"""jax._src.tree_util for the alias: meshax's pytree functions, and `_registry`, the registered node types as
JAX's registry holds them (flax tests membership of it): typed key arrays, which are nodes inside meshax, are
leaves there as in JAX."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from meshax._src.tree.registry import _registry as _node_kinds
from meshax.tree_util import *  # noqa: F401,F403


def _public(node_type: type) -> bool:
    return not getattr(node_type, "_meshax_public_leaf", False)


class _PublicRegistry(Mapping):
    """A read-only view of meshax's node registry without the types that are leaves for JAX's functions."""

    def __getitem__(self, node_type: type) -> Any:
        if not _public(node_type):
            raise KeyError(node_type)
        return _node_kinds[node_type]

    def __iter__(self) -> Iterator[type]:
        return (t for t in list(_node_kinds) if _public(t))

    def __len__(self) -> int:
        return sum(1 for _ in self)


_registry = _PublicRegistry()
