"""meshax.numpy: NumPy's API on (possibly process-spanning) arrays, built on the primitives.

Every function promotes its inputs with JAX's rules, then binds primitives, so the
same code runs eagerly (partitioned over the arrays' meshes) and under jit/shard_map.
"""
from __future__ import annotations

import builtins
import math
import operator
import string
from typing import Any, Sequence

import numpy as np

from . import dtypes
from . import partition
from .interpreters import eager  # noqa: F401  (installs the eager trace)
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
        value, weak = np.asarray(value, _dtype(dtype)), False
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
    shape = _dims(shape)
    if builtins.any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: shape {shape}.")
    dtype = _dtype(dtype if dtype is not None else dtypes.default_float_dtype())
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
    return _placed(value.astype(_dtype(dtype)), device)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    value, step = np.linspace(np.asarray(start), np.asarray(stop), num, endpoint, retstep=True, axis=axis)
    out = _placed(value.astype(_dtype(dtype or dtypes.default_float_dtype())), device)
    return (out, step) if retstep else out


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, *, device: Any = None) -> Array:
    return _placed(np.eye(N, M, k, dtype=_dtype(dtype or dtypes.default_float_dtype())), device)


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
    return power(astype(x, _dtype(np.float64)), y)


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
    result = _cast(_as_array(x), _dtype(dtype))
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
        return _dtype(dtype)
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


def _extreme(kind: str, combine: Any, a: ArrayLike, axis: Any, keepdims: bool, initial: Any, where: Any) -> Any:
    """max or min: reduce, then fold in `initial` (which where= requires)."""
    (a,) = _promote(a)
    if where is not None and initial is None:
        raise ValueError(f"{kind} with where= needs initial= (the value for rows where nothing is selected).")
    _check_identity(kind, a, axis, initial)
    result = _reduce(kind, a, axis, keepdims, where, initial if initial is not None else 0)
    return result if initial is None else combine(result, initial)


def max(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    return _extreme("max", maximum, a, axis, keepdims, initial, where)


def min(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    return _extreme("min", minimum, a, axis, keepdims, initial, where)


amax, amin = max, min


def _check_identity(name: str, a: Any, axis: Any, initial: Any) -> None:
    if initial is None and builtins.any(a.shape[d] == 0 for d in _axes(axis, a.ndim)):
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")


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
                 batch: tuple[Sequence[int], Sequence[int]] = ((), ()), out_sharding: Any = None) -> Any:
    """One dot_general. `out_sharding` lays out the result: a PartitionSpec over the operands' mesh, or a
    NamedSharding (uncommitted operands elsewhere are multiplied where they are, and the product moved)."""
    a, b = _promote(a, b)
    numbers = ((tuple(contract[0]), tuple(contract[1])), (tuple(batch[0]), tuple(batch[1])))
    spec, target = out_sharding, None
    if isinstance(out_sharding, Sharding):
        spec, target = out_sharding.spec, out_sharding
        mesh = None if isinstance(a, Tracer) or isinstance(b, Tracer) else partition.choose_mesh([a, b])
        if mesh is not None and mesh != target.mesh:
            if builtins.any(isinstance(x, Array) and x.committed for x in (a, b)):
                raise ValueError(
                    f"out_sharding is on the mesh {target.mesh.short_repr()}, but the operands are on "
                    f"{mesh.short_repr()}; device_put them onto the out_sharding's mesh, or pass a PartitionSpec."
                )
            spec = None
    params = {} if spec is None else {"out_sharding": spec}
    result = P.dot_general.bind(a, b, dimension_numbers=numbers, **params)
    if target is not None and getattr(result, "sharding", None) != target:
        result = P.sharding_constraint.bind(result, sharding=target)
    return result


def _out_sharding(out_sharding: Any, name: str) -> Any:
    """A contraction's out_sharding= checked: a NamedSharding, or a PartitionSpec (over the mesh of `with mesh:`
    when one is entered, else over the operands' mesh)."""
    from .mesh import current_mesh
    from .sharding import NamedSharding, PartitionSpec

    if isinstance(out_sharding, PartitionSpec) and current_mesh() is not None:
        return NamedSharding(current_mesh(), out_sharding)
    if out_sharding is None or isinstance(out_sharding, (NamedSharding, PartitionSpec)):
        return out_sharding
    raise TypeError(f"{name}: out_sharding must be a NamedSharding or a PartitionSpec; got {out_sharding!r} of type "
                    f"{type(out_sharding).__name__}.")


def matmul(a: ArrayLike, b: ArrayLike, *, out_sharding: Any = None) -> Any:
    """Matrix product with NumPy's broadcasting of leading dimensions; `out_sharding` lays out the result."""
    out_sharding = _out_sharding(out_sharding, "matmul")
    a, b = _lift(a), _lift(b)
    a_nd, b_nd = _ndim(a), _ndim(b)
    if a_nd == 0 or b_nd == 0:
        raise ValueError("matmul: operands must have at least one dimension; use multiply for scalars.")
    if a_nd == 1:
        return _dot_general(a, b, ((0,), (builtins.max(b_nd - 2, 0),)), out_sharding=out_sharding)
    if b_nd == 1:
        return _dot_general(a, b, ((a_nd - 1,), (0,)), out_sharding=out_sharding)
    if a_nd == 2 and b_nd == 2:
        return _dot_general(a, b, ((1,), (0,)), out_sharding=out_sharding)
    batch = np.broadcast_shapes(_shape(a)[:-2], _shape(b)[:-2])
    a = broadcast_to(a, batch + _shape(a)[-2:])
    b = broadcast_to(b, batch + _shape(b)[-2:])
    n = len(batch)
    return _dot_general(a, b, ((n + 1,), (n,)), (tuple(range(n)), tuple(range(n))), out_sharding=out_sharding)


def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None, preferred_element_type: Any = None,
        out_sharding: Any = None) -> Any:
    """NumPy's dot: a scalar scales, otherwise the last axis of `a` meets the second-to-last (or only) of `b`."""
    out_sharding = _out_sharding(out_sharding, "dot")
    a, b = _lift(a), _lift(b)
    if _ndim(a) == 0 or _ndim(b) == 0:
        return _dot_general(a, b, ((), ()), out_sharding=out_sharding)
    if _ndim(b) == 1:
        return _dot_general(a, b, ((_ndim(a) - 1,), (0,)), out_sharding=out_sharding)
    return _dot_general(a, b, ((_ndim(a) - 1,), (_ndim(b) - 2,)), out_sharding=out_sharding)


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
    """A broadcast product, as JAX's (so its result is split as an elementwise product's)."""
    return multiply(expand_dims(ravel(a), 1), expand_dims(ravel(b), 0))


