"""meshax.numpy's shape functions: reshaping, transposing, broadcasting, joining and splitting arrays, and
reordering their elements (flip, roll, rot90, sort)."""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from ..core import dtypes
from ..core.core import ConcretizationTypeError, TracerArrayConversionError, TracerIntegerConversionError
from ..primitives import array_primitives as P
from .promotion import ArrayLike, _as_array, _axes, _cast, _dims, _ndim, _promote, _shape, _weak
from .ufuncs import add, astype, floor, multiply, round, subtract, true_divide
from ..arrays.key_arrays import KeyArray


def reshape(a: ArrayLike, shape: Any, order: str = "C", *, copy: bool | None = None, out_sharding: Any = None) -> Any:
    """`a` with a new shape (one dimension may be -1), its elements read and placed in row-major ('C') or
    column-major ('F') order; `out_sharding` lays out the result (a PartitionSpec over the mesh in use, or a
    NamedSharding), as JAX needs where Explicit axes make the result's sharding ambiguous. `copy` changes
    nothing: arrays are immutable."""
    if order == "F":
        return transpose(reshape(transpose(a), _dims(shape)[::-1], out_sharding=out_sharding))
    if order == "A":
        raise NotImplementedError("np.reshape order=A is not implemented.")
    if order != "C":
        raise ValueError(f"Unexpected value for 'order' argument: {order}.")
    a = _promote(a)[0]
    shape = _dims(shape)
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
    if out_sharding is not None:
        return P.reshape.bind(a, new_sizes=shape, out_sharding=getattr(out_sharding, "spec", out_sharding))
    if shape == tuple(a.shape):
        return _as_array(a)
    return P.reshape.bind(a, new_sizes=shape)


def ravel(a: ArrayLike, order: str = "C", *, out_sharding: Any = None) -> Any:
    """`a` as one dimension, read in row-major ('C') or column-major ('F') order."""
    if order in ("A", "K"):
        raise NotImplementedError(f"Ravel not implemented for order={order!r}.")
    return reshape(a, (-1,), order, out_sharding=out_sharding)


def transpose(a: ArrayLike, axes: Any = None) -> Any:
    a = _promote(a)[0]
    permutation = tuple(reversed(range(a.ndim))) if axes is None else _axes(axes, a.ndim)
    if sorted(permutation) != list(range(a.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of {a.ndim} dimensions.")
    if permutation == tuple(range(a.ndim)):
        return a
    return P.transpose.bind(a, permutation=permutation)


def permute_dims(a: ArrayLike, /, axes: Any) -> Any:
    return transpose(a, axes)


def matrix_transpose(x: ArrayLike, /) -> Any:
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
    """`a` with a new dimension of size 1 at each of `axis` (an integer or any sequence of them)."""
    a = _promote(a)[0]
    axis = (axis,) if isinstance(axis, (int, np.integer)) or np.ndim(axis) == 0 else tuple(axis)
    axes = sorted(_axes(axis, a.ndim + len(axis)))
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


def broadcast_to(array: ArrayLike, shape: Any, *, out_sharding: Any = None) -> Any:
    if out_sharding is not None:
        raise NotImplementedError(f"broadcast_to(out_sharding={out_sharding!r}) is not supported by meshax.")
    a = _promote(array)[0]
    shape = _dims(shape)
    if builtins.any(n < 0 for n in shape):
        raise ValueError(f"broadcast_to: negative dimensions are not allowed; got shape {shape}.")
    if tuple(a.shape) == shape:
        return _as_array(a)
    if len(shape) < a.ndim or builtins.any(n not in (1, m) for n, m in zip(a.shape[::-1], shape[::-1])):
        raise ValueError(f"cannot broadcast an array of shape {a.shape} to shape {shape}.")
    dims = tuple(range(len(shape) - a.ndim, len(shape)))
    return P.broadcast_in_dim.bind(a, shape=shape, broadcast_dimensions=dims)


def broadcast_arrays(*args: ArrayLike) -> tuple[Any, ...]:
    shape = broadcast_shapes(*[_shape(a) for a in args])
    return tuple(broadcast_to(a, shape) for a in args)  # a tuple, as JAX 0.12's


def atleast_1d(*arys: ArrayLike) -> Any:
    out = tuple(reshape(a, (1,)) if _ndim(a) == 0 else _as_array(_promote(a)[0]) for a in arys)
    return out[0] if len(out) == 1 else out  # several: a tuple, as JAX 0.12's


def atleast_2d(*arys: ArrayLike) -> Any:
    out = tuple(reshape(a, (1,) * (2 - _ndim(a)) + _shape(a)) if _ndim(a) < 2 else _as_array(_promote(a)[0])
                for a in arys)
    return out[0] if len(out) == 1 else out  # several: a tuple, as JAX 0.12's


def concatenate(arrays: Sequence[ArrayLike], axis: int | None = 0, dtype: Any = None) -> Any:
    if not len(arrays):
        raise ValueError("need at least one array to concatenate.")
    if builtins.all(isinstance(a, KeyArray) for a in arrays) and axis is not None and dtype is None:
        (axis,) = _axes(axis, arrays[0].ndim)  # typed keys: join their key data along the same key axis
        return KeyArray(concatenate([a._data for a in arrays], axis=axis))
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
    return P.concatenate.bind(*arrays, axis=axis) if len(arrays) > 1 else _as_array(first)


def concat(arrays: Sequence[ArrayLike], /, *, axis: int | None = 0) -> Any:
    return concatenate(arrays, axis=axis)


def stack(arrays: Sequence[ArrayLike], axis: int = 0, out: None = None, dtype: Any = None) -> Any:
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.stack is not supported.")
    if not len(arrays):
        raise ValueError("need at least one array to stack.")
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"all input arrays must have the same shape to stack; got {sorted(shapes)}.")
    ndim = len(shapes.pop()) + 1
    (axis,) = _axes(axis, ndim)
    if builtins.all(isinstance(a, KeyArray) for a in arrays) and dtype is None:
        return concatenate([a.reshape(a.shape[:axis] + (1,) + a.shape[axis:]) for a in arrays], axis=axis)
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis, dtype=dtype)


