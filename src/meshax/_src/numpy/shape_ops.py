"""meshax.numpy's shape functions: reshaping, transposing, broadcasting, joining and splitting arrays, and
reordering their elements (flip, roll, rot90, sort)."""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from ..core import dtypes
from ..primitives import array_primitives as P
from .promotion import ArrayLike, _as_array, _axes, _dims, _ndim, _promote, _shape
from .ufuncs import astype, subtract
from ..arrays.key_arrays import KeyArray


def reshape(a: ArrayLike, shape: Any = None, order: str = "C", *, newshape: Any = None,
            out_sharding: Any = None) -> Any:
    """`a` with a new shape (one dimension may be -1); `out_sharding` lays out the result (a PartitionSpec over the
    mesh in use, or a NamedSharding), as JAX needs where Explicit axes make the result's sharding ambiguous."""
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
    if out_sharding is not None:
        return P.reshape.bind(a, new_sizes=shape, out_sharding=getattr(out_sharding, "spec", out_sharding))
    if shape == tuple(a.shape):
        return _as_array(a)
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
        return _as_array(a)
    if len(shape) < a.ndim or builtins.any(n not in (1, m) for n, m in zip(a.shape[::-1], shape[::-1])):
        raise ValueError(f"cannot broadcast an array of shape {a.shape} to shape {shape}.")
    dims = tuple(range(len(shape) - a.ndim, len(shape)))
    return P.broadcast_in_dim.bind(a, shape=shape, broadcast_dimensions=dims)


def broadcast_arrays(*args: ArrayLike) -> list[Any]:
    shape = broadcast_shapes(*[_shape(a) for a in args])
    return [broadcast_to(a, shape) for a in args]


def atleast_1d(*arys: ArrayLike) -> Any:
    out = [reshape(a, (1,)) if _ndim(a) == 0 else _as_array(_promote(a)[0]) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys: ArrayLike) -> Any:
    out = [reshape(a, (1,) * (2 - _ndim(a)) + _shape(a)) if _ndim(a) < 2 else _as_array(_promote(a)[0]) for a in arys]
    return out[0] if len(out) == 1 else out


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


concat = concatenate


def stack(arrays: Sequence[ArrayLike], axis: int = 0, dtype: Any = None) -> Any:
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


def size(a: ArrayLike, axis: int | None = None) -> int:
    shape = _shape(a)
    return math.prod(shape) if axis is None else shape[axis]


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
