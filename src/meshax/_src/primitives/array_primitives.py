"""The primitive set (the level of jax.lax): NumPy implementations, shape rules, sharding rules.

Primitives take arrays of one dtype (meshax.numpy promotes before binding) and static
parameters; each implementation runs on one device's shards.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from . import cpu_kernels, float32_math
from . import indexing_kernels as K
from ..sharding import placement_rules as rules
from ..sharding.explicit_rules import gather_sources
from ..arrays.placement import device_put, sharding_constraint
from ..core.core import Primitive, ShapedArray, define_primitive
from ..interpreters.eager import eager_rules
from ..interpreters.shard_map import device_rules
from ..core.dtypes import iinfo, issubdtype

# ---- helpers --------------------------------------------------------------------------------------------


def _define(name: str, impl: Callable[..., Any], abstract_eval: Callable[..., Any], rule: Callable[..., Any],
            multiple_results: bool = False, needs_local_shape: bool = False, needs_local_box: bool = False,
            parallel_devices: bool = False) -> Primitive:
    """A primitive; `needs_local_box`: its impl gets `local_box=`, the block of its first input that the device
    holds, in global coordinates (None inside shard_map, where blocks are whole arrays); `parallel_devices`:
    a heavy kernel whose per-device calls run side by side."""
    return define_primitive(name, impl, abstract_eval, rule, multiple_results, needs_local_shape=needs_local_shape,
                            needs_local_box=needs_local_box, parallel_devices=parallel_devices)


def _same_aval(x: ShapedArray, *rest: ShapedArray, **_: Any) -> ShapedArray:
    return ShapedArray(rules.broadcast_shapes(x.shape, *[r.shape for r in rest]), x.dtype,
                       all(a.weak_type for a in (x, *rest)))


def _bool_aval(*avals: ShapedArray, **_: Any) -> ShapedArray:
    return ShapedArray(rules.broadcast_shapes(*[a.shape for a in avals]), np.dtype(np.bool_),
                       all(a.weak_type for a in avals))


def _plain(function: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def impl(*xs: np.ndarray, **_: Any) -> np.ndarray:
        return function(*xs)

    if function in _SAME_TYPE_UFUNCS:  # whose out= an executor may give (cpu_executor.py)
        impl.into = function
    impl.ufunc = function if isinstance(function, np.ufunc) else None  # what codegen.py may call directly
    return impl


# NumPy functions whose result has their operands' type (given one type) and that take out=
_SAME_TYPE_UFUNCS = frozenset({np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.negative, np.square,
                               np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.invert})


# ---- elementwise --------------------------------------------------------------------------------------------

_TRANSCENDENTAL = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log1p": np.log1p,
    "log2": np.log2, "log10": np.log10, "cbrt": np.cbrt,
}
_SIMPLE_UNARY = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "sqrt": np.sqrt, "square": np.square, "reciprocal": np.reciprocal, "not": np.invert, "real": np.real,
    "imag": np.imag, "conj": np.conj, "trunc": np.trunc,
}
_PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit}
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floor_divide": np.floor_divide,
    "rem": np.remainder, "fmod": np.fmod, "pow": np.power, "max": np.maximum, "min": np.minimum,
    "atan2": np.arctan2, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "shift_left": np.left_shift, "shift_right": np.right_shift, "hypot": np.hypot, "copysign": np.copysign,
    "nextafter": np.nextafter,
}
_COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                "ge": np.greater_equal}


def _real_aval(x: ShapedArray, **_: Any) -> ShapedArray:
    dtype = np.empty((), x.dtype).real.dtype
    return ShapedArray(x.shape, dtype, x.weak_type)


UNARY: dict[str, Primitive] = {}
for _name, _fn in {**_TRANSCENDENTAL, "logistic": None, "erf": None}.items():
    UNARY[_name] = _define(_name, float32_math.transcendental(_name, _fn), _same_aval, rules.elementwise)
for _name, _fn in _SIMPLE_UNARY.items():
    UNARY[_name] = _define(_name, _plain(_fn), _real_aval if _name in ("abs", "real", "imag") else _same_aval,
                           rules.elementwise)
for _name, _fn in _PREDICATES.items():
    UNARY[_name] = _define(_name, _plain(_fn), _bool_aval, rules.elementwise)


def _integer_pow(x: np.ndarray, *, y: int) -> np.ndarray:
    """x ** y by repeated squaring, each product rounded to x's dtype (as XLA's integer_pow); 1 / x ** -y below 0."""
    acc, k = None, abs(y)  # acc: the product so far (None for 1, which no product needs)
    while k:
        if k & 1:
            acc = x if acc is None else acc * x
        k >>= 1
        if k:
            x = x * x
    if acc is None or (acc is x and y > 0):  # y == 0, or y == 1: a result of its own
        acc = np.ones_like(x) if acc is None else x.copy()
    return np.reciprocal(acc) if y < 0 else acc


UNARY["integer_pow"] = _define("integer_pow", _integer_pow, _same_aval, rules.elementwise)  # param y: the power
BINARY: dict[str, Primitive] = {n: _define(n, _plain(f), _same_aval, rules.elementwise) for n, f in _BINARY.items()}
BINARY.update({n: _define(n, _plain(f), _bool_aval, rules.elementwise) for n, f in _COMPARISONS.items()})
BINARY["logaddexp"] = _define("logaddexp", float32_math.logaddexp, _same_aval, rules.elementwise)


def _select_aval(pred: ShapedArray, on_true: ShapedArray, on_false: ShapedArray) -> ShapedArray:
    return ShapedArray(rules.broadcast_shapes(pred.shape, on_true.shape, on_false.shape), on_true.dtype,
                       on_true.weak_type and on_false.weak_type)


select = _define("select", cpu_kernels.select, lambda p, t, f, **_: _select_aval(p, t, f), rules.elementwise)


def convert_values(x: Any, new_dtype: Any) -> np.ndarray:
    """`x` (a NumPy value) as `new_dtype`, converted as XLA does on CPU: a float becomes an integer by truncation,
    saturated to the integer type's range (NaN gives 0, -1.5 gives 0 in an unsigned type); a complex value
    becomes a real one by its real part (and a bool by being nonzero). Integers narrowed wrap, as in NumPy."""
    x, new_dtype = np.asarray(x), np.dtype(new_dtype)
    if new_dtype.kind == "f" and x.dtype.kind in "biuf":  # to a NumPy float from a bool, an integer or a float
        return x.astype(new_dtype, copy=False)
    if issubdtype(x.dtype, np.complexfloating) and not issubdtype(new_dtype, np.complexfloating):
        x = x != 0 if new_dtype == np.bool_ else x.real
    if issubdtype(x.dtype, np.inexact) and issubdtype(new_dtype, np.integer):
        return _float_to_int(x, new_dtype)
    return x.astype(new_dtype, copy=False)


def _float_to_int(x: np.ndarray, new_dtype: np.dtype) -> np.ndarray:
    values = np.trunc(x.astype(np.float64))
    info = iinfo(new_dtype)
    high, low = values >= float(info.max), values <= float(info.min)
    inside = np.where(np.isnan(values) | high | low, 0, values).astype(new_dtype)
    limits = np.where(high, np.asarray(info.max, new_dtype), np.asarray(info.min, new_dtype))
    return np.where(high | low, limits, inside).astype(new_dtype, copy=False)


def _convert_impl(x: np.ndarray, *, new_dtype: np.dtype, weak_type: bool = False) -> np.ndarray:
    return convert_values(x, new_dtype)


def _convert_aval(x: ShapedArray, *, new_dtype: np.dtype, weak_type: bool = False) -> ShapedArray:
    return ShapedArray(x.shape, np.dtype(new_dtype), weak_type)


convert_element_type = _define("convert_element_type", _convert_impl, _convert_aval, rules.elementwise)

# ---- reductions ------------------------------------------------------------------------------------------------


def _reduce_aval(kind: str):
    def aval(x: ShapedArray, *, axes: tuple[int, ...], keepdims: bool = False, **_: Any) -> ShapedArray:
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdims else \
            tuple(n for d, n in enumerate(x.shape) if d not in axes)
        dtype = np.dtype(np.bool_) if kind in ("or", "and") else x.dtype
        return ShapedArray(shape, dtype, x.weak_type)

    return aval


def _reduce_impl(function: Callable[..., np.ndarray]):
    def impl(x: np.ndarray, *, axes: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
        return function(x, axis=axes, keepdims=keepdims)

    return impl


def _max(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    return np.maximum.reduce(x, axis=axis, keepdims=keepdims, initial=_lowest(np.asarray(x).dtype))


def _min(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    return np.minimum.reduce(x, axis=axis, keepdims=keepdims, initial=_highest(np.asarray(x).dtype))


@functools.lru_cache(maxsize=None)
def _lowest(dtype: np.dtype) -> Any:
    """The identity of max in `dtype` (complex values compare lexicographically, as in NumPy and JAX)."""
    if dtype == np.bool_:
        return False
    if issubdtype(dtype, np.complexfloating):
        return complex(-np.inf, -np.inf)
    return -np.inf if issubdtype(dtype, np.floating) else iinfo(dtype).min


@functools.lru_cache(maxsize=None)
def _highest(dtype: np.dtype) -> Any:
    if dtype == np.bool_:
        return True
    if issubdtype(dtype, np.complexfloating):
        return complex(np.inf, np.inf)
    return np.inf if issubdtype(dtype, np.floating) else iinfo(dtype).max


# the ufuncs' reductions themselves (np.sum and np.prod call them, after a few microseconds of dispatch)
_REDUCTIONS = {"sum": cpu_kernels.reduce_sum, "prod": np.multiply.reduce, "max": _max, "min": _min, "or": np.any, "and": np.all}
REDUCE = {kind: _define(f"reduce_{kind}", _reduce_impl(fn), _reduce_aval(kind), rules.reduction(kind))
          for kind, fn in _REDUCTIONS.items()}


def _arg_impl(function: Callable[..., np.ndarray]):
    def impl(x: np.ndarray, *, axes: tuple[int, ...], index_dtype: np.dtype) -> np.ndarray:
        return function(x, axis=axes[0]).astype(index_dtype)

    return impl


def _arg_aval(x: ShapedArray, *, axes: tuple[int, ...], index_dtype: np.dtype) -> ShapedArray:
    return ShapedArray(tuple(n for d, n in enumerate(x.shape) if d not in axes), np.dtype(index_dtype))


argmax = _define("argmax", _arg_impl(np.argmax), _arg_aval, rules.dropping_axes)
argmin = _define("argmin", _arg_impl(np.argmin), _arg_aval, rules.dropping_axes)


def _cumulative(function: Callable[..., np.ndarray]):
    def impl(x: np.ndarray, *, axis: int, reverse: bool = False) -> np.ndarray:
        if reverse:
            return np.flip(function(np.flip(x, axis), axis=axis), axis)
        return function(x, axis=axis)

    return impl


def _cumulative_aval(x: ShapedArray, **_: Any) -> ShapedArray:
    return x


CUMULATIVE = {
    "cumsum": _define("cumsum", _cumulative(np.cumsum), _cumulative_aval, rules.along_axes("axis")),
    "cumprod": _define("cumprod", _cumulative(np.cumprod), _cumulative_aval, rules.along_axes("axis")),
    "cummax": _define("cummax", _cumulative(np.maximum.accumulate), _cumulative_aval, rules.along_axes("axis")),
    "cummin": _define("cummin", _cumulative(np.minimum.accumulate), _cumulative_aval, rules.along_axes("axis")),
}

# ---- contractions -------------------------------------------------------------------------------------------


def _dot_general_aval(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: Any,
                      preferred_element_type: Any = None, out_sharding: Any = None) -> ShapedArray:
    (lc, rc), (lb, rb) = dimension_numbers
    for l, r in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.shape[l] != rhs.shape[r]:
            raise TypeError(
                f"dot_general: dimension {l} of the left operand {lhs} has size {lhs.shape[l]} but dimension {r} "
                f"of the right operand {rhs} has size {rhs.shape[r]}; they must match."
            )
    shape = tuple(lhs.shape[d] for d in lb) + \
        tuple(n for d, n in enumerate(lhs.shape) if d not in lc and d not in lb) + \
        tuple(n for d, n in enumerate(rhs.shape) if d not in rc and d not in rb)
    dtype = np.dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


dot_general = _define("dot_general", cpu_kernels.dot_general, _dot_general_aval, rules.dot_general,
                      parallel_devices=True)

# ---- shape ops ---------------------------------------------------------------------------------------------------


def _reshape_impl(x: np.ndarray, *, new_sizes: tuple[int, ...], local_shapes: list[tuple[int, ...]],
                  out_sharding: Any = None) -> np.ndarray:
    return x.reshape(local_shapes[0])


reshape = _define("reshape", _reshape_impl,
                  lambda x, *, new_sizes, out_sharding=None: ShapedArray(tuple(new_sizes), x.dtype, x.weak_type),
                  rules.reshape, needs_local_shape=True)

transpose = _define("transpose", lambda x, *, permutation: np.transpose(x, permutation),
                    lambda x, *, permutation: ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type),
                    rules.transpose)


def _broadcast_in_dim_impl(x: np.ndarray, *, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...],
                           local_shapes: list[tuple[int, ...]]) -> np.ndarray:
    target = local_shapes[0]
    expanded = [1] * len(target)
    for i, dim in enumerate(broadcast_dimensions):
        expanded[dim] = x.shape[i]
    if math.prod(target) > 4096:  # a view, no memory (smaller ones are copies, quicker to make: 1 against 3 us)
        return np.broadcast_to(x.reshape(expanded), target)
    out = np.empty(target, x.dtype)
    np.copyto(out, x.reshape(expanded))
    return out


broadcast_in_dim = _define(
    "broadcast_in_dim", _broadcast_in_dim_impl,
    lambda x, *, shape, broadcast_dimensions: ShapedArray(tuple(shape), x.dtype, x.weak_type),
    rules.broadcast_in_dim, needs_local_shape=True)


def _whole_dims_op(name: str, impl: Callable[..., np.ndarray], aval: Callable[..., ShapedArray],
                   axes_param: str, vectors_whole: bool = False) -> Primitive:
    return _define(name, impl, aval, rules.along_axes(axes_param, vectors_whole))


def _slice_aval(x: ShapedArray, *, index: tuple[Any, ...]) -> ShapedArray:
    return ShapedArray(_indexed_shape(x.shape, index), x.dtype, x.weak_type)


def _indexed_shape(shape: tuple[int, ...], index: tuple[Any, ...]) -> tuple[int, ...]:
    """The shape of x[index] without touching data (a zero-stride stand-in array)."""
    dummy = np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), shape=shape, strides=(0,) * len(shape))
    return dummy[index].shape


def _slice_rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, index: tuple[Any, ...],
                **_: Any) -> rules.Layout:
    """Basic indexing: dimensions cut by a partial slice or an integer are whole on each device; a partially
    sliced one is split again afterwards as the input was. None adds a dimension. An empty result is
    replicated, as JAX's is."""
    spec, shape = list(specs[0]), avals[0].shape
    out: list[tuple[str, ...]] = []
    result: list[tuple[str, ...]] = []
    dim = 0
    for entry in index:
        if entry is None:
            out.append(())
            result.append(())
            continue
        whole = isinstance(entry, slice) and entry.indices(shape[dim]) == (0, shape[dim], 1)
        if isinstance(entry, slice):
            out.append(spec[dim] if whole else ())
            result.append(spec[dim])
        if not whole:
            spec[dim] = ()
        dim += 1
    out.extend(spec[dim:])
    result.extend(spec[dim:])
    if 0 in _indexed_shape(shape, index):
        result = list(rules.replicated(len(out)))
    return rules.Layout([tuple(spec)], [tuple(out)], result_specs=[tuple(result)])


