"""Dtype utilities (as jax.dtypes): canonical dtypes, promotion, machine limits, float0, bfloat16 and the
extended (typed PRNG key) dtypes."""
from __future__ import annotations

from typing import Any

import numpy as np

from meshax._src.core import dtypes as _dtypes
from meshax._src.core.dtypes import TypePromotionError, canonicalize_dtype, finfo, float0, iinfo
from meshax._src.numpy.logic import issubdtype
from meshax._src.arrays.key_arrays import extended, prng_key

__all__ = ["TypePromotionError", "bfloat16", "canonicalize_dtype", "extended", "finfo", "float0", "iinfo", "issubdtype", "itemsize_bits",
           "prng_key", "result_type", "scalar_type_of"]

bfloat16 = _dtypes.bfloat16.type  # the scalar type (ml_dtypes.bfloat16), as jax.dtypes.bfloat16


def result_type(*args: Any, return_weak_type_flag: bool = False) -> Any:
    """The dtype JAX's promotion gives `args` (and whether it is weak, if asked)."""
    dtype, weak = _dtypes.result_type(*args)
    return (dtype, weak) if return_weak_type_flag else dtype


def scalar_type_of(x: Any) -> type:
    """The Python scalar type of `x`'s kind: bool, int, float or complex."""
    dtype = np.dtype(_dtypes.dtype_of(x)[0])
    for kind, scalar in ((np.bool_, bool), (np.integer, int), (np.floating, float), (np.complexfloating, complex)):
        if _dtypes.issubdtype(dtype, kind):
            return scalar
    raise TypeError(f"scalar_type_of: {dtype} has no Python scalar type.")


def itemsize_bits(dtype: Any) -> int:
    """The size of one element of `dtype` in bits (4 for int4 and float4_e2m1fn, 6 for the float6 types)."""
    dt = np.dtype(dtype)
    if dt.name in _dtypes._SUBBYTE_INTS:
        return int(iinfo(dt).bits)
    if dt.name in _dtypes._NARROW_FLOATS:
        return int(finfo(dt).bits)
    return dt.itemsize * 8
