"""Static type annotations (as jax.typing): ArrayLike, DTypeLike and their parts."""
from __future__ import annotations

from typing import Any, Protocol, Union, runtime_checkable

import numpy as np

from meshax._src.arrays.array import Array
from meshax._src.core.core import Tracer

__all__ = ["ArrayLike", "DTypeLike", "DuckTypedArray"]


@runtime_checkable
class SupportsDType(Protocol):
    """Anything with a `dtype` attribute (jnp.float32, a ShapeDtypeStruct...)."""

    @property
    def dtype(self) -> np.dtype: ...


@runtime_checkable
class DuckTypedArray(Protocol):
    """Anything with a `shape` and a `dtype`."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...


# What can be converted to an array implicitly: arrays, tracers, NumPy values and Python scalars.
ArrayLike = Union[Array, Tracer, np.ndarray, np.bool_, np.number, bool, int, float, complex]

# What names a dtype: a name, a scalar type, a dtype, or anything with a dtype attribute.
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]
