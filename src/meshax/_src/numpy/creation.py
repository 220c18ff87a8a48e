"""meshax.numpy's array creation: arrays from data, filled arrays, ranges, index grids and window functions."""
from __future__ import annotations

import builtins
import operator
from typing import Any, Sequence

import numpy as np

from ..core import dtypes
from ..primitives import array_primitives as P
from ..arrays.key_arrays import KeyArray
from ..arrays.placement import device_put, host_value
from ..arrays.array import Array
from ..core.core import Tracer
from ..sharding.explicit_rules import format_spec
from ..sharding.shardings import NamedSharding, PartitionSpec
from .promotion import ArrayLike, _as_array, _axes, _cast, _dims, _dtype, _is_array, _lift, _ndim, _placed, _shape
from .ufuncs import add, astype, divide, floor, log10, multiply, power, sign, subtract
from .shape_ops import _take_range, broadcast_to, concatenate, expand_dims, moveaxis, ravel, reshape, stack
from ..arrays.out_sharding import accepts_out_sharding
from ..core.dtypes import issubdtype


@accepts_out_sharding
def array(object: ArrayLike, dtype: Any = None, copy: bool = True, order: Any = None, ndmin: int = 0, *,
          device: Any = None) -> Array:
    _check_order(order)
    if isinstance(object, (Array, Tracer)):
        result = object if dtype is None else astype(object, dtype)
        if ndmin > result.ndim:
            result = reshape(result, (1,) * (ndmin - result.ndim) + result.shape)
        if copy and result is object and isinstance(object, Array):  # a new Array over the same read-only buffers:
            result = Array(object.shape, object.dtype, object.sharding, dict(object.local_buffers()),
                           object.weak_type, object.committed)  # deleting (donating) one leaves the other
        return result if device is None else device_put(result, device)
    if isinstance(object, KeyArray) and dtype is None:  # typed keys are arrays already
        return object
    if isinstance(object, (list, tuple)) and builtins.any(_is_array(e) for e in _flatten_nested(object)):
        return stack([array(e, dtype) for e in object]) if object else array(np.asarray(object), dtype)
    if dtype is not None:  # straight to `dtype`: jnp.array(2**32 - 1, np.uint32) must not pass through int32
        value, weak = np.asarray(object, _dtype(dtype)), False
    else:
        value, weak = host_value(object)
    if ndmin > value.ndim:
        value = value.reshape((1,) * (ndmin - value.ndim) + value.shape)
    return _placed(value, device, weak and np.ndim(object) == 0)


def _check_order(order: Any) -> None:
    """Arrays have no memory order to choose: only NumPy's order='K' (or None) is accepted, as in JAX."""
    if order is not None and order != "K":
        raise NotImplementedError(f"Only implemented for order='K'; got order={order!r}.")


def _flatten_nested(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _flatten_nested(e)]
    return [x]


@accepts_out_sharding
def asarray(a: ArrayLike, dtype: Any = None, order: Any = None, *, device: Any = None, copy: Any = None) -> Array:
    return array(a, dtype=dtype, copy=bool(copy), order=order, device=device)


def _filled(shape: Any, fill: Any, dtype: Any, device: Any, weak: bool = False) -> Array:
    shape = _dims(shape)
    if builtins.any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: shape {shape}.")
    dtype = _dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    return _placed(np.broadcast_to(P.convert_values(fill, dtype), shape), device, weak)


@accepts_out_sharding
def zeros(shape: Any, dtype: Any = None, *, device: Any = None) -> Array:
    return _filled(shape, 0, dtype, device)


@accepts_out_sharding
def ones(shape: Any, dtype: Any = None, *, device: Any = None) -> Array:
    return _filled(shape, 1, dtype, device)


@accepts_out_sharding
def empty(shape: Any, dtype: Any = None, *, device: Any = None) -> Array:
    return _filled(shape, 0, dtype, device)


