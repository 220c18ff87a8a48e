"""Typed PRNG key arrays (as jax.random.key returns): a key array of shape S overlays uint32 data of shape S + (2,).

Inside meshax a key array is a pytree node whose one child is that data, so it passes through jit, vmap, scan,
grad and shard_map as its data does (a spec or an axis given for the key array applies to the data's leading
axes); the public meshax.tree_util and meshax.tree functions treat it as a leaf, as JAX does.
Its dtype is ``key<fry>``, a sub-dtype of ``meshax.dtypes.prng_key`` (and ``extended``) as in JAX:
``jnp.issubdtype(k.dtype, meshax.dtypes.prng_key)`` holds. ``meshax.random.key_data`` gives the data back.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..tree.tree_util import register_pytree_node

KEY_WORDS = 2  # threefry2x32 keys: two uint32 words


class extended(np.generic):  # noqa: N801  (jax.dtypes.extended)
    """The abstract dtype of JAX's extended types: typed PRNG keys here."""

    _meshax_extended = True


class prng_key(extended):  # noqa: N801  (jax.dtypes.prng_key)
    """The abstract dtype of every typed PRNG key array (``jnp.issubdtype(k.dtype, prng_key)``)."""


class KeyDType:
    """The dtype of threefry2x32 key arrays, ``key<fry>`` (as jax.random.key_dtype() returns)."""

    name = "key<fry>"
    impl = "threefry2x32"
    type = prng_key
    itemsize = 4 * KEY_WORDS
    _meshax_extended = True

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, KeyDType) or (isinstance(other, str) and other == self.name)

    def __hash__(self) -> int:
        return hash(self.name)

    def _meshax_issubdtype(self, other: Any) -> bool:
        return isinstance(other, KeyDType) or other in (prng_key, extended, np.generic)


KEY_DTYPE = KeyDType()


class KeyArray:
    """A typed key array: `shape` keys, each two uint32 words of `_data` (shape + (2,))."""

    __slots__ = ("_data",)
    __array_priority__ = 300
    _meshax_public_leaf = True  # a leaf for meshax.tree_util / meshax.tree, as JAX's key arrays are

    def __init__(self, data: Any) -> None:
        self._data = data  # not checked: tree_util may unflatten with placeholders (shapes, None, ...)

    # ---- what an array says about itself
    @property
    def dtype(self) -> KeyDType:
        return KEY_DTYPE

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        return KEY_DTYPE.itemsize

    @property
    def weak_type(self) -> bool:
        return False

    @property
    def sharding(self) -> Any:
        return self._data.sharding

    def devices(self) -> Any:
        return self._data.devices()

    def block_until_ready(self) -> KeyArray:
        self._data.block_until_ready()
        return self

    def copy(self) -> KeyArray:
        return self

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a scalar key array)")
        return self.shape[0]

    def __iter__(self) -> Any:
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    # ---- shape operations act on the key dimensions, never on the words of a key
    def __getitem__(self, index: Any) -> KeyArray:
        index = index if isinstance(index, tuple) else (index,)
        return KeyArray(self._data[index + (slice(None),)])

    def reshape(self, *shape: Any, order: str = "C") -> KeyArray:
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return KeyArray(self._data.reshape(tuple(shape) + (KEY_WORDS,)))

    def ravel(self) -> KeyArray:
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis: Any = None) -> KeyArray:
        if axis is None:
            return self.reshape(tuple(n for n in self.shape if n != 1))
        axes = {a % self.ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,))}
        return self.reshape(tuple(n for d, n in enumerate(self.shape) if d not in axes))

    def transpose(self, *axes: Any) -> KeyArray:
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        order = tuple(axes) if axes else tuple(range(self.ndim))[::-1]
        return KeyArray(self._data.transpose(tuple(a % self.ndim for a in order) + (self.ndim,)))

    @property
    def T(self) -> KeyArray:  # noqa: N802
        return self.transpose()

    # ---- comparisons: key by key
    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        if not isinstance(other, KeyArray):
            return NotImplemented
        return (self._data == other._data).all(axis=-1)  # the data's operators and methods are jnp's

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        if not isinstance(other, KeyArray):
            return NotImplemented
        return (self._data != other._data).any(axis=-1)

    __hash__ = None  # type: ignore[assignment]

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("A key array with dtype key<fry> cannot be converted to a NumPy array. Use "
                        "meshax.random.key_data(keys) to get the underlying uint32 data.")

    def __repr__(self) -> str:
        from ..core.core import Tracer

        if isinstance(self._data, Tracer):
            return f"Traced<{KEY_DTYPE}{list(self.shape)}>"
        return f"Array({self.shape}, dtype={KEY_DTYPE}) overlaying:\n{np.asarray(self._data)}"

    __str__ = __repr__


register_pytree_node(KeyArray, lambda keys: ((keys._data,), None), lambda _, children: KeyArray(children[0]))


def _register_with_array_type() -> None:
    from .basearray import Array

    Array.register(KeyArray)


_register_with_array_type()