static_slice = _define("slice", lambda x, *, index: x[index], _slice_aval, _slice_rule)

flip = _whole_dims_op("flip", lambda x, *, axes: np.flip(x, axes), lambda x, *, axes: x, "axes")
roll = _whole_dims_op("roll", lambda x, *, shift, axes: np.roll(x, shift, axes), lambda x, *, shift, axes: x, "axes")


def _pad_aval(x: ShapedArray, *, pad_width: tuple[tuple[int, int], ...], mode: str, axes: tuple[int, ...],
              constant_values: Any = 0) -> ShapedArray:
    return ShapedArray(tuple(n + a + b for n, (a, b) in zip(x.shape, pad_width)), x.dtype, x.weak_type)


pad = _whole_dims_op("pad", K.pad, _pad_aval, "axes")


def _sort_impl(x: np.ndarray, *, axis: int, descending: bool = False) -> np.ndarray:
    out = np.sort(x, axis=axis, kind="stable")
    return np.flip(out, axis) if descending else out


sort = _whole_dims_op("sort", _sort_impl, lambda x, *, axis, descending=False: x, "axis", vectors_whole=True)
argsort = _whole_dims_op(
    "argsort", lambda x, *, axis, index_dtype: np.argsort(x, axis=axis, kind="stable").astype(index_dtype),
    lambda x, *, axis, index_dtype: ShapedArray(x.shape, np.dtype(index_dtype)), "axis", vectors_whole=True)