@accepts_out_sharding
def full(shape: Any, fill_value: Any, dtype: Any = None, *, device: Any = None) -> Array:
    weak = False
    if dtype is None:
        dtype, weak = dtypes.dtype_of(fill_value) if not _is_array(fill_value) else (fill_value.dtype,
                                                                                      fill_value.weak_type)
    if _is_array(fill_value):
        result = broadcast_to(_cast(fill_value, _dtype(dtype), weak), shape)
        return result if device is None else device_put(result, device)
    return _filled(shape, fill_value, dtype, device, weak and device is None)  # as jnp.full: weak only if unplaced


def _like(a: Any, dtype: Any, shape: Any, device: Any) -> tuple[Any, Any, bool, Any]:
    """The dtype, shape, weak type and placement of an array made like `a`."""
    if dtype is not None:
        kind, weak = _dtype(dtype), False
    elif _is_array(a):
        kind, weak = a.dtype, bool(a.weak_type)
    else:
        kind, weak = dtypes.dtype_of(a)
    new_shape = _shape(a) if shape is None else _dims(shape)
    if device is None and isinstance(a, Array) and tuple(new_shape) == a.shape and a.committed:
        device = a.sharding
    aval = getattr(a, "aval", None)
    if device is None and isinstance(a, Tracer) and aval.explicit and tuple(new_shape) == aval.shape:
        device = NamedSharding(aval.mesh, PartitionSpec(*format_spec(aval.explicit)))  # its type's sharding
    return kind, new_shape, weak, device


@accepts_out_sharding
def zeros_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    return _filled(*_with_fill(_like(a, dtype, shape, device), 0))


@accepts_out_sharding
def ones_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    return _filled(*_with_fill(_like(a, dtype, shape, device), 1))


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    return zeros_like(prototype, dtype, shape, device=device)


@accepts_out_sharding
def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    kind, new_shape, weak, device = _like(a, dtype, shape, device)
    if _is_array(fill_value):
        result = broadcast_to(_cast(fill_value, kind, weak), new_shape)
        return result if device is None else device_put(result, device)
    return _filled(new_shape, fill_value, kind, device, weak)


def _with_fill(like: tuple[Any, Any, bool, Any], fill: Any) -> tuple[Any, ...]:
    kind, shape, weak, device = like
    return shape, fill, kind, device, weak


@accepts_out_sharding
def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device: Any = None) -> Array:
    value = np.arange(start, stop, step) if stop is not None else np.arange(start) if step is None \
        else np.arange(0, start, step)
    if dtype is None:
        dtype = dtypes.result_type(*[a for a in (start, stop, step) if a is not None])[0]
    return _placed(value.astype(_dtype(dtype)), device)


def _inexact(dtype: np.dtype) -> np.dtype:
    return dtype if issubdtype(dtype, np.inexact) else dtypes.default_float_dtype()


def _spacing_types(start: Any, stop: Any, dtype: Any) -> tuple[np.dtype, np.dtype]:
    """(result dtype, computation dtype) of linspace, logspace and geomspace."""
    kind = _dtype(dtype) if dtype is not None else _inexact(dtypes.result_type(start, stop)[0])
    return kind, _inexact(kind)


def _bounds(start: Any, stop: Any, work: np.dtype) -> tuple[Any, Any]:
    """start and stop, strongly typed as `work` and broadcast together."""
    start, stop = _cast(_lift(start), work), _cast(_lift(stop), work)
    shape = np.broadcast_shapes(_shape(start), _shape(stop))
    return broadcast_to(start, shape), broadcast_to(stop, shape)


def linspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    """`num` evenly spaced values, each start * (1 - t) + stop * t (so both ends are exact), traceable and
    differentiable in start and stop; with retstep, also the step (a 0-d or bounds-shaped array)."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    kind, work = _spacing_types(start, stop, dtype)
    start, stop = _bounds(start, stop, work)
    ndim = _ndim(start) + 1
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for the result of rank {ndim}.")
    axis = axis % ndim
    div = num - 1 if endpoint else num
    if num > 1:
        step = divide(subtract(stop, start), _cast(div, work))
        shape = [1] * ndim
        shape[axis] = div
        real = dtypes.finfo(work).dtype
        if real.itemsize < 4 and real != np.float16:  # bfloat16 and float8s: in float32, as XLA on CPU does
            real = np.dtype(np.float32)
        # i * (1 / div), as XLA computes i / div (so linspace(0, 1, n) is JAX's to the bit)
        t = (np.arange(div, dtype=real) * (real.type(1) / real.type(div))).reshape(shape).astype(work)
        out = add(multiply(expand_dims(start, axis), (1 - t).astype(work)), multiply(expand_dims(stop, axis), t))
        if endpoint:
            out = concatenate([out, expand_dims(stop, axis)], axis=axis)
    else:
        step = _cast(np.nan, work) if num == 0 or endpoint else subtract(stop, start)
        out = expand_dims(start, axis)
        if num == 0:
            out = _take_range(out, axis, 0, 0)
    if issubdtype(kind, np.integer) and not issubdtype(work, np.integer):
        out = floor(out)
    out = astype(out, kind)
    if device is not None:
        out = device_put(out, device)
    return (out, _as_array(step)) if retstep else out


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, *, device: Any = None) -> Array:
    return _placed(np.eye(N, M, k, dtype=_dtype(dtype or dtypes.default_float_dtype())), device)


def identity(n: int, dtype: Any = None) -> Array:
    """The n by n identity matrix (JAX 0.12's identity takes no device=)."""
    return eye(n, dtype=dtype)


def copy(a: ArrayLike, order: Any = None) -> Any:
    return array(a, copy=True, order=order)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Array:
    return _placed(np.tri(N, M, k, dtype=_dtype(dtype or dtypes.default_float_dtype())), None)


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, ...]:
    return tuple(array(i.astype(dtypes.default_int_dtype())) for i in np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, ...]:
    return tuple(array(i.astype(dtypes.default_int_dtype())) for i in np.triu_indices(n, k, m))


def diag_indices(n: int, ndim: int = 2) -> tuple[Any, ...]:
    return tuple(array(i.astype(dtypes.default_int_dtype())) for i in np.diag_indices(n, ndim))


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    dtype = _dtype(dtype or dtypes.default_int_dtype())
    grids = np.indices(tuple(dimensions), dtype=dtype, sparse=sparse)
    return tuple(array(g) for g in grids) if sparse else array(grids)


def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple[Any, ...]:
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', not {indexing!r}.")
    arrays = [ravel(x) for x in xi]
    places = list(range(len(arrays)))  # the output dimension along which each input varies
    if indexing == "xy" and len(arrays) >= 2:
        places[0], places[1] = 1, 0  # Cartesian: the first input varies along columns
    shape = [0] * len(arrays)
    for a, place in zip(arrays, places):
        shape[place] = a.shape[0]
    out = []
    for a, place in zip(arrays, places):
        expanded = reshape(a, [n if d == place else 1 for d, n in enumerate(shape)])
        out.append(expanded if sparse else broadcast_to(expanded, shape))
    return tuple(out)  # a tuple, as JAX 0.12's


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, base: ArrayLike = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    """base ** linspace(start, stop): computed in the inexact form of `dtype`, then cast to it."""
    kind, work = _spacing_types(start, stop, dtype)
    start, stop = _bounds(start, stop, work)
    exponents = linspace(start, stop, num, endpoint, axis=axis)
    return astype(power(base, exponents), kind)


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    """Values spaced evenly on a log scale between start and stop (of the same sign), ends included."""
    kind, work = _spacing_types(start, stop, dtype)
    start, stop = _bounds(start, stop, work)
    signs = sign(start)
    result = multiply(signs, logspace(log10(divide(start, signs)), log10(divide(stop, signs)), num, endpoint,
                                      dtype=work))
    (axis,) = _axes(axis, _ndim(result))
    return astype(moveaxis(result, 0, axis), kind)


def _window(function: Any, M: int, *args: Any) -> Array:
    return _placed(function(M, *args).astype(dtypes.default_float_dtype()), None)


def hamming(M: int) -> Array:
    return _window(np.hamming, M)


def hanning(M: int) -> Array:
    return _window(np.hanning, M)


def bartlett(M: int) -> Array:
    return _window(np.bartlett, M)


def blackman(M: int) -> Array:
    return _window(np.blackman, M)


def kaiser(M: int, beta: float) -> Array:
    return _window(np.kaiser, M, beta)
