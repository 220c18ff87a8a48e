"""meshax.numpy's scalar types (as jax.numpy.float32 etc.): classes that stand for a dtype and build arrays.

``jnp.float32`` is not NumPy's ``np.float32``: calling it gives a meshax Array (``jnp.float32(3)`` is
``Array(3., dtype=float32)``, also under jit), its ``dtype`` attribute is ``dtype('float32')``, and it is accepted
wherever a dtype is (``np.dtype(jnp.float32)`` works through that attribute). It compares equal to, and hashes
like, the NumPy type, and ``isinstance(np.float32(1), jnp.float32)`` holds, as in JAX.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core import dtypes


class _ScalarMeta(type):
    """The metaclass of the scalar types: `cls.dtype` is the dtype the type stands for."""

    dtype: np.dtype

    def __call__(cls, x: Any) -> Any:
        from .creation import asarray

        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.dtype.type)

    def __eq__(cls, other: Any) -> bool:
        return cls is other or cls.dtype.type == other

    def __ne__(cls, other: Any) -> bool:
        return not cls == other

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __reduce__(cls) -> str:
        return cls.__name__  # pickled by reference: meshax.numpy.<name>


def _scalar_type(name: str, dtype: np.dtype) -> _ScalarMeta:
    return _ScalarMeta(name, (object,), {"dtype": np.dtype(dtype), "__module__": "meshax.numpy",
                                         "__doc__": f"The {dtype} scalar type: calling it makes a {dtype} Array."})


_NAMES = {
    "bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float16": np.float16, "float32": np.float32, "float64": np.float64,
    "complex64": np.complex64, "complex128": np.complex128,
    **({"bfloat16": dtypes.bfloat16} if dtypes.bfloat16 is not None else {}),
    **dtypes._NARROW_FLOATS, **dtypes._SUBBYTE_INTS,
}
SCALAR_TYPES: dict[str, _ScalarMeta] = {name: _scalar_type(name, dt) for name, dt in _NAMES.items()}
# NumPy's other spellings of the same types, as jax.numpy has them (int_ etc. are the 64-bit ones, canonicalized
# to 32 bits when used unless x64 is on).
ALIASES = {"bool_": "bool", "int_": "int64", "uint": "uint64", "float_": "float64", "complex_": "complex128",
           "single": "float32", "double": "float64", "csingle": "complex64", "cdouble": "complex128"}
SCALAR_TYPES.update({alias: SCALAR_TYPES[name] for alias, name in ALIASES.items()})
