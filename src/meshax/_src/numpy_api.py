"""meshax.numpy: NumPy's API on (possibly process-spanning) arrays, built on the primitives.

Every function promotes its inputs with JAX's rules, then binds primitives, so the
same code runs eagerly (partitioned over the arrays' meshes) and under jit/shard_map.
"""
from __future__ import annotations

import builtins
import math
import string
from typing import Any, Sequence

import numpy as np

from . import dtypes
from . import partition  # noqa: F401  (installs the eager trace)
from . import primitives as P
from .api import device_put, host_value
from .array import Array
from .core import Tracer, aval_of
from .devices import Device
from .sharding import Sharding

ArrayLike = Any

# ---- conversion and promotion -------------------------------------------------------------------------


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
    value = np.asarray(x, dtype=dtype)
    if weak:
        return P.convert_element_type.bind(value, new_dtype=dtype, weak_type=True)
    return value


def _promote(*args: Any) -> list[Any]:
    dtype, weak = dtypes.result_type(*args)
    return [_cast(_lift(a), dtype, weak) for a in args]


def _promote_inexact(*args: Any) -> list[Any]:
    dtype, weak = dtypes.result_type(*args)
    if not (np.issubdtype(dtype, np.inexact)):
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


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = []
    for a in axes:
        if not -ndim <= int(a) < builtins.max(ndim, 1):
            raise ValueError(f"axis {a} is out of bounds for an array of rank {ndim}.")
        normalized.append(int(a) % builtins.max(ndim, 1))
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"repeated axis in {axis!r}.")
    return tuple(normalized)


# ---- creation ---------------------------------------------------------------------------------------------


def _placed(value: np.ndarray, device: Device | Sharding | None, weak: bool = False) -> Array:
    from .transfer import from_host
    from .sharding import SingleDeviceSharding, to_sharding
    from . import devices as device_table

    if device is None:
        return from_host(value, SingleDeviceSharding(device_table.local_devices()[0]), weak, committed=False)
    return from_host(value, to_sharding(device), weak)


def array(object: ArrayLike, dtype: Any = None, copy: bool = True, order: Any = None, ndmin: int = 0, *,
          device: Any = None) -> Array:
    if isinstance(object, Array):
        result = object if dtype is None else astype(object, dtype)
        return result if device is None else device_put(result, device)
    if isinstance(object, Tracer):
        return object if dtype is None else astype(object, dtype)
    if isinstance(object, (list, tuple)) and builtins.any(_is_array(e) for e in _flatten_nested(object)):
        return stack([array(e, dtype) for e in object]) if object else array(np.asarray(object), dtype)
    value, weak = host_value(object)
    if dtype is not None:
        value, weak = np.asarray(value, dtypes.canonicalize_dtype(dtype)), False
    if ndmin > value.ndim:
        value = value.reshape((1,) * (ndmin - value.ndim) + value.shape)
    return _placed(value, device, weak and np.ndim(object) == 0)


def _flatten_nested(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _flatten_nested(e)]
    return [x]


def asarray(a: ArrayLike, dtype: Any = None, order: Any = None, *, device: Any = None, copy: Any = None) -> Array:
    return array(a, dtype=dtype, copy=False, device=device)


def _filled(shape: Any, fill: Any, dtype: Any, device: Any, weak: bool = False) -> Array:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    if builtins.any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: shape {shape}.")
    dtype = dtypes.canonicalize_dtype(dtype if dtype is not None else dtypes.default_float_dtype())
    return _placed(np.broadcast_to(np.asarray(fill, dtype), shape), device, weak)


def zeros(shape: Any, dtype: Any = None, *, device: Any = None) -> Array:
    return _filled(shape, 0, dtype, device)


def ones(shape: Any, dtype: Any = None, *, device: Any = None) -> Array:
    return _filled(shape, 1, dtype, device)


def empty(shape: Any, dtype: Any = None, *, device: Any = None) -> Array:
    return _filled(shape, 0, dtype, device)


def full(shape: Any, fill_value: Any, dtype: Any = None, *, device: Any = None) -> Array:
    weak = False
    if dtype is None:
        dtype, weak = dtypes.dtype_of(fill_value) if not _is_array(fill_value) else (fill_value.dtype,
                                                                                      fill_value.weak_type)
    if _is_array(fill_value):
        result = broadcast_to(_cast(fill_value, dtypes.canonicalize_dtype(dtype), weak), shape)
        return result if device is None else device_put(result, device)
    return _filled(shape, fill_value, dtype, device, weak and device is None)  # as jnp.full: weak only if unplaced


def _like(a: Any, dtype: Any, shape: Any, device: Any) -> tuple[Any, Any, bool, Any]:
    """The dtype, shape, weak type and placement of an array made like `a`."""
    if dtype is not None:
        kind, weak = dtypes.canonicalize_dtype(dtype), False
    elif _is_array(a):
        kind, weak = a.dtype, bool(a.weak_type)
    else:
        kind, weak = dtypes.dtype_of(a)
    new_shape = _shape(a) if shape is None else ((shape,) if isinstance(shape, (int, np.integer)) else tuple(shape))
    if device is None and isinstance(a, Array) and tuple(new_shape) == a.shape and a.committed:
        device = a.sharding
    return kind, new_shape, weak, device