def vstack(tup: Sequence[ArrayLike], dtype: Any = None) -> Any:
    return concatenate([atleast_2d(a) for a in tup], axis=0, dtype=dtype)


def hstack(tup: Sequence[ArrayLike], dtype: Any = None) -> Any:
    arrays = [atleast_1d(a) for a in tup]
    return concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1, dtype=dtype)


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


_PAD_OPTIONS = {"constant": ("constant_values",), "edge": (), "wrap": (), "empty": (), "reflect": ("reflect_type",),
                "symmetric": ("reflect_type",), "linear_ramp": ("end_values",), "maximum": ("stat_length",),
                "minimum": ("stat_length",), "mean": ("stat_length",), "median": ("stat_length",)}


def _pairs(value: Any, ndim: int, dtype: Any = np.int64) -> np.ndarray:
    """A pad argument (a scalar, a pair, or one pair per axis) as an (ndim, 2) array."""
    return np.broadcast_to(np.asarray(value, dtype=dtype), (ndim, 2))


def pad(array: ArrayLike, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    """`array` padded by `pad_width` as numpy.pad: by `mode` ('constant', 'edge', 'wrap', 'empty', 'reflect' and
    'symmetric' with `reflect_type`, 'linear_ramp' with `end_values`, 'maximum', 'minimum', 'mean' and 'median'
    with `stat_length`) or by a function `mode(vector, iaxis_pad_width, iaxis, kwargs)` returning each padded
    1-D vector (already padded with zeros), applied along one axis after another."""
    array = _promote(array)[0]
    try:
        widths = tuple((int(a), int(b)) for a, b in _pairs(pad_width, array.ndim))
    except (ConcretizationTypeError, TracerIntegerConversionError, TracerArrayConversionError):
        raise ConcretizationTypeError(f"pad_width argument of jnp.pad must be concrete (static); got the traced "
                                      f"{pad_width!r}.") from None
    if builtins.any(w < 0 for pair in widths for w in pair):
        raise ValueError(f"index can't contain negative values; got pad_width={pad_width!r}.")
    if callable(mode):
        return _pad_with_function(array, widths, mode, kwargs)
    if mode not in _PAD_OPTIONS:
        raise NotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad.")
    unsupported = set(kwargs) - set(_PAD_OPTIONS[mode])
    if unsupported:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unsupported}")
    if mode in ("reflect", "symmetric") and kwargs.get("reflect_type", "even") != "even":
        if kwargs["reflect_type"] != "odd":
            raise ValueError(f"reflect_type must be 'even' or 'odd'; got {kwargs['reflect_type']!r}.")
        return _cast(_pad_linearly(array, widths, mode), array.dtype, _weak(array))
    if mode == "linear_ramp":
        return _cast(_pad_ramp(array, widths, kwargs.get("end_values", 0)), array.dtype, _weak(array))
    if mode in ("maximum", "minimum", "mean", "median"):
        return _cast(_pad_stat(array, widths, mode, kwargs.get("stat_length")), array.dtype, _weak(array))
    if mode in ("edge", "wrap", "reflect", "symmetric"):
        return _pad_gathered(array, widths, mode)
    axes = tuple(d for d, w in enumerate(widths) if w != (0, 0))
    constant = 0 if mode == "empty" else kwargs.get("constant_values", 0)  # as JAX's, 'empty' pads with zeros
    return P.pad.bind(array, pad_width=widths, mode="constant", axes=axes, constant_values=constant)