def _concatenate_aval(*xs: ShapedArray, axis: int) -> ShapedArray:
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return ShapedArray(tuple(shape), xs[0].dtype, all(x.weak_type for x in xs))


def _concatenate_rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, axis: int, **_: Any) -> rules.Layout:
    """Each dimension keeps the split its inputs agree on (inputs not split along it do not count; a
    disagreement leaves it whole). The joined dimension is joined whole on each device, then cut."""
    agreed = rules.agreed_spec(specs)
    inputs = rules.unshard_dims(agreed, [axis])
    return rules.Layout([inputs] * len(avals), [inputs], result_specs=[agreed])


def _concatenate_impl(*xs: np.ndarray, axis: int, out: np.ndarray | None = None) -> np.ndarray:
    return np.concatenate(xs, axis=axis, out=out)


_concatenate_impl.writes_out = True  # given `out` (of the result's shape and type), the result is left there
concatenate = _define("concatenate", _concatenate_impl, _concatenate_aval, _concatenate_rule)


def _gather_aval(x: ShapedArray, *indices: ShapedArray, index: tuple[Any, ...]) -> ShapedArray:
    arrays = iter(np.zeros(i.shape, np.intp if i.dtype != np.bool_ else np.bool_) for i in indices)
    return ShapedArray(_indexed_shape(x.shape, tuple(next(arrays) if e == "array" else e for e in index)),
                       x.dtype, x.weak_type)


