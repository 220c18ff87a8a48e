"""Pytree node registry: key-path entries, built-in node kinds and ``register_pytree_*``."""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Hashable, Iterable, TypeVar

_NoneType = type(None)


# ---------------------------------------------------------------------------
# Key path entries
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """Key of a child of a tuple/list: ``[idx]``."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    """Key of a child of a dict-like node: ``[key]``."""
    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """Key of an attribute-like child (namedtuple fields, dataclasses): ``.name``."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """Positional key of a child of a custom node registered without keys."""
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = TypeVar("KeyEntry", bound=Any)  # one step of a key path (SequenceKey, DictKey, ...)
KeyPath = tuple[KeyEntry, ...]


def _simple_entrystr(key: Any) -> str:
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, DictKey):
        return str(key.key)
    if isinstance(key, GetAttrKey):
        return str(key.name)
    if isinstance(key, FlattenedIndexKey):
        return str(key.key)
    return str(key)


def keystr(keys: Iterable[Any], *, simple: bool = False, separator: str = "") -> str:
    """Render a key path, e.g. ``"[1]['a'].x"`` (or ``"1/a/x"`` with
    ``simple=True, separator='/'``)."""
    if simple:
        return separator.join(_simple_entrystr(k) for k in keys)
    return separator.join(str(k) for k in keys)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

class _NodeKind:
    """How to flatten / unflatten one node type."""
    __slots__ = ("type", "flatten", "unflatten", "flatten_with_keys", "name")

    def __init__(self, type_, flatten, unflatten, flatten_with_keys=None, name=None):
        self.type = type_
        self.flatten = flatten  # x -> (children, aux)
        self.unflatten = unflatten  # (aux, children) -> x
        self.flatten_with_keys = flatten_with_keys  # x -> ([(key, child)], aux) or None
        self.name = name if name is not None else getattr(type_, "__name__", repr(type_))


_registry: dict[type, _NodeKind] = {}


def _sorted_keys(d) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError as e:
        raise ValueError(
            "Comparator raised exception while sorting pytree dictionary keys."
        ) from e


def _dict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _dict_flatten_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], keys


def _odict_flatten(d):
    return list(d.values()), tuple(d.keys())


def _odict_flatten_with_keys(d):
    return [(DictKey(k), v) for k, v in d.items()], tuple(d.keys())


def _ddict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


def _ddict_flatten_with_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, keys)


def _seq_flatten_with_keys(s):
    return [(SequenceKey(i), c) for i, c in enumerate(s)], None


def _install_builtins() -> None:
    _registry[tuple] = _NodeKind(
        tuple, lambda t: (t, None), lambda _, c: tuple(c), _seq_flatten_with_keys)
    _registry[list] = _NodeKind(
        list, lambda t: (t, None), lambda _, c: list(c), _seq_flatten_with_keys)
    _registry[dict] = _NodeKind(
        dict, _dict_flatten, lambda keys, c: dict(zip(keys, c)), _dict_flatten_with_keys)
    _registry[_NoneType] = _NodeKind(
        _NoneType, lambda _: ((), None), lambda _a, _c: None, lambda _: ((), None))
    _registry[collections.OrderedDict] = _NodeKind(
        collections.OrderedDict, _odict_flatten,
        lambda keys, c: collections.OrderedDict(zip(keys, c)), _odict_flatten_with_keys)
    _registry[collections.defaultdict] = _NodeKind(
        collections.defaultdict, _ddict_flatten,
        lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)),
        _ddict_flatten_with_keys)


_install_builtins()

# Namedtuples are recognised structurally (tuple subclass with ``_fields``);
# their aux data is the namedtuple type itself.
_NAMEDTUPLE = _NodeKind(
    tuple,
    lambda t: (tuple(t), type(t)),
    lambda nt_type, c: nt_type(*c),
    lambda t: ([(GetAttrKey(f), c) for f, c in zip(type(t)._fields, t)], type(t)),
    name="namedtuple",
)


def _is_namedtuple_type(t: type) -> bool:
    return issubclass(t, tuple) and hasattr(t, "_fields")


def _kind_for_type(t: type) -> _NodeKind | None:
    try:
        return _kinds_seen[t]
    except KeyError:
        kind = _registry.get(t)
        if kind is None and _is_namedtuple_type(t):
            kind = _NAMEDTUPLE
        if len(_kinds_seen) >= 4096:  # types made on the fly (a namedtuple per call) must not pile up
            _kinds_seen.clear()
        _kinds_seen[t] = kind
        return kind


# each type asked about -> its kind (None: a leaf), forgotten whenever a type is registered
_kinds_seen: dict[type, _NodeKind | None] = {}


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         flatten_with_keys_func: Callable | None = None) -> None:
    """Register ``nodetype`` as a pytree node.

    ``flatten_func(x) -> (children, aux_data)``; ``unflatten_func(aux_data, children) -> x``;
    optional ``flatten_with_keys_func(x) -> ([(key, child), ...], aux_data)``.
    """
    if nodetype in _registry:
        raise ValueError(f"Duplicate custom PyTreeDef type registration for {nodetype}.")
    _registry[nodetype] = _NodeKind(nodetype, flatten_func, unflatten_func,
                                    flatten_with_keys_func)
    _kinds_seen.clear()


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Register ``nodetype`` with a key-aware flatten function."""
    if flatten_func is None:
        def flatten_func(x):
            key_children, aux = flatten_with_keys(x)
            return [c for _, c in key_children], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: register via ``tree_flatten`` method and ``tree_unflatten`` classmethod."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: register via ``tree_flatten_with_keys`` / ``tree_unflatten``
    (and ``tree_flatten`` if defined)."""
    flatten = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(),
                              cls.tree_unflatten, flatten)
    return cls


def register_static(cls: type) -> type:
    """Register ``cls`` as a pytree node with no children: an instance (which must be hashable) is
    static aux data, so transformations treat it as a constant."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _: x)
    return cls


def register_dataclass(nodetype: type, data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None,
                       drop_fields: Iterable[str] = ()) -> type:
    """Register a dataclass-like type: ``data_fields`` are children, ``meta_fields``
    are static aux data.  For dataclasses the fields may be inferred: fields with
    ``metadata={'static': True}`` are meta, other init fields are data."""
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required "
                            "for non-dataclass types")
        data, meta = [], []
        for f in dataclasses.fields(nodetype):
            if not f.init or f.name in drop_fields:
                continue
            (meta if f.metadata.get("static", False) else data).append(f.name)
        data_fields = data if data_fields is None else data_fields
        meta_fields = meta if meta_fields is None else meta_fields
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)

    def flatten(x):
        return ([getattr(x, n) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def flatten_with_keys(x):
        return ([(GetAttrKey(n), getattr(x, n)) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(aux, children):
        kwargs = dict(zip(meta_fields, aux))
        kwargs.update(zip(data_fields, children))
        return nodetype(**kwargs)

    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)
    return nodetype
