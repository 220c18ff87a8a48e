"""Pytrees: nested containers of leaves, with the semantics of ``jax.tree_util``.

A pytree is a nested structure of *nodes* (tuples, lists, dicts, ``None``,
``OrderedDict``, ``defaultdict``, namedtuples and any registered type) whose
non-node contents are *leaves*.  ``tree_flatten`` turns a pytree into a flat
list of leaves plus a :class:`PyTreeDef` describing the structure;
``tree_unflatten`` reverses that.

Notable semantics (matching JAX):

* ``None`` is a node with no children, so it never appears among the leaves.
* ``dict`` and ``defaultdict`` children are ordered by sorted key; unflattening
  rebuilds the dict in that sorted order.  ``OrderedDict`` keeps insertion order.
* Subclasses of the builtin containers are leaves unless registered, except
  namedtuples (tuple subclasses with ``_fields``) which are nodes of their type.
* ``tree_map(f, tree, *rest)`` requires every tree in ``rest`` to have ``tree``'s
  structure as a prefix: where ``tree`` has a leaf, the whole corresponding
  subtree of the others is passed to ``f``.

The implementation is a small recursive one over a registry keyed by exact type
(the registry and key-path entries live in :mod:`meshax._src.tree.registry`).
``PyTreeDef`` objects are immutable, hashable and picklable (custom node types
are looked up in the registry by type when unflattening).
"""
from __future__ import annotations

import collections
import functools
from typing import Any, Callable, Iterable

from .registry import (  # public names are re-exported via __all__
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    SequenceKey,
    _NAMEDTUPLE,
    _NodeKind,
    _NoneType,
    _kind_for_type,
    _sorted_keys,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    register_pytree_with_keys_class,
    register_static,
)

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "PyTreeDef",
    "SequenceKey",
    "all_leaves",
    "keystr",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "tree_all",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_structure",
    "tree_transpose",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_tuple",
]


# ---------------------------------------------------------------------------
# PyTreeDef
# ---------------------------------------------------------------------------

def _safe_eq(a, b) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # e.g. numpy arrays in aux data
        return False


def _aux_shape(aux: Any) -> Any:
    """A hashable stand-in for unhashable aux data: its type, and its keys if it is a dict."""
    return (type(aux), tuple(aux) if isinstance(aux, dict) else None)


class PyTreeDef:
    """Immutable description of a pytree's structure.

    ``_type`` is ``None`` for a leaf, else the node's type; ``_aux`` is the node's
    auxiliary data (dict keys, namedtuple type, custom aux); ``_children`` is a
    tuple of child treedefs.
    """
    __slots__ = ("_type", "_aux", "_children", "num_leaves", "num_nodes", "_hash")

    def __init__(self, type_, aux, children: tuple):
        self._type = type_
        self._aux = aux
        self._children = children
        if type_ is None:
            self.num_leaves, self.num_nodes = 1, 1
        else:
            nl, nn = 0, 1
            for c in children:
                nl += c.num_leaves
                nn += c.num_nodes
            self.num_leaves, self.num_nodes = nl, nn
        self._hash = None

    # -- pickling (slots without __dict__) --
    def __reduce__(self):
        return (PyTreeDef, (self._type, self._aux, self._children))

    # -- structure queries --
    def children(self) -> list[PyTreeDef]:
        return list(self._children)

    def node_data(self):
        if self._type is None:
            return None
        if self._type is dict:
            return (dict, list(self._aux))
        return (self._type, self._aux)

    # -- (un)flattening --
    def unflatten(self, leaves: Iterable[Any]) -> Any:
        leaves = list(leaves)
        n = len(leaves)
        if n != self.num_leaves:
            which = "few" if n < self.num_leaves else "many"
            raise ValueError(f"Too {which} leaves for PyTreeDef; expected "
                             f"{self.num_leaves}, got {n}")
        return _unflatten(self, iter(leaves))

    def flatten_up_to(self, xs: Any) -> list:
        """Flatten ``xs`` to this treedef's leaves: each leaf position of ``self``
        yields the whole corresponding subtree of ``xs``."""
        out: list = []
        try:
            _flatten_up_to(self, xs, out)
        except _StructureMismatch as e:
            raise ValueError(e.render("tree")) from None
        return out

    # -- comparison --
    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return (self._type is other._type
                and self.num_leaves == other.num_leaves
                and self.num_nodes == other.num_nodes
                and _safe_eq(self._aux, other._aux)
                and self._children == other._children)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            try:
                h = hash((self._type, self._aux, self._children))
            except TypeError:  # unhashable aux data (a dict, a list), as JAX allows: equality still compares it
                h = hash((self._type, _aux_shape(self._aux), self._children))
            self._hash = h
        return h

    # -- printing --
    def _str(self) -> str:
        t = self._type
        if t is None:
            return "*"
        if t is _NoneType:
            return "None"
        kids = [c._str() for c in self._children]
        if t is tuple:
            if len(kids) == 1:
                return f"({kids[0]},)"
            return "(" + ", ".join(kids) + ")"
        if t is list:
            return "[" + ", ".join(kids) + "]"
        if t is dict:
            return "{" + ", ".join(f"{k!r}: {s}" for k, s in zip(self._aux, kids)) + "}"
        kind = _kind_for_type(t)
        if kind is _NAMEDTUPLE:
            head = f"namedtuple[{t.__name__}]"
        else:
            name = kind.name if kind is not None else getattr(t, "__name__", repr(t))
            head = f"{name}[{self._aux}]"
        return f"CustomNode({head}, [" + ", ".join(kids) + "])"

    def __repr__(self) -> str:
        return f"PyTreeDef({self._str()})"

    __str__ = __repr__