def _gather_rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, index: tuple[Any, ...],
                 **_: Any) -> rules.Layout:
    """Dimensions taken whole by a slice keep their split; the dimensions that index arrays or integers index
    are whole on each device; the result's dimensions that come from the index arrays split as the arrays do
    (an embedding looked up by a batch split over devices gives rows split likewise, as JAX's); partially sliced
    dimensions are split again afterwards, unless index arrays take part (then they stay whole, as JAX's)."""
    x, arrays = avals[0], avals[1:]
    spec = [entry if isinstance(i, slice) and i.indices(n) == (0, n, 1) else ()
            for entry, i, n in zip(specs[0], index, x.shape)]
    if not arrays:
        sources = gather_sources(index, 0)
        return rules.Layout([tuple(spec)], [tuple(() if d is None else spec[d] for d in sources)],
                            result_specs=[tuple(() if d is None else specs[0][d] for d in sources)])
    shape = rules.broadcast_shapes(*[a.shape for a in arrays])
    array_entries = _index_array_entries(specs[1:], arrays, shape, rules.used_axes(spec))
    entries = iter(array_entries)
    out = tuple(next(entries) if d is None else spec[d] for d in gather_sources(index, len(shape)))
    array_specs = [tuple(array_entries[len(shape) - a.ndim + d] if n == shape[len(shape) - a.ndim + d] else ()
                         for d, n in enumerate(a.shape)) for a in arrays]
    return rules.Layout([tuple(spec)] + array_specs, [out])