def tensordot(a: ArrayLike, b: ArrayLike, axes: Any = 2, *, out_sharding: Any = None) -> Any:
    """Contract the last `axes` dimensions of `a` with the first of `b`, or the listed pairs of axes."""
    out_sharding = _out_sharding(out_sharding, "tensordot")
    a, b = _lift(a), _lift(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        return _dot_general(a, b, (tuple(range(_ndim(a) - n, _ndim(a))), tuple(range(n))), out_sharding=out_sharding)
    left, right = axes
    left = (left,) if isinstance(left, (int, np.integer)) else tuple(left)
    right = (right,) if isinstance(right, (int, np.integer)) else tuple(right)
    return _dot_general(a, b, (_axes(left, _ndim(a)), _axes(right, _ndim(b))), out_sharding=out_sharding)


def einsum(subscripts: str, *operands: ArrayLike, optimize: Any = None, precision: Any = None,
           preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """Einstein summation, as a chain of two-operand contractions (each a dot_general); `out_sharding` lays out
    the result (given to the last contraction; with a single operand, a PartitionSpec needs `with mesh:`)."""
    out_sharding = _out_sharding(out_sharding, "einsum")
    inputs, output = _parse_einsum(subscripts, [_ndim(o) for o in operands])
    if out_sharding is not None and len(_spec_of(out_sharding).normalized()) > len(output):
        raise ValueError(f"einsum: out_sharding {out_sharding} has {len(_spec_of(out_sharding))} entries but the "
                         f"result {output!r} has rank {len(output)}; give at most one entry per result dimension.")
    operands = list(_promote(*operands))
    terms = list(zip(inputs, operands))
    while len(terms) > 1:
        in_order = optimize is False  # left to right, as JAX's; else the cheapest pair first, as opt_einsum's
        i, j = (0, 1) if in_order else _cheapest_pair(terms, output)
        (sa, a), (sb, b) = terms[i], terms[j]
        others = [t for k, t in enumerate(terms) if k not in (i, j)]
        rest = "".join(s for s, _ in others) + output
        merged = _contract_pair(sa, a, sb, b, rest, (output, out_sharding) if len(terms) == 2 else None)
        terms = [merged] + others if in_order else others + [merged]
    letters, value = terms[0]
    value, letters = _sum_out(value, letters, output)
    if letters != output:
        value = transpose(value, [letters.index(c) for c in output])
    if len(operands) == 1 and out_sharding is not None:
        from .sharding import to_sharding

        value = P.sharding_constraint.bind(value, sharding=to_sharding(out_sharding))
    return value


def _cheapest_pair(terms: Sequence[tuple[str, Any]], output: str) -> tuple[int, int]:
    """The pair to contract first on the way that takes the fewest multiplications in all (the first such
    way on ties; every way is tried up to four terms, beyond that the cheapest next pair is taken)."""
    sizes = {c: n for letters, value in terms for c, n in zip(letters, _shape(value))}
    return _cheapest_order([letters for letters, _ in terms], output, sizes, exhaustive=len(terms) <= 4)[1]


def _cheapest_order(terms: list[str], output: str, sizes: dict[str, int], exhaustive: bool
                    ) -> tuple[int, tuple[int, int]]:
    """(multiplications, first pair) of the cheapest contraction order of `terms` (results go last)."""
    best: tuple[int, tuple[int, int]] | None = None
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            others = [t for k, t in enumerate(terms) if k not in (i, j)]
            keep = set("".join(others) + output)
            cost = math.prod(sizes[c] for c in set(terms[i] + terms[j]))
            if exhaustive and len(others) > 0:
                merged = "".join(sorted(set(terms[i] + terms[j]) & keep))
                cost += _cheapest_order(others + [merged], output, sizes, exhaustive)[0]
            if best is None or cost < best[0]:
                best = (cost, (i, j))
    assert best is not None
    return best


def _spec_of(out_sharding: Any) -> Any:
    return out_sharding.spec if isinstance(out_sharding, Sharding) else out_sharding


def _reordered(out_sharding: Any, source: Sequence[int]) -> Any:
    """`out_sharding` of a result, as the layout of a value whose dimension d is the result's dimension source[d]."""
    from .sharding import NamedSharding, PartitionSpec

    spec = _spec_of(out_sharding)
    entries = tuple(spec) + (None,) * (len(source) - len(spec))
    reordered = PartitionSpec(*(entries[s] for s in source))
    return NamedSharding(out_sharding.mesh, reordered) if isinstance(out_sharding, Sharding) else reordered


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


def _contract_pair(sa: str, a: Any, sb: str, b: Any, rest: str, last: Any = None) -> tuple[str, Any]:
    """Contract two einsum terms; `last` is (output letters, out_sharding) when this is the final contraction."""
    a, sa = _sum_out(a, sa, sb + rest)
    b, sb = _sum_out(b, sb, sa + rest)
    contract = [c for c in sa if c in sb and c not in rest]
    batch = [c for c in sa if c in sb and c in rest]
    out = batch + [c for c in sa if c not in sb] + [c for c in sb if c not in sa]
    out_sharding = None
    if last is not None and last[1] is not None:
        output, out_sharding = last
        out_sharding = _reordered(out_sharding, [output.index(c) for c in out])
    value = _dot_general(a, b, ([sa.index(c) for c in contract], [sb.index(c) for c in contract]),
                         ([sa.index(c) for c in batch], [sb.index(c) for c in batch]), out_sharding=out_sharding)
    return "".join(out), value


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    a = _promote(a)[0]
    n = a.ndim
    if n < 2:
        raise ValueError(f"diagonal requires an array of at least two dimensions; got shape {a.shape}.")
    axis1, axis2 = _axes(axis1, n)[0], _axes(axis2, n)[0]
    if axis1 == axis2:
        raise ValueError(f"diagonal: axis1 and axis2 are both {axis1}; they must differ.")
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
    shape = _dims(newshape if shape is None else shape)
    if builtins.any(n < -1 for n in shape):
        raise ValueError(f"reshape: negative dimensions are not allowed (other than one -1); got {shape}.")
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
    count = 1 if not isinstance(axis, (tuple, list)) else len(axis)
    axes = sorted(_axes(axis, a.ndim + count))
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
    shape = _dims(shape)
    if builtins.any(n < 0 for n in shape):
        raise ValueError(f"broadcast_to: negative dimensions are not allowed; got shape {shape}.")
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
        base, extra = builtins.divmod(size, parts)
        points = np.cumsum([base + 1] * extra + [base] * (parts - extra))[:-1].tolist()
        return split(ary, points, axis)
    return split(ary, indices_or_sections, axis)


def _take_range(a: Any, axis: int, start: int, stop: int) -> Any:
    index = [slice(None)] * a.ndim
    index[axis] = slice(start, stop)
    return a[tuple(index)]


def tile(A: ArrayLike, reps: Any) -> Any:
    A = _promote(A)[0]
    reps = _dims(reps)
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"tile: negative repetitions are not allowed; got {reps}.")
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
    counts = np.asarray(repeats)
    if not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
        raise ValueError(f"repeat: repeats must be non-negative integers; got {repeats!r}.")
    length = a.shape[axis]
    if counts.ndim == 0 and total_repeat_length in (None, length * int(counts)):
        # every element the same number of times: a broadcast and a reshape, which keep the split (as JAX's)
        stretched = broadcast_to(expand_dims(a, axis + 1), a.shape[:axis + 1] + (int(counts),) + a.shape[axis + 1:])
        return reshape(stretched, a.shape[:axis] + (length * int(counts),) + a.shape[axis + 1:])
    index = np.repeat(np.arange(length), counts)
    if total_repeat_length is not None:  # cut, or repeat the last element, to exactly that length
        index = np.resize(np.append(index, np.full(builtins.max(0, total_repeat_length - index.size),
                                                   index[-1] if index.size else 0)), total_repeat_length)
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
    (axis,) = _axes(axis, a.ndim)
    index_dtype = dtypes.default_int_dtype()
    if not descending:
        return P.argsort.bind(a, axis=axis, index_dtype=index_dtype)
    # Largest first, equal elements in their original order: a stable ascending sort of the reversed array,
    # read backwards, with positions mapped back (negating would break unsigned integers and booleans).
    backwards = P.argsort.bind(flip(a, axis), axis=axis, index_dtype=index_dtype)
    return subtract(np.asarray(a.shape[axis] - 1, index_dtype), flip(backwards, axis))


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
                    e = _static_index(e, size, dim)
                elif not isinstance(e, slice):
                    raise TypeError(f"unsupported index {e!r}; use integers, slices, None, ... or integer arrays.")
                dim += 1
            index.append(e)
        return P.static_slice.bind(a, index=tuple(index))
    return _gather(a, entries)


def _static_index(index: Any, size: int, dim: int) -> int:
    """A static integer index, wrapped if negative. Out of range it is an IndexError, as in NumPy: JAX would
    clamp it (as it clamps index arrays, which meshax does too), but a constant out of range is a mistake."""
    index = int(index)
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for axis {dim} with size {size}.")
    return index % size


def _check_mask(mask: np.ndarray, shape: tuple[int, ...], dim: int) -> None:
    for offset, size in enumerate(mask.shape):
        if dim + offset >= len(shape) or shape[dim + offset] != size:
            have = shape[dim + offset] if dim + offset < len(shape) else "missing"
            raise IndexError(f"boolean index did not match the indexed array along dimension {dim + offset}; "
                             f"dimension is {have} but corresponding boolean dimension is {size}.")


def _default_fill(dtype: np.dtype) -> Any:
    """What JAX reads at an out-of-range index in mode="fill": NaN, the lowest signed or highest unsigned
    integer, or True."""
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if dtype == np.bool_:
        return True
    info = np.iinfo(dtype)
    return info.min if np.issubdtype(dtype, np.signedinteger) else info.max


def _gather(a: Any, entries: list[Any], mode: str | None = None, fill_value: Any = None) -> Any:
    """a[entries]. Out-of-range indices are clamped (mode None or "clip", JAX's default for indexing),
    wrapped ("wrap") or read as `fill_value` ("fill": the array gets one extra row of it along each
    indexed dimension, and out-of-range indices are sent there)."""
    if mode not in (None, "clip", "promise_in_bounds", "wrap", "fill"):
        raise ValueError(f"invalid gather mode {mode!r}; use 'clip', 'wrap', 'fill' or 'promise_in_bounds'.")
    arrays, index = [], []
    expanded: list[Any] = []
    dim = 0
    for e in entries:
        if _is_bool_index(e):
            if isinstance(e, Tracer):
                raise IndexError("boolean mask indexing needs concrete masks; inside jit use jnp.where instead.")
            mask = np.asarray(e)
            _check_mask(mask, a.shape, dim)
            expanded.extend(np.nonzero(mask))
            dim += mask.ndim
        else:
            expanded.append(e)
            dim += e is not None
    if builtins.any(e is None for e in expanded):
        new_axes = [i for i, e in enumerate(expanded) if e is None]
        body = [e for e in expanded if e is not None]
        result = _gather(a, body, mode, fill_value)
        for position in new_axes:
            result = expand_dims(result, builtins.min(position, result.ndim))
        return result
    widen: list[int] = []
    for dim, e in enumerate(expanded):
        size = a.shape[dim]
        if _is_array_index(e):
            value, needs_fill_row = _array_index(e, size, mode)
            if needs_fill_row:
                widen.append(dim)
            arrays.append(value)
            index.append("array")
        elif isinstance(e, (int, np.integer)):
            if mode == "wrap" and size:
                e = int(e) % size
            elif mode == "fill" and not -size <= int(e) < size:
                widen.append(dim)
                e = size
            index.append(_static_index(e, size + (dim in widen), dim))
        else:
            index.append(e)
    if widen:
        a = _pad_fill_row(a, widen, fill_value)
    return P.gather.bind(a, *arrays, index=tuple(index))


def _array_index(e: Any, size: int, mode: str | None) -> tuple[Any, bool]:
    """An integer index array along a dimension of `size`, and whether the gather needs one extra row of the
    fill value: "wrap" wraps out-of-range entries, "fill" sends them to `size` (that extra row); other modes
    leave them to the gather, which clamps."""
    value = _lift(e) if _is_array(e) else np.asarray(e)
    if not np.issubdtype(aval_of(value).dtype, np.integer):
        raise IndexError(f"array indices must be integers or booleans; got dtype {aval_of(value).dtype}.")
    if mode == "wrap":
        return (remainder(value, size) if _is_array(value) else np.mod(value, size)), False
    if mode != "fill":
        return value, False
    if _is_array(value):
        value = where(less(value, 0), add(value, size), value)
        return where(logical_or(less(value, 0), greater_equal(value, size)), size, value), True
    value = np.where(value < 0, value + size, value)  # concrete indices: the extra row only if some are out of range
    outside = (value < 0) | (value >= size)
    return np.where(outside, size, value), bool(outside.any())


def _pad_fill_row(a: Any, dims: Sequence[int], fill_value: Any) -> Any:
    """`a` with one more row of `fill_value` (by default the dtype's, as JAX's) at the end of each of `dims`."""
    fill = _default_fill(a.dtype) if fill_value is None else fill_value
    return pad(a, [(0, 1) if d in dims else (0, 0) for d in range(a.ndim)], constant_values=fill)


def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, mode: Any = None, fill_value: Any = None) -> Any:
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    entries: list[Any] = [slice(None)] * a.ndim
    entries[axis] = indices if _is_array(indices) else np.asarray(indices)
    return _gather(a, entries, "fill" if mode is None else mode, fill_value)  # JAX's take fills by default


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None, mode: Any = None,
                    fill_value: Any = None) -> Any:
    arr = _promote(arr)[0]
    if axis is None:
        arr, axis = ravel(arr), 0
    (axis,) = _axes(axis, arr.ndim)
    idx = np.asarray(indices) if not _is_array(indices) else indices
    if len(_shape(idx)) != arr.ndim:
        raise ValueError("take_along_axis: indices and arr must have the same number of dimensions; "
                         f"{len(_shape(idx))} vs. {arr.ndim}.")
    around = [tuple(s[:axis]) + tuple(s[axis + 1:]) for s in (arr.shape, _shape(idx))]
    if builtins.any(a != b and 1 not in (a, b) for a, b in zip(*around)):
        raise ValueError(f"take_along_axis: indices of shape {tuple(_shape(idx))} do not broadcast against the "
                         f"array's {tuple(arr.shape)} outside axis {axis}; make those dimensions equal or 1.")
    mode = "fill" if mode is None else mode
    if mode not in ("clip", "promise_in_bounds", "fill"):  # as JAX's, which has no "wrap" here
        raise ValueError(f"invalid take_along_axis mode {mode!r}; use 'clip', 'fill' or 'promise_in_bounds'.")
    idx, needs_fill_row = _array_index(idx, arr.shape[axis], mode)
    if needs_fill_row:
        arr = _pad_fill_row(arr, [axis], fill_value)
    return P.take_along.bind(arr, _lift(idx), axis=axis)


