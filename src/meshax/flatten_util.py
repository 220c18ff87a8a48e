"""Flattening pytrees of arrays into one vector (as jax.flatten_util)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from meshax import numpy as jnp
from meshax._src.core import dtypes
from meshax._src.tree.tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """The leaves of `pytree` raveled and concatenated into one 1-d array (of their promoted dtype), and the
    function that maps such a vector back to a pytree like `pytree` (each leaf with its own shape and dtype)."""
    leaves, treedef = tree_flatten(pytree)
    shapes = [np.shape(leaf) for leaf in leaves]
    leaf_dtypes = [np.dtype(dtypes.dtype_of(leaf)[0]) for leaf in leaves]
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
    if leaves:
        common = np.dtype(dtypes.result_type(*leaf_dtypes)[0])
        flat = jnp.concatenate([jnp.ravel(jnp.asarray(leaf, dtype=common)) for leaf in leaves])
    else:
        common = np.dtype(dtypes.default_float_dtype())
        flat = jnp.zeros((0,), common)

    def unravel(vector: Any) -> Any:
        if np.shape(vector) != (sum(sizes),):
            raise ValueError(f"The unravel function expected an array of shape {(sum(sizes),)}, got shape "
                             f"{np.shape(vector)}.")
        given = np.dtype(dtypes.dtype_of(vector)[0])
        if given != common:
            raise TypeError(f"The unravel function expected an array of dtype {common}, got dtype {given}.")
        pieces, start = [], 0
        for shape, dtype, size in zip(shapes, leaf_dtypes, sizes):
            piece = jnp.reshape(vector[start:start + size], shape)
            pieces.append(piece if dtype == common else _cast_back(piece, dtype))
            start += size
        return tree_unflatten(treedef, pieces)

    return flat, unravel


def _cast_back(piece: Any, dtype: np.dtype) -> Any:
    """A piece converted back to its leaf's dtype (dropping the imaginary part of complex values if need be)."""
    if np.issubdtype(piece.dtype, np.complexfloating) and not np.issubdtype(dtype, np.complexfloating):
        piece = jnp.real(piece)
    return piece.astype(dtype)