def _index_array_entries(specs: Sequence[rules.Spec], arrays: Sequence[ShapedArray], shape: tuple[int, ...],
                         taken: set[str]) -> list[tuple[str, ...]]:
    """How each dimension of the broadcast index arrays (of `shape`) is split: as the arrays that span it agree,
    without the mesh axes in `taken` (the operand's); whole where boolean masks take part (their results' sizes
    depend on their values)."""
    if any(a.dtype == np.bool_ for a in arrays):
        return [()] * len(shape)
    entries = []
    for d, n in enumerate(shape):
        spanning = [spec[d - len(shape) + a.ndim] for spec, a in zip(specs, arrays)
                    if d - len(shape) + a.ndim >= 0 and a.shape[d - len(shape) + a.ndim] == n > 1]
        entry = rules.unused_prefix(rules.agreed_entry(spanning), taken)
        taken = taken | set(entry)
        entries.append(entry)
    return entries


gather = _define("gather", K.gather, lambda x, *ix, index: _gather_aval(x, *ix, index=index), _gather_rule)


def _take_along_aval(x: ShapedArray, idx: ShapedArray, *, axis: int) -> ShapedArray:
    around = rules.broadcast_shapes(*[a.shape[:axis] + (1,) + a.shape[axis + 1:] for a in (x, idx)])
    return ShapedArray(around[:axis] + (idx.shape[axis],) + around[axis + 1:], x.dtype, x.weak_type)


