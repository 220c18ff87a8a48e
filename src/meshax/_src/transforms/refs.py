"""Array refs (jax.new_ref, jax.freeze): mutable boxes holding an array, read and written with `ref[idx]`.

A Ref holds its current value; a write replaces it with `value.at[idx].set(new)`. Under `jit`, a Ref
argument is passed in as its value and its final value comes back as an extra result, which is
written into the caller's Ref after each call: the program's reads and writes happen every call,
in order, as in JAX. A Ref made inside a traced function lives within that trace.
"""
from __future__ import annotations

from typing import Any

from .. import numpy as jnp
from ..core.core import Tracer, aval_of


class Ref:
    """A mutable array: `ref[...]` reads it, `ref[idx] = value` writes part of it."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    shape = property(lambda self: aval_of(self._value).shape)
    dtype = property(lambda self: aval_of(self._value).dtype)
    ndim = property(lambda self: len(self.shape))
    aval = property(lambda self: aval_of(self._value))

    def __getitem__(self, index: Any) -> Any:
        return self._value if index is Ellipsis or index == () else self._value[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        if index is Ellipsis or index == ():
            aval = aval_of(self._value)
            self._value = jnp.broadcast_to(jnp.asarray(value, dtype=aval.dtype), aval.shape)
        else:
            self._value = self._value.at[index].set(value)

    def __len__(self) -> int:
        return len(self._value)

    def __repr__(self) -> str:
        if isinstance(self._value, Tracer):
            aval = self._value.aval
            return repr(self._value).replace(str(aval), f"Ref{{{aval}}}", 1)
        text = repr(self._value)
        return "Ref(" + text[text.index("(") + 1:] if text.startswith("Array(") else f"Ref({text})"


def new_ref(init_val: Any) -> Ref:
    """A Ref holding `init_val` (an array, or anything `jnp.asarray` takes)."""
    return Ref(jnp.asarray(init_val))


def freeze(ref: Ref) -> Any:
    """The Ref's current value as an (immutable) array."""
    if not isinstance(ref, Ref):
        raise TypeError(f"freeze takes a Ref (from new_ref); got {type(ref).__name__}.")
    return ref._value


def unwrapped(leaves: list[Any]) -> list[Any]:
    """Leaves with each Ref replaced by its current value."""
    return [leaf._value if isinstance(leaf, Ref) else leaf for leaf in leaves]