def nonzero(a: ArrayLike, *, size: Any = None, fill_value: Any = None) -> tuple[Any, ...]:
    """The indices of the nonzero elements, one array per dimension. The result's length depends on the
    data, so under jit pass `size=` (the first `size` indices, padded with `fill_value`, 0 by default)."""
    index_dtype = dtypes.default_int_dtype()
    if size is None:
        if isinstance(a, Tracer):
            raise TypeError("nonzero has a data-dependent shape; inside jit pass size= or use where.")
        found = np.nonzero(np.asarray(a))
        return tuple(_host_result(i.astype(index_dtype), a) for i in found)
    shape = _shape(a)
    if not shape:
        raise ValueError("nonzero of a 0-d array; use atleast_1d first.")
    flat = ravel(not_equal(a, 0))
    count = sum(flat)
    order = argsort(logical_not(flat))[:size] if flat.size >= size else \
        concatenate([argsort(logical_not(flat)), np.zeros(size - flat.size, index_dtype)])
    valid = less(np.arange(size, dtype=index_dtype), count)
    fills = fill_value if isinstance(fill_value, tuple) else (0 if fill_value is None else fill_value,) * len(shape)
    out, rest = [], order
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    for d, stride in enumerate(strides):
        coordinate = floor_divide(rest, stride) if stride > 1 else rest
        rest = remainder(rest, stride) if stride > 1 else rest
        out.append(astype(where(valid, coordinate, fills[d]), index_dtype))
    return tuple(out)


