"""A pytree structure's flattening and unflattening as straight-line Python, made once per structure.

A jitted step called thousands of times checks its arguments against the structure of its last call and rebuilds
the structure of its results. Walking the structure's nodes recursively took 14 us for the 23 leaves of a small
model's parameters and Adam state, and rebuilding 6 us; `structure_code` writes both walks out for one structure
(tuples, lists, dicts, namedtuples and Nones), so that each node costs a type test and an unpacking.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .registry import _NAMEDTUPLE, _kind_for_type, _NoneType
from .tree_util import PyTreeDef


class _Writer:
    """The lines and constants of one structure's two functions."""

    def __init__(self) -> None:
        self.checks: list[str] = []  # flatten's body
        self.leaves: list[str] = []  # flatten's leaf variables, in order
        self.constants: dict[str, Any] = {}
        self.count = 0

    def constant(self, value: Any) -> str:
        name = f"K{len(self.constants)}"
        self.constants[name] = value
        return name

    def flatten(self, td: PyTreeDef, var: str) -> None:
        """Lines checking that `var` has `td`'s structure (else flatten returns None) and naming its leaves."""
        t = td._type
        if t is None:
            self.leaves.append(var)
            return
        if t is _NoneType:
            self.checks.append(f"if {var} is not None: return None")
            return
        children = [f"{var}_{k}" for k in range(len(td._children))]
        if t is dict:
            self.checks.append(f"if type({var}) is not dict or len({var}) != {len(children)}: return None")
            for child, key in zip(children, td._aux):
                self.checks.append(f"{child} = {var}[{self.constant(key)}]")  # KeyError: not this structure
        elif t is tuple or t is list:
            self.checks.append(f"if type({var}) is not {t.__name__} or len({var}) != {len(children)}: return None")
        elif _kind_for_type(t) is _NAMEDTUPLE:
            self.checks.append(f"if type({var}) is not {self.constant(t)}: return None")
        else:
            raise _Unsupported(t)
        if t is not dict and children:
            self.checks.append(f"{', '.join(children)}, = {var}")
        for child_td, child in zip(td._children, children):
            self.flatten(child_td, child)

    def unflatten(self, td: PyTreeDef) -> str:
        """The expression building `td`'s structure from the leaves `l0, l1, ...`."""
        t = td._type
        if t is None:
            self.count += 1
            return f"l{self.count - 1}"
        if t is _NoneType:
            return "None"
        parts = [self.unflatten(child) for child in td._children]
        if t is dict:
            return "{" + ", ".join(f"{self.constant(k)}: {p}" for k, p in zip(td._aux, parts)) + "}"
        if t is list:
            return "[" + ", ".join(parts) + "]"
        if t is tuple:
            return "(" + "".join(f"{p}, " for p in parts) + ")"
        return f"{self.constant(t)}({', '.join(parts)})"


class _Unsupported(Exception):
    """A node kind structure_code does not write out (a registered class)."""


@functools.lru_cache(maxsize=256)
def structure_code(td: PyTreeDef) -> tuple[Callable[[Any], list | None], Callable[[list], Any]] | None:
    """`(flatten, unflatten)` for trees of `td`'s structure: `flatten(tree)` gives the leaves of a tree whose
    tuples, lists, dicts, namedtuples and Nones are `td`'s (a leaf's position takes any value), else None;
    `unflatten(leaves)` builds the tree. None where `td` has another kind of node."""
    w = _Writer()
    try:
        w.flatten(td, "x")
    except _Unsupported:
        return None
    body = [f"        {line}" for line in w.checks] or ["        pass"]
    leaves = ", ".join(w.leaves)
    names = ", ".join(f"l{k}" for k in range(len(w.leaves)))
    source = "\n".join([
        "def flatten(x):",
        "    try:",
        *body,
        "    except KeyError:",
        "        return None",
        f"    return [{leaves}]",
        "",
        "def unflatten(leaves):",
        *([f"    {names}, = leaves"] if w.leaves else []),
        f"    return {w.unflatten(td)}",
        ""])
    namespace = dict(w.constants)
    exec(compile(source, f"<meshax structure of {td.num_leaves} leaves>", "exec"), namespace)
    return namespace["flatten"], namespace["unflatten"]