def _pad_gathered(array: Any, widths: Sequence[tuple[int, int]], mode: str) -> Any:
    """Pads that copy elements (edge, wrap, even reflections): a gather along each axis of the positions
    NumPy's padding of a range gives (so they differentiate as indexing does)."""
    out = array
    for axis, (before, after) in enumerate(widths):
        if before or after:
            n = out.shape[axis]
            if n == 0:
                raise ValueError(f"can't extend empty axis {axis} using modes other than 'constant' or 'empty'")
            positions = np.pad(np.arange(n, dtype=np.int32), (before, after), mode=mode)
            index = tuple("array" if d == axis else slice(None) for d in range(out.ndim))
            out = P.gather.bind(out, positions, index=index)
    return out


def _along(x: Any, axis: int, start: int, stop: int) -> Any:
    return _take_range(x, axis, start, stop)


def _pad_linearly(array: Any, widths: Sequence[tuple[int, int]], mode: str) -> Any:
    """Odd reflection, a linear map along each axis: NumPy's padding of the identity gives its matrix."""
    out = array
    for axis, (before, after) in enumerate(widths):
        if before or after:
            n = out.shape[axis]
            matrix = np.pad(np.eye(n, dtype=np.int64), ((before, after), (0, 0)), mode=mode, reflect_type="odd")
            mixed = P.dot_general.bind(matrix.astype(out.dtype), out, dimension_numbers=(((1,), (axis,)), ((), ())))
            out = moveaxis(mixed, 0, axis)
    return out


def _pad_ramp(array: Any, widths: Sequence[tuple[int, int]], end_values: Any) -> Any:
    """Ramps from `end_values` to the edge values (excluded), along one axis after another; integer arrays
    take the ramps' floors, as NumPy's."""
    ends = _pairs(end_values, array.ndim, None)
    out = array
    for axis, (before, after) in enumerate(widths):
        n = out.shape[axis]
        parts = []
        for width, end, edge, flipped in ((before, ends[axis][0], _along(out, axis, 0, 1), False),
                                          (after, ends[axis][1], _along(out, axis, n - 1, n), True)):
            if not width:
                continue
            steps = np.arange(width, dtype=np.float64)[::-1 if flipped else 1] / width
            shape = [1] * out.ndim
            shape[axis] = width
            steps = reshape(steps.astype(dtypes.canonicalize_dtype(np.float64)), shape)
            ramp = add(multiply(end, subtract(1, steps)), multiply(astype(edge, steps.dtype), steps))  # a lerp
            if not dtypes.issubdtype(out.dtype, np.inexact):
                ramp = floor(ramp)
            parts.append((flipped, astype(ramp, out.dtype)))
        out = concatenate([p for f, p in parts if not f] + [out] + [p for f, p in parts if f], axis=axis)
    return out


def _pad_stat(array: Any, widths: Sequence[tuple[int, int]], mode: str, stat_length: Any) -> Any:
    """Pads of a statistic (maximum, minimum, mean or median) of the `stat_length` values nearest each edge
    (all of them by default), along one axis after another; integer arrays round the mean and median."""
    lengths = None if stat_length is None else _pairs(stat_length, array.ndim)
    out = array
    for axis, (before, after) in enumerate(widths):
        n = out.shape[axis]
        parts = []
        for side, width in ((0, before), (1, after)):
            if not width:
                continue
            count = n if lengths is None else builtins.min(int(lengths[axis][side]), n)
            if count <= 0:
                raise ValueError("stat_length of 0 yields no value for padding")
            region = _along(out, axis, 0, count) if side == 0 else _along(out, axis, n - count, n)
            value = _statistic(region, axis, mode, out.dtype)
            parts.append(broadcast_to(value, out.shape[:axis] + (width,) + out.shape[axis + 1:]))
        start = [parts[0]] if before else []
        end = [parts[-1]] if after else []
        out = concatenate(start + [out] + end, axis=axis) if start or end else out
    return out