def _host_result(value: np.ndarray, like: Any) -> Array:
    """A result computed on the host from the value of `like`: replicated over its mesh if `like` is a
    committed array on one (as JAX's result of a data-dependent shape is), else on the default device."""
    from .sharding import NamedSharding, PartitionSpec

    value, _ = host_value(value)
    if isinstance(like, Array) and like.committed and isinstance(like.sharding, NamedSharding):
        return _placed(value, NamedSharding(like.sharding.mesh, PartitionSpec()))
    return _placed(value, None)


def flatnonzero(a: ArrayLike, *, size: Any = None, fill_value: Any = None) -> Any:
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: Any = None, fill_value: Any = None) -> Any:
    a = _as_array(a)
    if a.ndim == 0:
        a = reshape(a, (1,))
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=-1)


def _update_positions(e: Any, size: int) -> Any:
    """Integer update indices along a dimension of `size`: negatives wrapped, those still out of range set
    to `size` (dropped by the scatter)."""
    value = _lift(e) if _is_array(e) else np.asarray(e)
    if not np.issubdtype(aval_of(value).dtype, np.integer):
        raise IndexError(f"array indices must be integers or booleans; got dtype {aval_of(value).dtype}.")
    if _is_array(value):
        value = where(less(value, 0), add(value, size), value)
        return where(logical_or(less(value, 0), greater_equal(value, size)), size, value)
    value = np.where(value < 0, value + size, value)
    return np.where((value < 0) | (value >= size), size, value)


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

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            fill_value: Any = None) -> Any:
        if mode in (None, "clip", "promise_in_bounds") and fill_value is None:
            return getitem(self.array, self.index)
        return _gather(self.array, _normalize_index(self.index, self.array.ndim), mode or "fill", fill_value)

    def _scatter(self, values: Any, mode: str) -> Any:
        """As in JAX, updates at out-of-range indices are dropped: an out-of-range static integer drops the
        whole update; out-of-range entries of index arrays are set to the dimension's size, which the
        scatter primitive drops. Slices go to the primitive as (start, stop, step) read as a range."""
        a = self.array
        entries = _normalize_index(self.index, a.ndim)
        arrays, index = [], []
        dim = 0
        for e in entries:
            if e is None:
                index.append(None)
                continue
            if _is_bool_index(e):
                if isinstance(e, Tracer):
                    raise IndexError("boolean mask updates need concrete masks; inside jit use jnp.where instead.")
                mask = np.asarray(e)
                _check_mask(mask, a.shape, dim)
                index.append("array")
                arrays.append(mask)
                dim += mask.ndim
                continue
            size = a.shape[dim]
            if _is_array_index(e):
                index.append("array")
                arrays.append(_update_positions(e, size))
            elif isinstance(e, (int, np.integer)):
                if not -size <= int(e) < size:
                    return a  # nothing to update
                index.append(int(e) % size)
            else:
                index.append(slice(*e.indices(size)))
            dim += 1
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


# ---- more of NumPy's API, written with the functions above -------------------------------------------------------------

acos, acosh, asin, asinh, atan, atanh, atan2 = arccos, arccosh, arcsin, arcsinh, arctan, arctanh, arctan2
bitwise_invert, bitwise_left_shift, bitwise_right_shift = invert, left_shift, right_shift
iterable = np.iterable
broadcast_shapes = np.broadcast_shapes
s_, index_exp = np.s_, np.index_exp