def zeros_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    return _filled(*_with_fill(_like(a, dtype, shape, device), 0))


def ones_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    return _filled(*_with_fill(_like(a, dtype, shape, device), 1))


def empty_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    return zeros_like(a, dtype, shape, device=device)


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Array:
    kind, new_shape, weak, device = _like(a, dtype, shape, device)
    if _is_array(fill_value):
        result = broadcast_to(_cast(fill_value, kind, weak), new_shape)
        return result if device is None else device_put(result, device)
    return _filled(new_shape, fill_value, kind, device, weak)


def _with_fill(like: tuple[Any, Any, bool, Any], fill: Any) -> tuple[Any, ...]:
    kind, shape, weak, device = like
    return shape, fill, kind, device, weak


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device: Any = None) -> Array:
    value = np.arange(start, stop, step) if stop is not None else np.arange(start) if step is None \
        else np.arange(0, start, step)
    if dtype is None:
        dtype = dtypes.result_type(*[a for a in (start, stop, step) if a is not None])[0]
    return _placed(value.astype(dtypes.canonicalize_dtype(dtype)), device)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    value, step = np.linspace(np.asarray(start), np.asarray(stop), num, endpoint, retstep=True, axis=axis)
    out = _placed(value.astype(dtypes.canonicalize_dtype(dtype or dtypes.default_float_dtype())), device)
    return (out, step) if retstep else out


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, *, device: Any = None) -> Array:
    return _placed(np.eye(N, M, k, dtype=dtypes.canonicalize_dtype(dtype or dtypes.default_float_dtype())), device)


def identity(n: int, dtype: Any = None, *, device: Any = None) -> Array:
    return eye(n, dtype=dtype, device=device)


# ---- elementwise ------------------------------------------------------------------------------------------------


def _unary(name: str, inexact: bool = False):
    primitive = P.UNARY[name]

    def function(x: ArrayLike) -> Any:
        (x,) = _promote_inexact(x) if inexact else _promote(x)
        return primitive.bind(x)

    function.__name__ = name
    return function


def _binary(name: str, inexact: bool = False):
    primitive = P.BINARY[name]

    def function(x: ArrayLike, y: ArrayLike) -> Any:
        x, y = _promote_inexact(x, y) if inexact else _promote(x, y)
        return primitive.bind(x, y)

    function.__name__ = name
    return function


sin, cos, tan = _unary("sin", True), _unary("cos", True), _unary("tan", True)
arcsin, arccos, arctan = _unary("asin", True), _unary("acos", True), _unary("atan", True)
sinh, cosh, tanh = _unary("sinh", True), _unary("cosh", True), _unary("tanh", True)
arcsinh, arccosh, arctanh = _unary("asinh", True), _unary("acosh", True), _unary("atanh", True)
exp, exp2, expm1 = _unary("exp", True), _unary("exp2", True), _unary("expm1", True)
log, log1p, log2, log10 = _unary("log", True), _unary("log1p", True), _unary("log2", True), _unary("log10", True)
sqrt, cbrt = _unary("sqrt", True), _unary("cbrt", True)
negative, absolute, sign = _unary("neg"), _unary("abs"), _unary("sign")
floor, ceil, trunc = _unary("floor"), _unary("ceil"), _unary("trunc")
square, conjugate, real, imag = _unary("square"), _unary("conj"), _unary("real"), _unary("imag")
isnan, isinf, isfinite, signbit = _unary("isnan"), _unary("isinf"), _unary("isfinite"), _unary("signbit")
abs = absolute
conj = conjugate
arcsin.__name__ = "arcsin"
add, subtract, multiply = _binary("add"), _binary("sub"), _binary("mul")
true_divide, floor_divide = _binary("div", True), _binary("floor_divide")
divide = true_divide
remainder, fmod = _binary("rem"), _binary("fmod")
mod = remainder
maximum, minimum = _binary("max"), _binary("min")
arctan2, hypot, copysign = _binary("atan2", True), _binary("hypot", True), _binary("copysign", True)
nextafter, logaddexp = _binary("nextafter", True), _binary("logaddexp", True)
bitwise_and, bitwise_or, bitwise_xor = _binary("and"), _binary("or"), _binary("xor")
left_shift, right_shift = _binary("shift_left"), _binary("shift_right")
equal, not_equal, less, less_equal = _binary("eq"), _binary("ne"), _binary("lt"), _binary("le")
greater, greater_equal = _binary("gt"), _binary("ge")


def fabs(x: ArrayLike) -> Any:
    (x,) = _promote_inexact(x)
    return P.UNARY["abs"].bind(x)


def reciprocal(x: ArrayLike) -> Any:
    (x,) = _promote_inexact(x)
    return P.UNARY["reciprocal"].bind(x)


