"""meshax.numpy's questions about arrays and dtypes: the value tests beyond the ufuncs (isposinf, iscomplex,
isscalar...), comparisons of whole arrays (allclose, array_equal, array_equiv) and dtype promotion queries."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core import dtypes
from .promotion import ArrayLike, _cast, _is_array, _promote, _shape
from .ufuncs import (
    _refuse_out_where, equal, imag, isclose, isinf, isnan, logical_and, logical_not, logical_or, not_equal, signbit,
)
from .shape_ops import broadcast_to
from .creation import array, full_like, zeros_like
from .reductions import all
from ..core.dtypes import issubdtype as _issubdtype


def isscalar(element: Any) -> bool:
    """Python and NumPy scalars and 0-d arrays (as jnp.isscalar; np.isscalar says no to 0-d arrays)."""
    if _is_array(element) or isinstance(element, np.ndarray):
        return element.ndim == 0
    return type(element) in (bool, int, float, complex) or np.isscalar(element)


def iscomplexobj(x: Any) -> bool:
    """Whether `x` (a value, a dtype or a scalar type) is of complex type."""
    kind = x if isinstance(x, (type, np.dtype, str)) else x.dtype if hasattr(x, "dtype") else dtypes.dtype_of(x)[0]
    return _issubdtype(kind, np.complexfloating)


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)


def _answer(x: Any, value: bool) -> Any:
    """`value` for every element of a non-complex `x`, weakly typed if `x` is (as JAX's iscomplex and isreal)."""
    (x,) = _promote(x)
    return _cast(full_like(x, value, dtype=bool), np.dtype(bool), bool(getattr(x, "weak_type", False)))


def iscomplex(x: ArrayLike) -> Any:
    return not_equal(imag(x), 0) if iscomplexobj(x) else _answer(x, False)


def isreal(x: ArrayLike) -> Any:
    return equal(imag(x), 0) if iscomplexobj(x) else _answer(x, True)


def _check_not_complex(x: Any) -> None:
    if _issubdtype(x.dtype, np.complexfloating):
        raise ValueError(f"isposinf/isneginf are not well defined for complex types ({x.dtype}); test real(x) and "
                         "imag(x).")


def isposinf(x: ArrayLike, /, out: None = None) -> Any:
    _refuse_out_where("isposinf", out, None)
    (x,) = _promote(x)
    _check_not_complex(x)
    if not _issubdtype(x.dtype, np.floating):
        return zeros_like(x, dtype=bool)
    return logical_and(isinf(x), logical_not(signbit(x)))


def isneginf(x: ArrayLike, /, out: None = None) -> Any:
    _refuse_out_where("isneginf", out, None)
    (x,) = _promote(x)
    _check_not_complex(x)
    if not _issubdtype(x.dtype, np.floating):
        return zeros_like(x, dtype=bool)
    return logical_and(isinf(x), signbit(x))


def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    return all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Any:
    if _shape(a1) != _shape(a2):
        return array(False)
    same = equal(a1, a2)
    if equal_nan:
        same = logical_or(same, logical_and(isnan(a1), isnan(a2)))
    return all(same)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Any:
    try:
        shape = np.broadcast_shapes(_shape(a1), _shape(a2))
    except ValueError:
        return array(False)
    return all(equal(broadcast_to(a1, shape), broadcast_to(a2, shape)))


def result_type(*args: Any) -> np.dtype:
    return dtypes.result_type(*args)[0]


def promote_types(a: Any, b: Any) -> np.dtype:
    return dtypes.promote_types(a, b)


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    return np.can_cast(from_, to, casting)


def issubdtype(arg1: Any, arg2: Any) -> bool:
    """np.issubdtype, with bfloat16 and the float8 types floating, int4 etc. integers (as jnp.issubdtype)."""
    return _issubdtype(arg1, arg2)


iterable = np.iterable