def divmod(x: ArrayLike, y: ArrayLike) -> tuple[Any, Any]:
    return floor_divide(x, y), remainder(x, y)


def copy(a: ArrayLike, order: Any = None) -> Any:
    return array(a, copy=True)


def isscalar(element: Any) -> bool:
    """Python and NumPy scalars and 0-d arrays (as jnp.isscalar; np.isscalar says no to 0-d arrays)."""
    if _is_array(element) or isinstance(element, np.ndarray):
        return element.ndim == 0
    return type(element) in (bool, int, float, complex) or np.isscalar(element)


def iscomplexobj(x: Any) -> bool:
    kind = x.dtype if hasattr(x, "dtype") else dtypes.dtype_of(x)[0]
    return bool(np.issubdtype(kind, np.complexfloating))


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)


def iscomplex(x: ArrayLike) -> Any:
    return not_equal(imag(x), 0) if iscomplexobj(x) else zeros_like(x, dtype=bool)


def isreal(x: ArrayLike) -> Any:
    return equal(imag(x), 0) if iscomplexobj(x) else ones_like(x, dtype=bool)


def isposinf(x: ArrayLike) -> Any:
    (x,) = _promote(x)
    if not np.issubdtype(x.dtype, np.floating):
        return zeros_like(x, dtype=bool)
    return logical_and(isinf(x), logical_not(signbit(x)))


def isneginf(x: ArrayLike) -> Any:
    (x,) = _promote(x)
    if not np.issubdtype(x.dtype, np.floating):
        return zeros_like(x, dtype=bool)
    return logical_and(isinf(x), signbit(x))


def nan_to_num(x: ArrayLike, copy: bool = True, nan: Any = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    (x,) = _promote(x)
    if np.issubdtype(x.dtype, np.complexfloating):
        parts = [nan_to_num(part, nan=nan, posinf=posinf, neginf=neginf) for part in (real(x), imag(x))]
        return add(parts[0], multiply(parts[1], _cast(1j, x.dtype)))
    if not np.issubdtype(x.dtype, np.inexact):
        return x
    info = np.finfo(x.dtype)
    out = where(isnan(x), _cast(nan, x.dtype), x)
    out = where(isposinf(x), _cast(info.max if posinf is None else posinf, x.dtype), out)
    return where(isneginf(x), _cast(info.min if neginf is None else neginf, x.dtype), out)


def deg2rad(x: ArrayLike) -> Any:
    (x,) = _promote_inexact(x)
    return multiply(x, _cast(np.pi / 180, x.dtype, x.weak_type))


def rad2deg(x: ArrayLike) -> Any:
    (x,) = _promote_inexact(x)
    return multiply(x, _cast(180 / np.pi, x.dtype, x.weak_type))


radians, degrees = deg2rad, rad2deg


def fmax(x1: ArrayLike, x2: ArrayLike) -> Any:
    """The larger of each pair, ignoring NaN unless both are NaN."""
    x1, x2 = _promote(x1, x2)
    if not np.issubdtype(x1.dtype, np.inexact):
        return maximum(x1, x2)
    return where(isnan(x1), x2, where(isnan(x2), x1, maximum(x1, x2)))


def fmin(x1: ArrayLike, x2: ArrayLike) -> Any:
    x1, x2 = _promote(x1, x2)
    if not np.issubdtype(x1.dtype, np.inexact):
        return minimum(x1, x2)
    return where(isnan(x1), x2, where(isnan(x2), x1, minimum(x1, x2)))


def heaviside(x1: ArrayLike, x2: ArrayLike) -> Any:
    x1, x2 = _promote_inexact(x1, x2)
    zero, one = _cast(0, x1.dtype, x1.weak_type), _cast(1, x1.dtype, x1.weak_type)
    return where(less(x1, 0), zero, where(greater(x1, 0), one, x2))


def logaddexp2(x1: ArrayLike, x2: ArrayLike) -> Any:
    x1, x2 = _promote_inexact(x1, x2)
    peak = maximum(x1, x2)
    delta = subtract(x1, x2)
    spread = divide(log1p(exp2(negative(absolute(delta)))), _cast(np.log(2), x1.dtype, x1.weak_type))
    return where(isnan(delta), add(x1, x2), add(peak, spread))


def sinc(x: ArrayLike) -> Any:
    (x,) = _promote_inexact(x)
    scaled = multiply(x, _cast(np.pi, x.dtype, x.weak_type))
    safe = where(equal(x, 0), _cast(1, x.dtype, x.weak_type), scaled)
    return where(equal(x, 0), _cast(1, x.dtype, x.weak_type), divide(sin(safe), safe))


def modf(x: ArrayLike) -> tuple[Any, Any]:
    (x,) = _promote_inexact(x)
    whole = trunc(x)
    return subtract(x, whole), whole


def ldexp(x1: ArrayLike, x2: ArrayLike) -> Any:
    (x1,) = _promote_inexact(x1)
    if not np.issubdtype(aval_of(_lift(x2)).dtype, np.integer):
        raise TypeError("ldexp: the exponents must be integers.")
    return multiply(x1, exp2(astype(x2, x1.dtype)))


def atleast_3d(*arys: ArrayLike) -> Any:
    out = []
    for a in arys:
        a = _promote(a)[0]
        if a.ndim == 0:
            a = reshape(a, (1, 1, 1))
        elif a.ndim == 1:
            a = reshape(a, (1, a.shape[0], 1))
        elif a.ndim == 2:
            a = reshape(a, a.shape + (1,))
        out.append(a)
    return out[0] if len(out) == 1 else out


def column_stack(tup: Sequence[ArrayLike]) -> Any:
    return concatenate([reshape(a, (-1, 1)) if _ndim(a) < 2 else a for a in tup], axis=1)


def dstack(tup: Sequence[ArrayLike], dtype: Any = None) -> Any:
    return concatenate([atleast_3d(a) for a in tup], axis=2, dtype=dtype)


def hsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Any]:
    return split(ary, indices_or_sections, axis=1 if _ndim(ary) > 1 else 0)


def vsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Any]:
    return split(ary, indices_or_sections, axis=0)


def dsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Any]:
    return split(ary, indices_or_sections, axis=2)


def unstack(x: ArrayLike, axis: int = 0) -> tuple[Any, ...]:
    x = _promote(x)[0]
    (axis,) = _axes(axis, x.ndim)
    moved = moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(moved.shape[0]))


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Any:
    a = _promote(a)[0]
    n = a.ndim
    (axis,) = _axes(axis, n)
    start = start + n if start < 0 else start
    if not 0 <= start <= n:
        raise ValueError(f"rollaxis: start={start} is out of range for an array of rank {n}.")
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start) if axis != start else a


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    m = _promote(m)[0]
    first, second = _axes(axes[0], m.ndim)[0], _axes(axes[1], m.ndim)[0]
    if first == second:
        raise ValueError("rot90: the two axes must differ.")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, first), second)
    order = list(range(m.ndim))
    order[first], order[second] = order[second], order[first]
    return transpose(flip(m, second), order) if k == 1 else flip(transpose(m, order), second)