_LEAF = PyTreeDef(None, None, ())
_NONE = PyTreeDef(_NoneType, None, ())


# ---------------------------------------------------------------------------
# Core recursion
# ---------------------------------------------------------------------------

def _flatten(x, is_leaf, leaves: list) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    t = type(x)
    if t is tuple or t is list:
        return _node(t, None, tuple([_flatten(c, is_leaf, leaves) for c in x]))
    if t is dict:
        keys = _sorted_keys(x)
        return _node(dict, keys, tuple([_flatten(x[k], is_leaf, leaves) for k in keys]))
    if x is None:
        return _NONE
    kind = _kind_for_type(t)
    if kind is None:
        leaves.append(x)
        return _LEAF
    children, aux = kind.flatten(x)
    made = _node if kind is _NAMEDTUPLE else PyTreeDef  # a namedtuple's aux is its type
    return made(t, aux, tuple([_flatten(c, is_leaf, leaves) for c in children]))


def _node(t: type, aux: Any, children: tuple) -> PyTreeDef:
    """The one PyTreeDef of a tuple, list, dict (aux: its keys) or namedtuple (aux: its type) node with these
    children: flattening the same structure again gives the same object, whose hash is kept and whose equality
    is identity (a jitted call's cache key hashes and compares its arguments' structure on every call)."""
    key = (t, aux, children, tuple(map(type, aux)) if t is dict else None)  # keys 1 and 1.0 are equal, not alike
    try:
        found = _interned.get(key)
    except TypeError:  # an unhashable dict key
        return PyTreeDef(t, aux, children)
    if found is None:
        if len(_interned) >= 8192:
            _interned.clear()
        found = _interned[key] = PyTreeDef(t, aux, children)
    return found


_interned: dict[tuple, PyTreeDef] = {}


def _keyed_children(kind: _NodeKind, x):
    if kind.flatten_with_keys is not None:
        key_children, aux = kind.flatten_with_keys(x)
        key_children = list(key_children)
    else:
        children, aux = kind.flatten(x)
        key_children = [(FlattenedIndexKey(i), c) for i, c in enumerate(children)]
    return key_children, aux


