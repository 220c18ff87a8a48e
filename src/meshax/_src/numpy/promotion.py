"""Conversion and promotion of meshax.numpy's inputs: host values lifted to their JAX dtypes, operands promoted
with JAX's rules, shape and axis arguments normalized, host values placed on devices."""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from ..core import dtypes
from ..interpreters import eager  # noqa: F401  (installs the eager trace)
from ..primitives import array_primitives as P
from ..arrays.placement import host_value
from ..arrays.array import Array
from ..core.core import Tracer
from ..runtime.devices import Device
from ..sharding.shardings import Sharding
from ..core.dtypes import issubdtype


ArrayLike = Any


def _is_array(x: Any) -> bool:
    return isinstance(x, (Array, Tracer))


def _lift(x: Any) -> Any:
    """Arrays and tracers stay; host values become NumPy values of their JAX dtype."""
    if _is_array(x):
        return x
    value, _ = host_value(x)
    return value


def _cast(x: Any, dtype: np.dtype, weak: bool = False) -> Any:
    """`x` as `dtype`: arrays and tracers through convert_element_type; host values stay NumPy values unless
    the result must be weakly typed (a NumPy value cannot say so), then they become weak arrays too."""
    dtype = np.dtype(dtype)
    if _is_array(x):
        if x.dtype == dtype and bool(x.weak_type) == weak:
            return x
        return P.convert_element_type.bind(x, new_dtype=dtype, weak_type=weak)
    # NumPy values convert as arrays do (floats saturate into integer types); Python scalars as NumPy says
    value = P.convert_values(x, dtype) if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x, dtype=dtype)
    if weak:
        return P.convert_element_type.bind(value, new_dtype=dtype, weak_type=True)
    return value


def _weak(x: Any) -> bool:
    """Whether `x` (an array, a tracer or a host value already lifted by _promote) is weakly typed."""
    return bool(getattr(x, "weak_type", False))


def _promote(*args: Any) -> list[Any]:
    dtype, weak = dtypes.result_type(*args)
    return [_cast(_lift(a), dtype, weak) for a in args]


def _promote_inexact(*args: Any) -> list[Any]:
    dtype, weak = dtypes.result_type(*args)
    if not (issubdtype(dtype, np.inexact)):
        dtype = dtypes.default_float_dtype()
    return [_cast(_lift(a), dtype, weak) for a in args]


def _as_array(x: Any) -> Any:
    """An Array (or tracer) for `x`: host values become uncommitted arrays on the default device."""
    if _is_array(x):
        return x
    value, weak = host_value(x)
    return _placed(value, None, weak)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _ndim(x: Any) -> int:
    return len(_shape(x))


def _dtype(dtype: Any) -> np.dtype:
    """A dtype specifier as the dtype arrays get (64-bit types narrowed unless x64); like JAX, only numbers
    and booleans."""
    canonical = dtypes.canonicalize_dtype(dtype)
    if canonical.kind not in "biufc" and not (canonical.kind == "V" and canonical.itemsize in (1, 2)):
        raise TypeError(f"JAX only supports number and bool dtypes, got dtype {canonical}.")
    return canonical


def _dims(shape: Any) -> tuple[int, ...]:
    """A shape argument (an integer or a sequence of them) as a tuple of Python ints."""
    entries = shape if isinstance(shape, (tuple, list)) or (isinstance(shape, np.ndarray) and shape.ndim == 1) \
        else (shape,)
    try:
        return tuple(operator.index(n) for n in entries)
    except TypeError:
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got {shape!r}.") from None


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    normalized = []
    for a in axes:
        try:
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"axis must be an integer or a tuple of integers, got {axis!r}.") from None
        if not -ndim <= int(a) < builtins.max(ndim, 1):
            raise ValueError(f"axis {a} is out of bounds for an array of rank {ndim}.")
        normalized.append(int(a) % builtins.max(ndim, 1))
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"repeated axis in {axis!r}.")
    return tuple(normalized)


def _placed(value: np.ndarray, device: Device | Sharding | None, weak: bool = False) -> Array:
    from ..arrays.transfer import from_host
    from ..sharding.shardings import SingleDeviceSharding, to_sharding
    from ..runtime import devices as device_table

    if device is None:
        return from_host(value, SingleDeviceSharding(device_table.default_device()), weak, committed=False)
    return from_host(value, to_sharding(device), weak)


def _host_result(value: np.ndarray, like: Any) -> Array:
    """A result computed on the host from the value of `like`: replicated over its mesh if `like` is a
    committed array on one (as JAX's result of a data-dependent shape is), else on the default device."""
    from ..sharding.shardings import NamedSharding, PartitionSpec

    value, _ = host_value(value)
    if isinstance(like, Array) and like.committed and isinstance(like.sharding, NamedSharding):
        return _placed(value, NamedSharding(like.sharding.mesh, PartitionSpec()))
    return _placed(value, None)