def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Any:
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis=axis)


def delete(arr: ArrayLike, obj: Any, axis: int | None = None) -> Any:
    arr = _promote(arr)[0]
    if axis is None:
        arr, axis = ravel(arr), 0
    (axis,) = _axes(axis, arr.ndim)
    size = arr.shape[axis]
    drop = np.arange(size)[obj] if isinstance(obj, slice) else np.asarray(obj)
    keep = np.setdiff1d(np.arange(size), np.where(drop < 0, drop + size, drop))
    return take(arr, keep, axis=axis)


def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike = None, append: ArrayLike = None) -> Any:
    a = _promote(a)[0]
    (axis,) = _axes(axis, a.ndim)

    def edge(extra: ArrayLike) -> Any:
        extra = _promote(extra)[0]
        if extra.ndim == 0:
            shape = list(a.shape)
            shape[axis] = 1
            extra = broadcast_to(extra, shape)
        return extra

    if prepend is not None or append is not None:
        a = concatenate(([edge(prepend)] if prepend is not None else []) + [a] +
                        ([edge(append)] if append is not None else []), axis=axis)
    for _ in range(n):
        first = _take_range(a, axis, 1, a.shape[axis])
        second = _take_range(a, axis, 0, a.shape[axis] - 1)
        a = not_equal(first, second) if a.dtype == np.bool_ else subtract(first, second)
    return a


def ediff1d(ary: ArrayLike, to_end: ArrayLike = None, to_begin: ArrayLike = None) -> Any:
    flat = ravel(ary)
    result = diff(flat) if flat.shape[0] > 0 else flat
    pieces = ([ravel(to_begin)] if to_begin is not None else []) + [result] + \
        ([ravel(to_end)] if to_end is not None else [])
    return concatenate([astype(p, flat.dtype) for p in pieces]) if len(pieces) > 1 else result