def _flatten_with_path(x, is_leaf, path: tuple, out: list) -> PyTreeDef:
    if is_leaf is not None and is_leaf(x):
        out.append((path, x))
        return _LEAF
    t = type(x)
    kind = _kind_for_type(t)
    if kind is None:
        out.append((path, x))
        return _LEAF
    if t is _NoneType:
        return _NONE
    key_children, aux = _keyed_children(kind, x)
    return PyTreeDef(t, aux, tuple([_flatten_with_path(c, is_leaf, path + (k,), out)
                                    for k, c in key_children]))


def _unflatten(td: PyTreeDef, it) -> Any:
    t = td._type
    if t is None:
        return next(it)
    children = [_unflatten(c, it) for c in td._children]
    if t is tuple:
        return tuple(children)
    if t is list:
        return children
    if t is dict:
        return dict(zip(td._aux, children))
    if t is _NoneType:
        return None
    kind = _kind_for_type(t)
    if kind is None:
        raise ValueError(f"Cannot unflatten PyTreeDef: node type {t} is not registered "
                         "as a pytree node in this process.")
    return kind.unflatten(td._aux, tuple(children))


class _StructureMismatch(Exception):
    """Raised inside ``_flatten_up_to``; collects the key path while unwinding."""

    def __init__(self, msg: str):
        super().__init__(msg)
        self.msg = msg
        self.path: list = []  # innermost first

    def render(self, what: str) -> str:
        path = keystr(reversed(self.path))
        return f"pytree structure mismatch at key path {what}{path}: {self.msg}"


def _type_desc(t) -> str:
    if t is None:
        return "a leaf"
    if t is _NoneType:
        return "None"
    return f"{t!r}"


def _child_key(td: PyTreeDef, x, i: int):
    t = td._type
    if t is tuple or t is list:
        return SequenceKey(i)
    if t is dict or t is collections.OrderedDict:
        return DictKey(td._aux[i])
    if t is collections.defaultdict:
        return DictKey(td._aux[1][i])
    kind = _kind_for_type(t)
    try:
        return _keyed_children(kind, x)[0][i][0]
    except Exception:
        return FlattenedIndexKey(i)


def _flatten_up_to(td: PyTreeDef, x, out: list) -> None:
    t = td._type
    if t is None:
        out.append(x)
        return
    xt = type(x)
    if xt is not t:
        raise _StructureMismatch(f"expected a node of type {_type_desc(t)}, got a "
                                 f"{'node' if _kind_for_type(xt) else 'leaf'} of type {xt!r}")
    if t is _NoneType:
        return
    if t is tuple or t is list:
        children = x
        if len(x) != len(td._children):
            raise _StructureMismatch(f"expected {t.__name__} of length {len(td._children)}, "
                                     f"got length {len(x)}")
    elif t is dict:
        keys = _sorted_keys(x)
        if keys != td._aux:
            raise _StructureMismatch(f"expected dict with keys {list(td._aux)!r}, "
                                     f"got keys {list(keys)!r}")
        children = [x[k] for k in keys]
    else:
        kind = _kind_for_type(t)
        children, aux = kind.flatten(x)
        children = list(children)
        if not _safe_eq(aux, td._aux):
            raise _StructureMismatch(f"node of type {t!r} has aux data {aux!r}, "
                                     f"expected {td._aux!r}")
        if len(children) != len(td._children):
            raise _StructureMismatch(f"node of type {t!r} has {len(children)} children, "
                                     f"expected {len(td._children)}")
    for i, (ctd, c) in enumerate(zip(td._children, children)):
        try:
            _flatten_up_to(ctd, c, out)
        except _StructureMismatch as e:
            e.path.append(_child_key(td, x, i))
            raise


def _structure_or_error(tree) -> str:
    try:
        return repr(tree_structure(tree))
    except Exception as e:  # pragma: no cover - e.g. unsortable keys
        return f"<unflattenable: {e}>"


def _flatten_rest(treedef: PyTreeDef, tree, rest: tuple, fname: str) -> list[list]:
    all_leaves = []
    for i, r in enumerate(rest, start=1):
        out: list = []
        try:
            _flatten_up_to(treedef, r, out)
        except _StructureMismatch as e:
            raise ValueError(
                f"{fname}: tree #{i} of the extra arguments does not match the structure "
                f"of the first tree (which must be a prefix of it).\n"
                f"  first tree structure: {treedef!r}\n"
                f"  tree #{i} structure:   {_structure_or_error(r)}\n"
                f"  {e.render('tree')}") from None
        all_leaves.append(out)
    return all_leaves


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------

