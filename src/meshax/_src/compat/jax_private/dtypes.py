"""jax._src.dtypes for the alias: meshax's dtypes plus the names libraries subclass or catch."""
from __future__ import annotations

from typing import Any

import numpy as np

from meshax.dtypes import *  # noqa: F401,F403
from meshax.dtypes import finfo, iinfo  # noqa: F401
from meshax._src.core.dtypes import issubdtype

DType = np.dtype


class TypePromotionError(ValueError):
    """Two dtypes that the promotion rules cannot combine."""


class extended(np.generic):  # noqa: N801 - JAX's name
    """The scalar-type root of extended dtypes (meshax has none of its own)."""


class ExtendedDType:
    """The base of extended dtypes (meshax arrays never have one)."""

    type: type
    _rules: type


def supports_inf(dtype: Any) -> bool:
    """Whether `dtype` has infinities."""
    dtype = np.dtype(dtype)
    return issubdtype(dtype, np.inexact) and not dtype.name.endswith("fn") and "fnuz" not in dtype.name