def power(x: ArrayLike, y: ArrayLike) -> Any:
    x, y = _promote(x, y)
    return P.BINARY["pow"].bind(x, y)


pow = power


def float_power(x: ArrayLike, y: ArrayLike) -> Any:
    return power(astype(x, dtypes.canonicalize_dtype(np.float64)), y)


def round(a: ArrayLike, decimals: int = 0) -> Any:
    if decimals:
        factor = 10.0 ** decimals
        return divide(round(multiply(a, factor)), factor)
    (a,) = _promote(a)
    return P.UNARY["round"].bind(a)


around = round
rint = round


def invert(x: ArrayLike) -> Any:
    (x,) = _promote(x)
    return P.UNARY["not"].bind(x)


bitwise_not = invert


def logical_not(x: ArrayLike) -> Any:
    return invert(astype(x, np.bool_))


def _logical(name: str):
    def function(x: ArrayLike, y: ArrayLike) -> Any:
        return P.BINARY[name].bind(astype(x, np.bool_), astype(y, np.bool_))

    function.__name__ = f"logical_{name}"
    return function


logical_and, logical_or, logical_xor = _logical("and"), _logical("or"), _logical("xor")


def positive(x: ArrayLike) -> Any:
    return _promote(x)[0]


def where(condition: ArrayLike, x: ArrayLike = None, y: ArrayLike = None) -> Any:
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("where needs both x and y, or neither.")
    x, y = _promote(x, y)
    return P.select.bind(astype(condition, np.bool_), x, y)


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike], default: ArrayLike = 0) -> Any:
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: {len(condlist)} conditions but {len(choicelist)} choices.")
    result = default
    for condition, choice in reversed(list(zip(condlist, choicelist))):
        result = where(condition, choice, result)
    return _promote(result)[0]


def clip(a: ArrayLike, a_min: ArrayLike = None, a_max: ArrayLike = None, *, min: ArrayLike = None,
         max: ArrayLike = None) -> Any:
    low = a_min if a_min is not None else min
    high = a_max if a_max is not None else max
    result = _promote(a)[0]
    if low is not None:
        result = maximum(result, low)
    if high is not None:
        result = minimum(result, high)
    return result


def astype(x: ArrayLike, dtype: Any, copy: bool = False, device: Any = None) -> Any:
    result = _cast(_as_array(x), dtypes.canonicalize_dtype(dtype))
    return result if device is None else device_put(result, device)


def isclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    a, b = _promote_inexact(a, b)
    close = less_equal(absolute(subtract(a, b)), add(atol, multiply(rtol, absolute(b))))
    close = logical_or(close, equal(a, b))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def allclose(a: ArrayLike, b: ArrayLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    return all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Any:
    if _shape(a1) != _shape(a2):
        return array(False)
    same = equal(a1, a2)
    if equal_nan:
        same = logical_or(same, logical_and(isnan(a1), isnan(a2)))
    return all(same)


# ---- reductions --------------------------------------------------------------------------------------------------


def _strong(a: Any) -> Any:
    """`a` without its weak type: reductions and scans of meshax.numpy (as of jax.numpy) are strongly typed."""
    return _cast(a, a.dtype, False) if a.weak_type else a


def _reduce(kind: str, a: ArrayLike, axis: Any, keepdims: bool, where_: Any, fill: Any, dtype: Any = None) -> Any:
    (a,) = _promote(a)
    a = _strong(a if dtype is None else astype(a, dtype))
    if where_ is not None:
        a = where(where_, a, fill)
    return P.REDUCE[kind].bind(a, axes=_axes(axis, a.ndim), keepdims=bool(keepdims))


def _accumulating_dtype(a: Any, dtype: Any) -> Any:
    if dtype is not None:
        return dtypes.canonicalize_dtype(dtype)
    kind = dtypes.dtype_of(a)[0] if not _is_array(a) else a.dtype
    if kind == np.bool_ or (np.issubdtype(kind, np.integer) and kind.itemsize < dtypes.default_int_dtype().itemsize):
        return dtypes.default_uint_dtype() if np.issubdtype(kind, np.unsignedinteger) else dtypes.default_int_dtype()
    return None


def sum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
        initial: Any = None, where: Any = None) -> Any:
    result = _reduce("sum", a, axis, keepdims, where, 0, _accumulating_dtype(a, dtype))
    return result if initial is None else add(result, initial)


def prod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
         initial: Any = None, where: Any = None) -> Any:
    result = _reduce("prod", a, axis, keepdims, where, 1, _accumulating_dtype(a, dtype))
    return result if initial is None else multiply(result, initial)