def _cumulative_with_initial(kind: str, x: ArrayLike, axis: int | None, dtype: Any, include_initial: bool) -> Any:
    x = _promote(x)[0]
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{kind}: axis is required for arrays of rank {x.ndim} > 1.")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"{kind} needs an array of rank at least 1.")
    (axis,) = _axes(axis, x.ndim)
    # unlike cumsum, the Array API's cumulative_sum/prod widen small integers as sum does
    result = _cumulative("cumsum" if kind == "cumulative_sum" else "cumprod", x, axis, _accumulating_dtype(x, dtype))
    if include_initial:
        shape = list(result.shape)
        shape[axis] = 1
        start = full(shape, 0 if kind == "cumulative_sum" else 1, dtype=result.dtype)
        result = concatenate([start, result], axis=axis)
    return result


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    return _cumulative_with_initial("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Any:
    return _cumulative_with_initial("cumulative_prod", x, axis, dtype, include_initial)


def count_nonzero(a: ArrayLike, axis: Any = None, keepdims: bool = False) -> Any:
    return sum(not_equal(a, 0), axis=axis, keepdims=keepdims, dtype=dtypes.default_int_dtype())


def ptp(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return subtract(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


def average(a: ArrayLike, axis: Any = None, weights: ArrayLike = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    if weights is None:
        result = mean(a, axis=axis, keepdims=keepdims)
        total = _promote_inexact(a)[0]
        count = math.prod(_shape(total)[d] for d in _axes(axis, _ndim(total)))
        scale = full_like(result, count) if returned else None
        return (result, scale) if returned else result
    a, weights = _promote_inexact(a, weights)
    if weights.shape != a.shape:
        if axis is None or weights.ndim != 1:
            raise ValueError("average: 1-D weights need an axis; other weights must have the array's shape.")
        (single,) = _axes(axis, a.ndim)
        shape = [1] * a.ndim
        shape[single] = weights.shape[0]
        weights = broadcast_to(reshape(weights, shape), a.shape)
    scale = sum(weights, axis=axis, keepdims=keepdims)
    result = divide(sum(multiply(a, weights), axis=axis, keepdims=keepdims), scale)
    return (result, broadcast_to(scale, result.shape)) if returned else result


# NaN-ignoring reductions

def _without_nan(a: ArrayLike, fill: Any) -> Any:
    (a,) = _promote(a)
    if not np.issubdtype(a.dtype, np.inexact):
        return a
    return where(isnan(a), _cast(fill, a.dtype), a)


def nansum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    return sum(_without_nan(a, 0), axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


def nanprod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    return prod(_without_nan(a, 1), axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)


def _nan_extreme(function: Any, fill: Any, a: ArrayLike, axis: Any, keepdims: bool, initial: Any, where_: Any) -> Any:
    (a,) = _promote(a)
    if not np.issubdtype(a.dtype, np.inexact):
        return function(a, axis=axis, keepdims=keepdims, initial=initial, where=where_)
    result = function(where(isnan(a), _cast(fill, a.dtype), a), axis=axis, keepdims=keepdims, initial=initial,
                      where=where_)
    everything_nan = all(isnan(a), axis=axis, keepdims=keepdims, where=where_)
    return where(everything_nan, _cast(np.nan, result.dtype), result)


def nanmax(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    return _nan_extreme(max, -np.inf, a, axis, keepdims, initial, where)


def nanmin(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    return _nan_extreme(min, np.inf, a, axis, keepdims, initial, where)


def nanmean(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, keepdims: bool = False,
            where: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    if dtype is not None:
        a = astype(a, dtype)
    present = logical_not(isnan(a))
    if where is not None:
        present = logical_and(present, where)
    count = sum(present, axis=axis, keepdims=keepdims, dtype=a.dtype)
    return divide(nansum(a, axis=axis, keepdims=keepdims, where=where), count)


def nanvar(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None) -> Any:
    (a,) = _promote_inexact(a)
    centered = subtract(a, nanmean(a, axis=axis, keepdims=True, where=where))
    squares = real(multiply(centered, conjugate(centered))) if np.issubdtype(a.dtype, np.complexfloating) \
        else square(centered)
    present = logical_not(isnan(a))
    if where is not None:
        present = logical_and(present, where)
    count = sum(present, axis=axis, keepdims=keepdims, dtype=squares.dtype)
    return divide(nansum(squares, axis=axis, keepdims=keepdims, where=where), subtract(count, ddof))


def nanstd(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None, ddof: int = 0,
           keepdims: bool = False, where: Any = None) -> Any:
    return sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where))


def _nan_arg(function: Any, fill: Any, a: ArrayLike, axis: Any, keepdims: bool) -> Any:
    (a,) = _promote(a)
    if not np.issubdtype(a.dtype, np.inexact):
        return function(a, axis=axis, keepdims=keepdims)
    nan = isnan(a)
    result = function(where(nan, _cast(fill, a.dtype), a), axis=axis, keepdims=keepdims)
    return where(all(nan, axis=axis, keepdims=keepdims), _cast(-1, result.dtype), result)


def nanargmax(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _nan_arg(argmax, -np.inf, a, axis, keepdims)


def nanargmin(a: ArrayLike, axis: Any = None, out: None = None, keepdims: bool = False) -> Any:
    return _nan_arg(argmin, np.inf, a, axis, keepdims)


def nancumsum(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return cumsum(_without_nan(a, 0), axis=axis, dtype=dtype)


def nancumprod(a: ArrayLike, axis: Any = None, dtype: Any = None, out: None = None) -> Any:
    return cumprod(_without_nan(a, 1), axis=axis, dtype=dtype)


# order statistics

def quantile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, interpolation: Any = None) -> Any:
    return _quantile(a, q, axis, method if interpolation is None else interpolation, keepdims)


def _quantile(a: ArrayLike, q: ArrayLike, axis: Any, method: str, keepdims: bool) -> Any:
    """Sort along the reduced axes, then read (and interpolate) the order statistics at fixed positions."""
    if method not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"quantile: method {method!r} is not supported; use linear, lower, higher, nearest or "
                         "midpoint.")
    if isinstance(q, Tracer):
        raise TypeError("quantile needs concrete quantiles q (they decide which elements are read).")
    a = _promote_inexact(a)[0]
    qs = np.asarray(q, dtype=np.float64)
    if builtins.any((qs < 0).ravel()) or builtins.any((qs > 1).ravel()):
        raise ValueError("quantiles must be in the range [0, 1].")
    axes = _axes(axis, a.ndim)
    kept = [d for d in range(a.ndim) if d not in axes]
    moved = transpose(a, kept + list(axes))
    moved = reshape(moved, [a.shape[d] for d in kept] + [math.prod(a.shape[d] for d in axes)])
    ordered = sort(moved, axis=-1)
    n = ordered.shape[-1]
    position = qs * (n - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, n - 1)
    flat_low, flat_high = low.ravel(), high.ravel()
    lower_values = take(ordered, flat_low, axis=-1)
    upper_values = take(ordered, flat_high, axis=-1)
    fraction = (position - low).ravel().astype(a.dtype)
    if method == "lower":
        values = lower_values
    elif method == "higher":
        values = take(ordered, np.ceil(position).astype(np.int64).ravel(), axis=-1)
    elif method == "nearest":
        values = take(ordered, np.round(position).astype(np.int64).ravel(), axis=-1)
    elif method == "midpoint":
        higher = take(ordered, np.ceil(position).astype(np.int64).ravel(), axis=-1)
        values = multiply(add(lower_values, higher), _cast(0.5, a.dtype))
    else:
        values = add(lower_values, multiply(subtract(upper_values, lower_values), fraction))
    # NaNs sort last: a slice holding one gives NaN, as in NumPy and JAX
    if np.issubdtype(a.dtype, np.inexact):
        values = where(any(isnan(moved), axis=-1, keepdims=True), _cast(np.nan, a.dtype), values)
    values = moveaxis(values, -1, 0)  # the quantiles first
    kept_shape = [a.shape[d] for d in kept]
    if keepdims:
        kept_shape = [1 if d in axes else a.shape[d] for d in range(a.ndim)]
    return reshape(values, qs.shape + tuple(kept_shape))


def percentile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, interpolation: Any = None) -> Any:
    if isinstance(q, Tracer):
        raise TypeError("percentile needs concrete percentiles q.")
    return quantile(a, np.asarray(q, np.float64) / 100, axis, method=method, keepdims=keepdims,
                    interpolation=interpolation)


def median(a: ArrayLike, axis: Any = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    return quantile(a, 0.5, axis=axis, keepdims=keepdims)


# matrices and grids

def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Array:
    return _placed(np.tri(N, M, k, dtype=_dtype(dtype or dtypes.default_float_dtype())), None)


def _triangle(m: ArrayLike, k: int, lower: bool) -> Any:
    m = _promote(m)[0]
    if m.ndim < 2:
        raise ValueError("tril/triu need an array of rank at least 2.")
    rows, cols = m.shape[-2:]
    mask = np.tri(rows, cols, k, dtype=bool) if lower else ~np.tri(rows, cols, k - 1, dtype=bool)
    return where(mask, m, _cast(0, m.dtype, m.weak_type))


def tril(m: ArrayLike, k: int = 0) -> Any:
    return _triangle(m, k, True)


def triu(m: ArrayLike, k: int = 0) -> Any:
    return _triangle(m, k, False)


def diag(v: ArrayLike, k: int = 0) -> Any:
    v = _promote(v)[0]
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError("diag needs a 1-D or 2-D array.")
    n = v.shape[0] + builtins.abs(k)
    padded = pad(v, (0, k) if k >= 0 else (-k, 0))
    return where(np.eye(n, k=k, dtype=bool), reshape(padded, (n, 1)), _cast(0, v.dtype, v.weak_type))


def diagflat(v: ArrayLike, k: int = 0) -> Any:
    return diag(ravel(v), k)


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


def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list[Any]:
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
    return out


def kron(a: ArrayLike, b: ArrayLike) -> Any:
    a, b = _promote(a, b)
    n = builtins.max(a.ndim, b.ndim)
    a = reshape(a, (1,) * (n - a.ndim) + tuple(a.shape))
    b = reshape(b, (1,) * (n - b.ndim) + tuple(b.shape))
    product = multiply(reshape(a, [x for d in a.shape for x in (d, 1)]),
                       reshape(b, [x for d in b.shape for x in (1, d)]))
    return reshape(product, [x * y for x, y in zip(a.shape, b.shape)])


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Any:
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _promote(a, b)
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError("cross: the vectors must have 2 or 3 components.")
    both_planar = a.shape[-1] == 2 and b.shape[-1] == 2
    if a.shape[-1] == 2:
        a = pad(a, [(0, 0)] * (a.ndim - 1) + [(0, 1)])
    if b.shape[-1] == 2:
        b = pad(b, [(0, 0)] * (b.ndim - 1) + [(0, 1)])
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    if both_planar:
        return z  # the cross product of two 2-vectors is a scalar: its z component
    c = stack([subtract(multiply(a1, b2), multiply(a2, b1)), subtract(multiply(a2, b0), multiply(a0, b2)), z],
              axis=-1)
    return moveaxis(c, -1, axisc)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Any:
    x1, x2 = _promote(x1, x2)
    x1, x2 = broadcast_arrays(x1, x2)
    if np.issubdtype(x1.dtype, np.complexfloating):
        x1 = conjugate(x1)
    (axis,) = _axes(axis, x1.ndim)
    batch = tuple(d for d in range(x1.ndim) if d != axis)
    return _dot_general(x1, x2, ((axis,), (axis,)), (batch, batch))


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    return squeeze(matmul(x1, expand_dims(x2, -1)), -1)


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Any:
    x1 = _lift(x1)
    if np.issubdtype(aval_of(x1).dtype, np.complexfloating):
        x1 = conjugate(x1)
    return squeeze(matmul(expand_dims(x1, -2), x2), -2)


def trapezoid(y: ArrayLike, x: ArrayLike = None, dx: ArrayLike = 1.0, axis: int = -1) -> Any:
    y = _promote_inexact(y)[0]
    (axis,) = _axes(axis, y.ndim)
    n = y.shape[axis]
    pairs = add(_take_range(y, axis, 1, n), _take_range(y, axis, 0, n - 1))
    if x is None:
        return multiply(sum(pairs, axis=axis), divide(dx, 2.0))
    x = _promote_inexact(x)[0]
    if x.ndim == 1:
        steps = subtract(x[1:], x[:-1])
        shape = [1] * y.ndim
        shape[axis] = n - 1
        steps = reshape(steps, shape)
    else:
        steps = diff(x, axis=axis)
    return divide(sum(multiply(pairs, steps), axis=axis), 2.0)


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike = None, *,
                 method: str = "scan") -> Any:
    """Where `v` would go in the sorted 1-D `a`: the number of elements of `a` before each value."""
    a = _promote(a)[0]
    if a.ndim != 1:
        raise ValueError("searchsorted: a must be one-dimensional.")
    if sorter is not None:
        a = take(a, sorter)
    a, v = _promote(a, v)
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', not {side!r}.")
    before = (less if side == "left" else less_equal)(a, expand_dims(v, -1))
    return sum(before, axis=-1, dtype=dtypes.default_int_dtype())


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Any:
    element = _promote(element)[0]
    found = any(equal(expand_dims(element, -1), ravel(test_elements)), axis=-1)
    return logical_not(found) if invert else found


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Any:
    try:
        shape = np.broadcast_shapes(_shape(a1), _shape(a2))
    except ValueError:
        return array(False)
    return all(equal(broadcast_to(a1, shape), broadcast_to(a2, shape)))


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Any:
    p, x = _promote(p, x)
    result = zeros_like(x) if p.shape[0] == 0 else broadcast_to(p[0], x.shape)
    for i in range(1, p.shape[0]):
        result = add(multiply(result, x), p[i])
    return result


def bincount(x: ArrayLike, weights: ArrayLike = None, minlength: int = 0, *, length: int | None = None) -> Any:
    x = _lift(x)
    if not np.issubdtype(aval_of(x).dtype, np.integer):
        raise TypeError("bincount needs integer input.")
    if length is None:
        if isinstance(x, Tracer):
            raise TypeError("bincount under jit needs a static length=.")
        length = builtins.max(int(np.max(np.asarray(x), initial=-1)) + 1, minlength)
    values = ones(_shape(x), dtypes.default_int_dtype()) if weights is None else _promote(weights)[0]
    base = zeros(length, values.dtype)
    flat = ravel(x)
    return base.at[clip(flat, 0, None)].add(where(less(flat, 0), _cast(0, values.dtype), ravel(values)))


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, size: Any = None, fill_value: Any = None, equal_nan: bool = True) -> Any:
    """As numpy.unique, computed on the host: the result's shape depends on the data (eager only)."""
    if isinstance(ar, Tracer):
        raise TypeError("unique has a data-dependent shape, so it needs concrete values (it cannot run under jit).")
    if size is not None:
        raise NotImplementedError("unique(size=...) is not supported; call it outside jit.")
    value = np.asarray(ar)
    out = np.unique(value, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts,
                    axis=axis, equal_nan=equal_nan)
    if not isinstance(out, tuple):
        return _host_result(out, ar)
    index_dtype = dtypes.default_int_dtype()
    return tuple([_host_result(out[0], ar)] + [_host_result(o.astype(index_dtype), ar) for o in out[1:]])


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *, size: Any = None,
             fill_value: Any = 0) -> Any:
    if isinstance(condition, Tracer):
        raise TypeError("compress needs a concrete condition (its result's shape depends on it).")
    keep = np.nonzero(np.asarray(condition).ravel())[0]
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    return take(a, keep[keep < _shape(a)[axis]], axis=axis)


def extract(condition: ArrayLike, arr: ArrayLike) -> Any:
    if isinstance(condition, Tracer):
        raise TypeError("extract needs a concrete condition (its result's shape depends on it).")
    return compress(np.ravel(np.asarray(condition)), ravel(arr))


def cov(m: ArrayLike, y: ArrayLike = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: ArrayLike = None, aweights: ArrayLike = None) -> Any:
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov: fweights and aweights are not supported.")
    m = atleast_2d(_promote_inexact(m)[0])
    if not rowvar and m.shape[0] != 1:
        m = m.T
    if y is not None:
        y = atleast_2d(_promote_inexact(y)[0])
        if not rowvar and y.shape[0] != 1:
            y = y.T
        m = concatenate([m, y], axis=0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    centered = subtract(m, mean(m, axis=1, keepdims=True))
    count = m.shape[1] - ddof
    product = matmul(centered, conjugate(centered).T)
    return squeeze(divide(product, float(count)))


def corrcoef(x: ArrayLike, y: ArrayLike = None, rowvar: bool = True) -> Any:
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return divide(c, c)
    d = diagonal(c)
    scale = sqrt(real(d)) if np.issubdtype(c.dtype, np.complexfloating) else sqrt(d)
    c = divide(divide(c, expand_dims(scale, 1)), expand_dims(scale, 0))
    return clip(c, -1, 1) if not np.issubdtype(c.dtype, np.complexfloating) else c


def logspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, base: ArrayLike = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    exponents = linspace(start, stop, num, endpoint, dtype=None, axis=axis)
    result = power(_cast(base, exponents.dtype), exponents)
    return result if dtype is None else astype(result, dtype)


def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    value = np.geomspace(np.asarray(start), np.asarray(stop), num, endpoint, axis=axis)
    kind = _dtype(dtype) if dtype is not None else \
        (dtypes.default_complex_dtype() if np.iscomplexobj(value) else dtypes.default_float_dtype())
    return _placed(value.astype(kind), None)


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