def _take_along_rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, axis: int,
                     mesh_shape: dict[str, int], **_: Any) -> rules.Layout:
    """An elementwise op of the operand and the indices on the other dimensions; along `axis` the operand is
    whole and the result keeps the indices' split."""
    around = [ShapedArray(a.shape[:axis] + (1,) + a.shape[axis + 1:], a.dtype) for a in avals]
    layout = rules.elementwise([rules.unshard_dims(s, [axis]) for s in specs], around, mesh_shape=mesh_shape)
    out = list(layout.out_specs[0])
    out[axis] = rules.unused_prefix(specs[1][axis], rules.used_axes(tuple(out)))
    layout.in_specs[1] = tuple(out[axis] if d == axis else e for d, e in enumerate(layout.in_specs[1]))
    layout.out_specs = [tuple(out)]
    return layout


take_along = _define("take_along", K.take_along, _take_along_aval, _take_along_rule)


def _scatter_rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, index: tuple[Any, ...],
                  **_: Any) -> rules.Layout:
    """Each device applies the updates that land in its block of the operand; the updates and index arrays
    are whole on every device. The result splits as the operand, except that (as JAX's) in a window taken
    whole by a slice the updates have a say: a split only they have is taken, a disagreement leaves the
    dimension whole."""
    out = list(specs[0])
    if "array" not in index and None not in index:
        x, y = avals[0], avals[1]
        window = [d for d, entry in enumerate(index) if isinstance(entry, slice)]
        offset = len(window) - y.ndim  # the updates broadcast against the window from the right
        changed = []
        for t, d in enumerate(window):
            whole = index[d].indices(x.shape[d]) == (0, x.shape[d], 1)
            if whole and t >= offset and y.shape[t - offset] == x.shape[d]:
                out[d] = rules.agreed_entry((specs[0][d], specs[1][t - offset]))
                changed.append(d)
        taken = {name for d, entry in enumerate(out) if d not in changed for name in entry}
        for d in changed:  # an axis the operand's own split uses is not taken again
            out[d] = rules.unused_prefix(out[d], taken)
            taken |= set(out[d])
    return rules.Layout([tuple(out)] + [rules.replicated(a.ndim) for a in avals[1:]], [tuple(out)])


scatter = _define("scatter", K.scatter, lambda x, y, *ix, index, mode: x, _scatter_rule, needs_local_box=True)


def _iota_impl(*, shape: tuple[int, ...], dtype: np.dtype, dimension: int, local_shapes: Any) -> np.ndarray:
    return np.broadcast_to(np.arange(shape[dimension], dtype=dtype).reshape(
        [-1 if d == dimension else 1 for d in range(len(shape))]), shape)


iota = _define("iota", _iota_impl, lambda *, shape, dtype, dimension: ShapedArray(tuple(shape), np.dtype(dtype)),
               lambda specs, avals, **p: rules.replicate_all(specs, avals, p["out_ndims"]), needs_local_shape=True)


eager_rules[sharding_constraint] = lambda x, *, sharding: device_put(x, sharding)
device_rules[sharding_constraint] = lambda trace, x, *, sharding: x  # inside shard_map blocks are per device