def max(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    (a,) = _promote(a)
    if where is not None and initial is None:
        raise ValueError("max with where= needs initial= (the value for rows where nothing is selected).")
    fill = initial if initial is not None else 0
    result = _reduce("max", a, axis, keepdims, where, fill)
    return result if initial is None else maximum(result, initial)


def min(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    (a,) = _promote(a)
    if where is not None and initial is None:
        raise ValueError("min with where= needs initial= (the value for rows where nothing is selected).")
    fill = initial if initial is not None else 0
    result = _reduce("min", a, axis, keepdims, where, fill)
    return result if initial is None else minimum(result, initial)


amax, amin = max, min


def any(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Any:
    return _reduce("or", astype(a, np.bool_), axis, keepdims, where, False)


def all(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, *, where: Any = None) -> Any:
    return _reduce("and", astype(a, np.bool_), axis, keepdims, where, True)


def _count(a: Any, axis: Any, where_: Any, keepdims: bool) -> Any:
    if where_ is None:
        return math.prod(_shape(a)[d] for d in _axes(axis, _ndim(a)))
    return sum(broadcast_to(where_, _shape(a)), axis=axis, keepdims=keepdims, dtype=dtypes.default_float_dtype())


def mean(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    if dtype is not None:
        a = astype(a, dtype)
    return divide(sum(a, axis=axis, keepdims=keepdims, where=where), _count(a, axis, where, keepdims))


def var(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, correction: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    ddof = correction if correction is not None else ddof
    centered = subtract(a, mean(a, axis=axis, keepdims=True, where=where))
    squares = real(multiply(centered, conjugate(centered))) if np.issubdtype(a.dtype, np.complexfloating) \
        else square(centered)
    total = sum(squares, axis=axis, keepdims=keepdims, where=where)
    return divide(total, subtract(_count(a, axis, where, keepdims), ddof))


def std(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0, keepdims: bool = False,
        *, where: Any = None, correction: Any = None) -> Any:
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


def _arg(primitive: Any, a: ArrayLike, axis: Any, keepdims: bool) -> Any:
    (a,) = _promote(a)
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    result = primitive.bind(a, axes=(axis,), index_dtype=dtypes.default_int_dtype())
    return expand_dims(result, axis) if keepdims else result


def argmax(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _arg(P.argmax, a, axis, keepdims)


def argmin(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _arg(P.argmin, a, axis, keepdims)


def _cumulative(kind: str, a: ArrayLike, axis: Any, dtype: Any) -> Any:
    """As in JAX, cumulative sums and products keep small integer types; only booleans become integers."""
    (a,) = _promote(a)
    a = _strong(a)
    if dtype is not None:
        a = astype(a, dtype)
    elif a.dtype == np.bool_ and kind in ("cumsum", "cumprod"):
        a = astype(a, dtypes.default_int_dtype())
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    return P.CUMULATIVE[kind].bind(a, axis=axis)


def cumsum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return _cumulative("cumsum", a, axis, dtype)


def cumprod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return _cumulative("cumprod", a, axis, dtype)


# ---- contractions --------------------------------------------------------------------------------------------------


def _dot_general(a: Any, b: Any, contract: tuple[Sequence[int], Sequence[int]],
                 batch: tuple[Sequence[int], Sequence[int]] = ((), ())) -> Any:
    a, b = _promote(a, b)
    numbers = ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))
    return P.dot_general.bind(a, b, dimension_numbers=numbers)


def matmul(a: ArrayLike, b: ArrayLike) -> Any:
    a, b = _lift(a), _lift(b)
    a_nd, b_nd = _ndim(a), _ndim(b)
    if a_nd == 0 or b_nd == 0:
        raise ValueError("matmul: operands must have at least one dimension; use multiply for scalars.")
    if a_nd == 1 and b_nd == 1:
        return _dot_general(a, b, ((0,), (0,)))
    if a_nd == 1:
        return squeeze(matmul(expand_dims(a, 0), b), -2)
    if b_nd == 1:
        return _dot_general(a, b, ((a_nd - 1,), (0,)))
    if a_nd == 2 and b_nd == 2:
        return _dot_general(a, b, ((1,), (0,)))
    batch = np.broadcast_shapes(_shape(a)[:-2], _shape(b)[:-2])
    a = broadcast_to(a, batch + _shape(a)[-2:])
    b = broadcast_to(b, batch + _shape(b)[-2:])
    n = len(batch)
    return _dot_general(a, b, ((n + 1,), (n,)), (tuple(range(n)), tuple(range(n))))


def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    a, b = _lift(a), _lift(b)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    if _ndim(b) == 1:
        return _dot_general(a, b, ((_ndim(a) - 1,), (0,)))
    return _dot_general(a, b, ((_ndim(a) - 1,), (_ndim(b) - 2,)))


def vdot(a: ArrayLike, b: ArrayLike) -> Any:
    a = _lift(a)
    if np.issubdtype(aval_of(a).dtype, np.complexfloating):
        a = conjugate(a)
    return dot(ravel(a), ravel(b))


def inner(a: ArrayLike, b: ArrayLike) -> Any:
    a, b = _lift(a), _lift(b)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return multiply(a, b)
    return _dot_general(a, b, ((_ndim(a) - 1,), (_ndim(b) - 1,)))


def outer(a: ArrayLike, b: ArrayLike) -> Any:
    return _dot_general(ravel(a), ravel(b), ((), ()))


def tensordot(a: ArrayLike, b: ArrayLike, axes: Any = 2) -> Any:
    a, b = _lift(a), _lift(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        return _dot_general(a, b, (tuple(range(_ndim(a) - n, _ndim(a))), tuple(range(n))))
    left, right = axes
    left = (left,) if isinstance(left, (int, np.integer)) else tuple(left)
    right = (right,) if isinstance(right, (int, np.integer)) else tuple(right)
    return _dot_general(a, b, (_axes(left, _ndim(a)), _axes(right, _ndim(b))))


def einsum(subscripts: str, *operands: ArrayLike, optimize: Any = None, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """Einstein summation, as a chain of two-operand contractions (each a dot_general)."""
    inputs, output = _parse_einsum(subscripts, [_ndim(o) for o in operands])
    operands = list(_promote(*operands))
    terms = list(zip(inputs, operands))
    while len(terms) > 1:
        (sa, a), (sb, b) = terms[0], terms[1]
        rest = "".join(s for s, _ in terms[2:]) + output
        terms = [_contract_pair(sa, a, sb, b, rest)] + terms[2:]
    letters, value = terms[0]
    value, letters = _sum_out(value, letters, output)
    return transpose(value, [letters.index(c) for c in output]) if letters != output else value


def _parse_einsum(subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    spec = subscripts.replace(" ", "")
    left, arrow, right = spec.partition("->")
    inputs = left.split(",")
    if len(inputs) != len(ndims):
        raise ValueError(f"einsum: {subscripts!r} names {len(inputs)} operands but {len(ndims)} were given.")
    if "." in spec:
        spare = [c for c in string.ascii_letters if c not in spec]
        width = builtins.max((n - len(s.replace("...", "")) for s, n in zip(inputs, ndims) if "..." in s), default=0)
        fill = "".join(spare[:width])
        inputs = [s.replace("...", fill[len(fill) - (n - len(s.replace('...', ''))):]) if "..." in s else s
                  for s, n in zip(inputs, ndims)]
        right = right.replace("...", fill) if arrow else None
    for term, n in zip(inputs, ndims):
        if len(term) != n:
            raise ValueError(f"einsum: subscripts {term!r} do not match an operand of rank {n}.")
    if not arrow:
        counts = {c: "".join(inputs).count(c) for c in "".join(inputs)}
        right = "".join(sorted(c for c, k in counts.items() if k == 1))
    return inputs, right


def _sum_out(value: Any, letters: str, keep: str) -> tuple[Any, str]:
    """Sum over letters not in `keep`; take diagonals of repeated letters first."""
    for c in set(letters):
        while letters.count(c) > 1:
            i = letters.index(c)
            j = letters.index(c, i + 1)
            value = diagonal(value, axis1=i, axis2=j)
            letters = letters[:i] + letters[i + 1:j] + letters[j + 1:] + c
    drop = tuple(i for i, c in enumerate(letters) if c not in keep)
    if drop:
        value = sum(value, axis=drop)
        letters = "".join(c for c in letters if c in keep)
    return value, letters


def _contract_pair(sa: str, a: Any, sb: str, b: Any, rest: str) -> tuple[str, Any]:
    a, sa = _sum_out(a, sa, sb + rest)
    b, sb = _sum_out(b, sb, sa + rest)
    contract = [c for c in sa if c in sb and c not in rest]
    batch = [c for c in sa if c in sb and c in rest]
    out = batch + [c for c in sa if c not in sb] + [c for c in sb if c not in sa]
    value = _dot_general(a, b, ([sa.index(c) for c in contract], [sb.index(c) for c in contract]),
                         ([sa.index(c) for c in batch], [sb.index(c) for c in batch]))
    return "".join(out), value


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    a = _promote(a)[0]
    n = a.ndim
    axis1, axis2 = axis1 % n, axis2 % n
    size = builtins.max(0, builtins.min(a.shape[axis1] - builtins.max(0, -offset), a.shape[axis2] - builtins.max(0, offset)))
    rows = np.arange(size) + builtins.max(0, -offset)
    cols = np.arange(size) + builtins.max(0, offset)
    moved = moveaxis(a, (axis1, axis2), (-2, -1))
    return moved[..., rows, cols]


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    return sum(diagonal(a, offset, axis1, axis2), axis=-1)


# ---- shape ops ----------------------------------------------------------------------------------------------------


def reshape(a: ArrayLike, shape: Any = None, order: str = "C", *, newshape: Any = None) -> Any:
    a = _promote(a)[0]
    shape = newshape if shape is None else shape
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: at most one dimension may be -1; got {shape}.")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or a.size % known:
            raise ValueError(f"cannot reshape an array of shape {a.shape} into shape {shape}.")
        shape = tuple(a.size // known if n == -1 else n for n in shape)
    if math.prod(shape) != a.size:
        raise ValueError(f"cannot reshape an array of shape {a.shape} (size {a.size}) into shape {shape}.")
    if shape == tuple(a.shape):
        return a
    return P.reshape.bind(a, new_sizes=shape)


def ravel(a: ArrayLike, order: str = "C") -> Any:
    return reshape(a, (-1,))


def transpose(a: ArrayLike, axes: Any = None) -> Any:
    a = _promote(a)[0]
    permutation = tuple(reversed(range(a.ndim))) if axes is None else _axes(axes, a.ndim)
    if sorted(permutation) != list(range(a.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of {a.ndim} dimensions.")
    if permutation == tuple(range(a.ndim)):
        return a
    return P.transpose.bind(a, permutation=permutation)


def permute_dims(a: ArrayLike, axes: Any) -> Any:
    return transpose(a, axes)


def matrix_transpose(x: ArrayLike) -> Any:
    return swapaxes(x, -1, -2)


def moveaxis(a: ArrayLike, source: Any, destination: Any) -> Any:
    a = _promote(a)[0]
    source = _axes(source, a.ndim)
    destination = _axes(destination, a.ndim)
    if len(source) != len(destination):
        raise ValueError("moveaxis: source and destination must have the same number of elements.")
    order = [d for d in range(a.ndim) if d not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, order)


def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Any:
    a = _promote(a)[0]
    order = list(range(a.ndim))
    i, j = _axes(axis1, a.ndim)[0], _axes(axis2, a.ndim)[0]
    order[i], order[j] = order[j], order[i]
    return transpose(a, order)


def expand_dims(a: ArrayLike, axis: Any) -> Any:
    a = _promote(a)[0]
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    ndim = a.ndim + len(axes)
    axes = sorted(int(x) % ndim for x in axes)
    shape = list(a.shape)
    for x in axes:
        shape.insert(x, 1)
    return reshape(a, shape)


def squeeze(a: ArrayLike, axis: Any = None) -> Any:
    a = _promote(a)[0]
    axes = tuple(d for d, n in enumerate(a.shape) if n == 1) if axis is None else _axes(axis, a.ndim)
    for d in axes:
        if a.shape[d] != 1:
            raise ValueError(f"cannot squeeze axis {d} of shape {a.shape}: its size is not 1.")
    return reshape(a, [n for d, n in enumerate(a.shape) if d not in axes])


def broadcast_to(a: ArrayLike, shape: Any) -> Any:
    a = _promote(a)[0]
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
    if tuple(a.shape) == shape:
        return a
    if len(shape) < a.ndim or builtins.any(n not in (1, m) for n, m in zip(a.shape[::-1], shape[::-1])):
        raise ValueError(f"cannot broadcast an array of shape {a.shape} to shape {shape}.")
    dims = tuple(range(len(shape) - a.ndim, len(shape)))
    return P.broadcast_in_dim.bind(a, shape=shape, broadcast_dimensions=dims)


def broadcast_arrays(*args: ArrayLike) -> list[Any]:
    shape = np.broadcast_shapes(*[_shape(a) for a in args])
    return [broadcast_to(a, shape) for a in args]


def atleast_1d(*arys: ArrayLike) -> Any:
    out = [reshape(a, (1,)) if _ndim(a) == 0 else _promote(a)[0] for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys: ArrayLike) -> Any:
    out = [reshape(a, (1,) * (2 - _ndim(a)) + _shape(a)) if _ndim(a) < 2 else _promote(a)[0] for a in arys]
    return out[0] if len(out) == 1 else out


def concatenate(arrays: Sequence[ArrayLike], axis: int | None = 0, dtype: Any = None) -> Any:
    if not len(arrays):
        raise ValueError("need at least one array to concatenate.")
    arrays = _promote(*arrays)
    if dtype is not None:
        arrays = [astype(a, dtype) for a in arrays]
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    first = arrays[0]
    if first.ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated.")
    (axis,) = _axes(axis, first.ndim)
    for a in arrays[1:]:
        if a.ndim != first.ndim or builtins.any(n != m for d, (n, m) in enumerate(zip(a.shape, first.shape)) if d != axis):
            raise ValueError(f"concatenate: shapes {[tuple(x.shape) for x in arrays]} differ outside axis {axis}.")
    return P.concatenate.bind(*arrays, axis=axis) if len(arrays) > 1 else first


concat = concatenate


def stack(arrays: Sequence[ArrayLike], axis: int = 0, dtype: Any = None) -> Any:
    if not len(arrays):
        raise ValueError("need at least one array to stack.")
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"all input arrays must have the same shape to stack; got {sorted(shapes)}.")
    ndim = len(shapes.pop()) + 1
    (axis,) = _axes(axis, ndim)
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis, dtype=dtype)


def vstack(tup: Sequence[ArrayLike]) -> Any:
    return concatenate([atleast_2d(a) for a in tup], axis=0)


def hstack(tup: Sequence[ArrayLike]) -> Any:
    arrays = [atleast_1d(a) for a in tup]
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1)


def split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    ary = _promote(ary)[0]
    (axis,) = _axes(axis, ary.ndim)
    size = ary.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        if size % int(indices_or_sections):
            raise ValueError(f"array split does not result in an equal division: {size} into {indices_or_sections}.")
        step = size // int(indices_or_sections)
        points = list(range(step, size, step))[: int(indices_or_sections) - 1]
    else:
        points = [int(p) for p in indices_or_sections]
    bounds = [0] + points + [size]
    return [_take_range(ary, axis, start, stop) for start, stop in zip(bounds[:-1], bounds[1:])]


def array_split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    ary = _promote(ary)[0]
    if isinstance(indices_or_sections, (int, np.integer)):
        size, parts = ary.shape[axis], int(indices_or_sections)
        base, extra = divmod(size, parts)
        points = np.cumsum([base + 1] * extra + [base] * (parts - extra))[:-1].tolist()
        return split(ary, points, axis)
    return split(ary, indices_or_sections, axis)


def _take_range(a: Any, axis: int, start: int, stop: int) -> Any:
    index = [slice(None)] * a.ndim
    index[axis] = slice(start, stop)
    return a[tuple(index)]


def tile(A: ArrayLike, reps: Any) -> Any:
    A = _promote(A)[0]
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    ndim = builtins.max(A.ndim, len(reps))
    A = reshape(A, (1,) * (ndim - A.ndim) + tuple(A.shape))
    reps = (1,) * (ndim - len(reps)) + reps
    expanded = broadcast_to(reshape(A, [x for n in A.shape for x in (1, n)]),
                            [x for r, n in zip(reps, A.shape) for x in (r, n)])
    return reshape(expanded, [r * n for r, n in zip(reps, A.shape)])


def repeat(a: ArrayLike, repeats: Any, axis: int | None = None, *, total_repeat_length: Any = None) -> Any:
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    index = np.repeat(np.arange(a.shape[axis]), np.asarray(repeats))
    return take(a, index, axis=axis)


def pad(array: ArrayLike, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    array = _promote(array)[0]
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (array.ndim, 2))
    widths = tuple((int(a), int(b)) for a, b in widths)
    axes = tuple(d for d, w in enumerate(widths) if w != (0, 0))
    params = {"constant_values": kwargs.get("constant_values", 0)} if mode == "constant" else {}
    if mode not in ("constant", "edge", "reflect", "symmetric", "wrap"):
        raise ValueError(f"pad mode {mode!r} is not supported; use constant, edge, reflect, symmetric or wrap.")
    return P.pad.bind(array, pad_width=widths, mode=mode, axes=axes, **params)


def flip(m: ArrayLike, axis: Any = None) -> Any:
    m = _promote(m)[0]
    return P.flip.bind(m, axes=_axes(axis, m.ndim))


def fliplr(m: ArrayLike) -> Any:
    return flip(m, 1)


def flipud(m: ArrayLike) -> Any:
    return flip(m, 0)


def roll(a: ArrayLike, shift: Any, axis: Any = None) -> Any:
    a = _promote(a)[0]
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    axes = _axes(axis, a.ndim)
    return P.roll.bind(a, shift=shift if isinstance(shift, int) else tuple(shift), axes=axes)


def sort(a: ArrayLike, axis: int | None = -1, *, descending: bool = False, stable: bool = True) -> Any:
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    return P.sort.bind(a, axis=_axes(axis, a.ndim)[0], descending=descending)


def argsort(a: ArrayLike, axis: int | None = -1, *, descending: bool = False, stable: bool = True) -> Any:
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    if descending:
        a = negative(a)
    return P.argsort.bind(a, axis=_axes(axis, a.ndim)[0], index_dtype=dtypes.default_int_dtype())


# ---- indexing --------------------------------------------------------------------------------------------------------


def _normalize_index(key: Any, ndim: int) -> list[Any]:
    """One entry per addressed dimension (int, slice, array) plus None for new axes; Ellipsis expanded."""
    if isinstance(key, list):
        raise TypeError(
            "Using a non-tuple sequence for multidimensional indexing is not allowed; use `arr[array(seq)]` "
            "instead of `arr[seq]`. See https://github.com/jax-ml/jax/issues/4564 for more information."
        )
    key = key if isinstance(key, tuple) else (key,)
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis and not _is_bool_index(k)) + \
        builtins.sum(_ndim(k) for k in key if _is_bool_index(k))
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...').")
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed.")
    entries: list[Any] = []
    for k in key:
        if k is Ellipsis:
            entries.extend([slice(None)] * (ndim - used))
        else:
            entries.append(k)
    if not builtins.any(k is Ellipsis for k in key):
        entries.extend([slice(None)] * (ndim - used))
    return entries


def _is_bool_index(k: Any) -> bool:
    return (_is_array(k) or isinstance(k, (np.ndarray, list))) and np.dtype(aval_of(k).dtype if _is_array(k)
                                                                               else np.asarray(k).dtype) == np.bool_


def _is_array_index(k: Any) -> bool:
    return _is_array(k) or isinstance(k, (np.ndarray, list))


def getitem(a: Any, key: Any) -> Any:
    entries = _normalize_index(key, a.ndim)
    if not builtins.any(_is_array_index(e) for e in entries):
        index = []
        dim = 0
        for e in entries:
            if e is not None:
                size = a.shape[dim]
                if isinstance(e, (int, np.integer)):
                    if not -size <= int(e) < size:
                        raise IndexError(f"index {int(e)} is out of bounds for axis {dim} with size {size}.")
                    e = int(e) % size
                elif not isinstance(e, slice):
                    raise TypeError(f"unsupported index {e!r}; use integers, slices, None, ... or integer arrays.")
                dim += 1
            index.append(e)
        return P.static_slice.bind(a, index=tuple(index))
    return _gather(a, entries)


def _gather(a: Any, entries: list[Any]) -> Any:
    arrays, index = [], []
    expanded: list[Any] = []
    for e in entries:
        if _is_bool_index(e):
            if isinstance(e, Tracer):
                raise IndexError("boolean mask indexing needs concrete masks; inside jit use jnp.where instead.")
            expanded.extend(np.nonzero(np.asarray(e)))
        else:
            expanded.append(e)
    if builtins.any(e is None for e in expanded):
        new_axes = [i for i, e in enumerate(expanded) if e is None]
        body = [e for e in expanded if e is not None]
        result = _gather(a, body)
        for position in new_axes:
            result = expand_dims(result, builtins.min(position, result.ndim))
        return result
    for e in expanded:
        if _is_array_index(e):
            value = _lift(e) if _is_array(e) else np.asarray(e)
            if not np.issubdtype(aval_of(value).dtype, np.integer):
                raise IndexError(f"array indices must be integers or booleans; got dtype {aval_of(value).dtype}.")
            arrays.append(value)
            index.append("array")
        else:
            index.append(int(e) if isinstance(e, (int, np.integer)) else e)
    return P.gather.bind(a, *arrays, index=tuple(index))


def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, mode: Any = None, fill_value: Any = None) -> Any:
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    entries: list[Any] = [slice(None)] * a.ndim
    entries[axis] = indices if _is_array(indices) else np.asarray(indices)
    return _gather(a, entries)


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None) -> Any:
    arr = _promote(arr)[0]
    if axis is None:
        arr, axis = ravel(arr), 0
    (axis,) = _axes(axis, arr.ndim)
    idx = np.asarray(indices) if not _is_array(indices) else indices
    grids = np.indices(_shape(idx), sparse=True)
    entries = [idx if d == axis else grids[d] for d in range(arr.ndim)]
    return _gather(arr, entries)


def nonzero(a: ArrayLike, *, size: Any = None, fill_value: Any = None) -> tuple[Any, ...]:
    if isinstance(a, Tracer):
        raise TypeError("nonzero has a data-dependent shape; inside jit pass size= (not supported yet) or use where.")
    found = np.nonzero(np.asarray(a))
    return tuple(array(i.astype(dtypes.default_int_dtype())) for i in found)


class _IndexUpdateHelper:
    """`x.at[idx]`: functional updates, as in JAX."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, index: Any) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, index)


class _IndexUpdateRef:
    def __init__(self, array: Any, index: Any) -> None:
        self.array = array
        self.index = index

    def get(self, **_: Any) -> Any:
        return getitem(self.array, self.index)

    def _scatter(self, values: Any, mode: str) -> Any:
        a = self.array
        entries = _normalize_index(self.index, a.ndim)
        arrays, index = [], []
        for e in entries:
            if _is_bool_index(e):
                if isinstance(e, Tracer):
                    raise IndexError("boolean mask updates need concrete masks; inside jit use jnp.where instead.")
                index.append("array")
                arrays.append(np.asarray(e))
            elif _is_array_index(e):
                index.append("array")
                arrays.append(_lift(e))
            else:
                index.append(int(e) if isinstance(e, (int, np.integer)) else e)
        values = _cast(_lift(values), a.dtype)
        return P.scatter.bind(a, values, *arrays, index=tuple(index), mode=mode)

    def set(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "set")

    def add(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "add")

    def multiply(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "multiply")

    mul = multiply

    def min(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "min")

    def max(self, values: Any, **_: Any) -> Any:
        return self._scatter(values, "max")


def size(a: ArrayLike, axis: int | None = None) -> int:
    shape = _shape(a)
    return math.prod(shape) if axis is None else shape[axis]


def shape(a: ArrayLike) -> tuple[int, ...]:
    return _shape(a)


def ndim(a: ArrayLike) -> int:
    return _ndim(a)


def result_type(*args: Any) -> np.dtype:
    return dtypes.result_type(*args)[0]


def promote_types(a: Any, b: Any) -> np.dtype:
    return dtypes.promote_types(a, b)


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    return np.can_cast(from_, to, casting)


def issubdtype(arg1: Any, arg2: Any) -> bool:
    return np.issubdtype(arg1, arg2)