def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """Return ``(leaves, treedef)``."""
    leaves: list = []
    treedef = _flatten(tree, is_leaf, leaves)
    return leaves, treedef


def prefix_leaves(prefix: Any, tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """One leaf of `prefix` (a tree that is a prefix of `tree`'s) for each leaf of `tree`: the leaf covering it.
    Raises ValueError naming the mismatch when `prefix` is not a prefix of `tree`."""
    targets, structure = tree_flatten(prefix, is_leaf)
    parts = structure.flatten_up_to(tree)
    return [target for target, part in zip(targets, parts) for _ in tree_flatten(part)[0]]


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    leaves: list = []
    _flatten(tree, is_leaf, leaves)
    return leaves


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return _flatten(tree, is_leaf, [])


def tree_map(f: Callable, tree: Any, *rest: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Apply ``f`` leafwise; extra trees must have ``tree``'s structure as a prefix."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return _unflatten(treedef, iter([f(x) for x in leaves]))
    others = _flatten_rest(treedef, tree, rest, "tree_map")
    return _unflatten(treedef, iter([f(*xs) for xs in zip(leaves, *others)]))


def tree_flatten_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """Return ``([(key_path, leaf), ...], treedef)``."""
    out: list = []
    treedef = _flatten_with_path(tree, is_leaf, (), out)
    return out, treedef


def tree_leaves_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f: Callable, tree: Any, *rest: Any,
                       is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Like ``tree_map`` but ``f(key_path, leaf, *other_leaves)``."""
    path_leaves, treedef = tree_flatten_with_path(tree, is_leaf)
    others = _flatten_rest(treedef, tree, rest, "tree_map_with_path") if rest else []
    results = [f(p, x, *xs) for (p, x), *xs in zip(path_leaves, *others)]
    return _unflatten(treedef, iter(results))


_NO_INIT = object()


def tree_reduce(function: Callable, tree: Any, initializer: Any = _NO_INIT,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INIT:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turn an outer-of-inner pytree into an inner-of-outer pytree."""
    outer = outer_treedef.flatten_up_to(pytree_to_transpose)
    if inner_treedef is None:
        if not outer:
            raise ValueError("tree_transpose: cannot infer inner_treedef from an empty outer tree")
        inner_treedef = tree_structure(outer[0])
    inner = [inner_treedef.flatten_up_to(sub) for sub in outer]
    if not inner:
        columns: list = [[] for _ in range(inner_treedef.num_leaves)]
    else:
        columns = [list(col) for col in zip(*inner)]
    return inner_treedef.unflatten([outer_treedef.unflatten(col) for col in columns])


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True iff the treedef has a single node (a leaf, ``None`` or an empty container)."""
    return treedef.num_nodes == 1


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return treedef.children()


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    return PyTreeDef(tuple, None, tuple(treedefs))


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True iff every element of ``iterable`` is a leaf."""
    if is_leaf is None:
        return all(tree_structure(x) is _LEAF for x in iterable)
    return all(tree_structure(x, is_leaf) is _LEAF for x in iterable)


# ---------------------------------------------------------------------------
# Partial
# ---------------------------------------------------------------------------

class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: the bound positional and keyword
    arguments are children, the wrapped function is static aux data."""

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):
            # Keep a wrapped partial (including a Partial) as an opaque static function
            # instead of letting functools.partial merge its args into ours.
            func = _OpaqueCallable(func)
        return super().__new__(cls, func, *args, **kwargs)


class _OpaqueCallable:
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, _OpaqueCallable) and _safe_eq(self.fn, other.fn)

    def __hash__(self):
        return hash(self.fn.func)

    def __repr__(self):
        return repr(self.fn)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, ch: Partial(func, *ch[0], **ch[1]),
)