def _statistic(region: Any, axis: int, mode: str, dtype: np.dtype) -> Any:
    """The maximum, minimum, mean or median of `region` along `axis` (kept, size 1), in `dtype`."""
    if mode in ("maximum", "minimum"):
        return P.REDUCE["max" if mode == "maximum" else "min"].bind(region, axes=(axis,), keepdims=True)
    n = region.shape[axis]
    floats = dtypes.canonicalize_dtype(np.float64) if not dtypes.issubdtype(dtype, np.inexact) else dtype
    values = astype(region, floats)
    if mode == "mean":
        value = true_divide(P.REDUCE["sum"].bind(values, axes=(axis,), keepdims=True), np.asarray(n, floats))
    else:
        ordered = sort(values, axis=axis)
        low, high = _along(ordered, axis, (n - 1) // 2, (n - 1) // 2 + 1), _along(ordered, axis, n // 2, n // 2 + 1)
        value = true_divide(add(low, high), np.asarray(2, floats))
    return astype(round(value) if floats != dtype else value, dtype)


def _pad_with_function(array: Any, widths: Sequence[tuple[int, int]], function: Any, kwargs: dict) -> Any:
    """Pads made by `function(vector, iaxis_pad_width, iaxis, kwargs)`, which returns each 1-D vector along
    axis `iaxis` (padded with zeros first) with its pads filled in; one axis after another."""
    out = P.pad.bind(array, pad_width=tuple(widths), mode="constant", axes=tuple(range(array.ndim)),
                     constant_values=0)
    for axis, width in enumerate(widths):
        moved = moveaxis(out, axis, -1)
        rows = reshape(moved, (-1, moved.shape[-1]))
        vectors = []
        for r in range(rows.shape[0]):
            vector = function(rows[r], width, axis, kwargs)
            if _shape(vector) != (moved.shape[-1],):
                raise ValueError(f"pad: mode function returned {vector!r} for a vector of length "
                                 f"{moved.shape[-1]}; it must return the padded 1-D vector.")
            vectors.append(astype(vector, out.dtype))
        if vectors:
            out = moveaxis(reshape(stack(vectors), moved.shape), -1, axis)
    return out


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


def _no_kind_or_order(function: str, kind: Any, order: Any) -> None:
    if kind is not None:
        raise TypeError(f"'kind' argument to {function} is not supported. Use stable=True or stable=False to "
                        "specify sort stability.")
    if order is not None:
        raise TypeError(f"'order' argument to {function} is not supported.")


def sort(a: ArrayLike, axis: int | None = -1, *, kind: None = None, order: None = None, stable: bool = True,
         descending: bool = False) -> Any:
    """`a` sorted along `axis` (stably: `stable=False` allows any order of equal elements)."""
    _no_kind_or_order("sort", kind, order)
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    return P.sort.bind(a, axis=_axes(axis, a.ndim)[0], descending=descending)


def argsort(a: ArrayLike, axis: int | None = -1, *, kind: None = None, order: None = None, stable: bool = True,
            descending: bool = False, dtype: Any = None) -> Any:
    """The positions that sort `a` along `axis` (stably), as `dtype` (the default integer type by default)."""
    _no_kind_or_order("argsort", kind, order)
    a = _promote(a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    (axis,) = _axes(axis, a.ndim)
    index_dtype = dtypes.default_int_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if not descending:
        return P.argsort.bind(a, axis=axis, index_dtype=index_dtype)
    # Largest first, equal elements in their original order: a stable ascending sort of the reversed array,
    # read backwards, with positions mapped back (negating would break unsigned integers and booleans).
    backwards = P.argsort.bind(flip(a, axis), axis=axis, index_dtype=index_dtype)
    return subtract(np.asarray(a.shape[axis] - 1, index_dtype), flip(backwards, axis))


def size(a: ArrayLike, axis: Any = None) -> int:
    """The number of elements of `a`, or along `axis` (an integer or a sequence of them)."""
    shape = _shape(a)
    if axis is None:
        return math.prod(shape)
    axes = _axes(axis if isinstance(axis, (int, np.integer)) else tuple(axis), len(shape))
    return math.prod(shape[d] for d in axes)


def shape(a: ArrayLike) -> tuple[int, ...]:
    return _shape(a)


def ndim(a: ArrayLike) -> int:
    return _ndim(a)


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """The shape all of `shapes` broadcast to (NumPy's rules); JAX's error names them all if there is none."""
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    try:
        return tuple(int(n) for n in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: shapes={shapes}") from None


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
    return out[0] if len(out) == 1 else tuple(out)  # several: a tuple, as JAX 0.12's


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


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Any, ...]:
    x = _as_array(_promote(x)[0])
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
