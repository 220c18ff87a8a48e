"""Pytree structures (in_tree, out_tree) as serializable data: builtin containers, and the namedtuples and custom
nodes registered for serialization under a name (as jax.export requires)."""
from __future__ import annotations

import base64
from typing import Any, Callable, TypeVar

from ..arrays.key_arrays import KeyArray
from ..tree.registry import _NoneType, _is_namedtuple_type
from ..tree.tree_util import PyTreeDef
from .wire import BlobError

T = TypeVar("T")


class _Serialization:
    """How one node type's aux data is written: its name in blobs and its two conversions."""

    def __init__(self, nodetype: type, name: str, serialize_aux: Callable[[Any], bytes],
                 deserialize_aux: Callable[[bytes], Any], from_children: Callable | None) -> None:
        self.nodetype, self.name = nodetype, name
        self.serialize_aux, self.deserialize_aux = serialize_aux, deserialize_aux
        self.from_children = from_children


_by_type: dict[type, _Serialization] = {}
_by_name: dict[str, _Serialization] = {}


def register_pytree_node_serialization(nodetype: type[T], *, serialized_name: str,
                                       serialize_auxdata: Callable[[Any], bytes],
                                       deserialize_auxdata: Callable[[bytes], Any],
                                       from_children: Callable | None = None) -> type[T]:
    """Let pytree structures holding `nodetype` be serialized, its aux data written by `serialize_auxdata` (to
    bytes) and read back by `deserialize_auxdata`, under the name `serialized_name`."""
    _register(_Serialization(nodetype, serialized_name, serialize_auxdata, deserialize_auxdata, from_children))
    return nodetype


def register_namedtuple_serialization(nodetype: type[T], *, serialized_name: str) -> type[T]:
    """Let pytree structures holding the namedtuple class `nodetype` be serialized, under `serialized_name`."""
    if not _is_namedtuple_type(nodetype):
        raise ValueError("Use `jax.export.register_pytree_node_serialization` for types other than "
                         "`collections.namedtuple`.")
    _register(_Serialization(nodetype, serialized_name, lambda aux: b"", lambda data: nodetype, None))
    return nodetype


def _register(entry: _Serialization) -> None:
    previous = _by_type.get(entry.nodetype)
    if previous is not None:
        raise ValueError(f"Duplicate serialization registration for type `{entry.nodetype}`. Previous "
                         f"registration was with serialized_name `{previous.name}`.")
    if entry.name in _by_name:
        raise ValueError(f"Duplicate serialization registration for serialized_name `{entry.name}`. Previous "
                         f"registration was for type `{_by_name[entry.name].nodetype}`.")
    _by_type[entry.nodetype] = _by_name[entry.name] = entry


def encode_tree(tree: PyTreeDef) -> Any:
    """A pytree structure as JSON data; ValueError/TypeError for a node type or key that can't be serialized."""
    kind = tree._type
    children = [encode_tree(c) for c in tree._children]
    if kind is None:
        return "*"
    if kind is _NoneType:
        return "None"
    if kind is tuple or kind is list:
        return {kind.__name__: children}
    if kind is dict:
        for key in tree._aux:
            if not isinstance(key, str):
                raise TypeError(f"Serialization is supported only for dictionaries with string keys. Found key "
                                f"{key!r} of type {type(key)}.")
        return {"dict": [list(tree._aux), children]}
    entry = _by_type.get(kind)
    if entry is None:
        raise ValueError(f"Cannot serialize PyTreeDef containing an unregistered type `{kind}`. Use "
                         "`export.register_pytree_node_serialization` or `export.register_namedtuple_serialization`.")
    aux = entry.serialize_aux(tree._aux)
    if not isinstance(aux, (bytes, bytearray)):
        raise TypeError(f"serialize_auxdata of `{kind}` returned {type(aux).__name__}; it must return bytes.")
    return {"custom": [entry.name, base64.b64encode(bytes(aux)).decode(), children]}


def decode_tree(data: Any) -> PyTreeDef:
    """The pytree structure written by `encode_tree`; BlobError for an unknown node name or malformed data."""
    from ..tree.tree_util import tree_structure

    if data == "*":
        return tree_structure(0)
    if data == "None":
        return tree_structure(None)
    try:
        (kind, body), = data.items()
        if kind in ("tuple", "list"):
            return PyTreeDef(tuple if kind == "tuple" else list, None, tuple(decode_tree(c) for c in body))
        if kind == "dict":
            keys, children = body
            if len(keys) != len(children) or not all(isinstance(k, str) for k in keys):
                raise ValueError("dictionary keys and children differ")
            return PyTreeDef(dict, tuple(keys), tuple(decode_tree(c) for c in children))
        if kind == "custom":
            name, aux, children = body
            entry = _by_name.get(name)
            if entry is None:
                raise BlobError(f"deserialize: the blob's pytrees hold the node type serialized as {name!r}, which "
                                "this process has not registered; call export.register_pytree_node_serialization "
                                "(or register_namedtuple_serialization) for it before deserializing.")
            return PyTreeDef(entry.nodetype, entry.deserialize_aux(base64.b64decode(aux)),
                             tuple(decode_tree(c) for c in children))
    except (AttributeError, IndexError, ValueError, TypeError) as error:
        if isinstance(error, BlobError):
            raise
        raise BlobError(f"deserialize: a pytree structure in the blob is malformed ({error}); it is corrupt.") \
            from None
    raise BlobError(f"deserialize: unknown pytree node kind {kind!r} in the blob; it is corrupt.")


register_pytree_node_serialization(KeyArray, serialized_name="meshax.KeyArray", serialize_auxdata=lambda aux: b"",
                                   deserialize_auxdata=lambda data: None)
