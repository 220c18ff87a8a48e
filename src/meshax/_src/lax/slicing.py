"""jax.lax's slicing and shape functions over meshax's primitives.

Static slices become the `slice` primitive; slices at traced start indices become a `gather`
with one index array per dimension (start clamped as JAX clamps it, plus an iota), and updates
at traced starts a `scatter`, so they work eagerly, under jit, grad and vmap alike.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..arrays.array import Array
from ..core.core import Tracer, aval_of
from ..numpy import promotion as U

__all__ = ["broadcast", "broadcast_in_dim", "broadcast_to_rank", "collapse", "concatenate", "dynamic_index_in_dim",
           "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "expand_dims", "index_in_dim", "pad", "reshape", "rev", "slice",
           "slice_in_dim", "squeeze", "transpose"]


def _operand(x: Any) -> Any:
    """Arrays and tracers stay; host values become NumPy values of their JAX dtype."""
    return U._lift(x)


def _static_int(i: Any) -> int | None:
    """`i` as a Python int when it is known now (not a traced value), else None."""
    if isinstance(i, Tracer):
        return None
    if isinstance(i, Array):
        return int(np.asarray(i))
    try:
        return operator.index(i)
    except TypeError:
        return int(np.asarray(i))


def _normalize_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


# ---- static slicing -------------------------------------------------------------------------------------------------


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    """operand[start:limit:stride] along every dimension."""
    x = _operand(operand)
    ndim = aval_of(x).ndim
    if len(start_indices) != ndim or len(limit_indices) != ndim:
        raise TypeError(f"slice start_indices and limit_indices must have length equal to the operand's rank "
                        f"{ndim}, got {tuple(start_indices)} and {tuple(limit_indices)}.")
    steps = tuple(strides) if strides is not None else (1,) * ndim
    index = tuple(_py_slice(int(a), int(b), int(s)) for a, b, s in zip(start_indices, limit_indices, steps))
    return P.static_slice.bind(x, index=index)


def _py_slice(start: int, stop: int, step: int) -> Any:
    import builtins

    return builtins.slice(start, stop, step)


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0) -> Any:
    """operand[start:limit:stride] along `axis` (None bounds: the whole dimension; negative: from the end)."""
    x = _operand(operand)
    shape = aval_of(x).shape
    axis = _normalize_axis(axis, len(shape))
    start, stop, _ = _py_slice(start_index, limit_index, 1).indices(shape[axis])
    starts = [0] * len(shape)
    limits = list(shape)
    steps = [1] * len(shape)
    starts[axis], limits[axis], steps[axis] = start, max(stop, start), int(stride)
    return slice(x, starts, limits, steps)


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """The `index`-th entry along `axis` (a static index; negative counts from the end)."""
    x = _operand(operand)
    shape = aval_of(x).shape
    axis = _normalize_axis(axis, len(shape))
    i = operator.index(index)
    if not -shape[axis] <= i < shape[axis]:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {shape[axis]}")
    i %= shape[axis]
    out = slice_in_dim(x, i, i + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# ---- dynamic slicing ---------------------------------------------------------------------------------------------------


def _clamped_start(start: Any, size: int, slice_size: int, allow_negative: bool = True) -> Any:
    """The start index JAX uses: negative ones counted from the end, then clamped so the slice fits."""
    static = _static_int(start)
    if static is not None:
        if allow_negative and static < 0:
            static += size
        return min(max(static, 0), size - slice_size)
    from .. import numpy as jnp

    i = jnp.asarray(start).astype(np.int32) if aval_of(start).dtype != np.int32 else start
    if allow_negative:
        i = jnp.where(i < 0, i + size, i)
    return jnp.clip(i, 0, size - slice_size)


def _index_arrays(starts: Sequence[Any], shape: Sequence[int], sizes: Sequence[int]) -> list[Any]:
    """One integer index array per dimension, shaped to broadcast into the outer product of the ranges."""
    from .. import numpy as jnp

    arrays = []
    for d, (start, size) in enumerate(zip(starts, sizes)):
        ramp = np.arange(size, dtype=np.int32).reshape([-1 if e == d else 1 for e in range(len(shape))])
        arrays.append(jnp.add(start, ramp) if isinstance(start, (Tracer, Array)) else start + ramp)
    return arrays


def _check_sizes(what: str, shape: Sequence[int], starts: Sequence[Any], sizes: Sequence[int]) -> None:
    if len(starts) != len(shape) or len(sizes) != len(shape):
        raise TypeError(f"{what}: the operand has rank {len(shape)}, but {len(starts)} start indices and "
                        f"{len(sizes)} sizes were given; pass one per dimension.")
    for d, (n, s) in enumerate(zip(shape, sizes)):
        if not 0 <= s <= n:
            raise TypeError(f"{what}: slice size {s} of dimension {d} does not fit the operand's size {n}.")


def dynamic_slice(operand: Any, start_indices: Any, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """operand[start:start+size] along every dimension, at possibly traced starts (clamped to fit)."""
    x = _operand(operand)
    shape = aval_of(x).shape
    starts = list(start_indices) if not isinstance(start_indices, (Tracer, Array, np.ndarray)) or \
        aval_of(start_indices).ndim else [start_indices]
    if isinstance(start_indices, (Tracer, Array, np.ndarray)) and aval_of(start_indices).ndim == 1:
        starts = [start_indices[d] for d in range(aval_of(start_indices).shape[0])]
    sizes = [int(s) for s in slice_sizes]
    _check_sizes("dynamic_slice", shape, starts, sizes)
    negative = [allow_negative_indices] * len(shape) if isinstance(allow_negative_indices, bool) else \
        list(allow_negative_indices)
    clamped = [_clamped_start(s, n, k, neg) for s, n, k, neg in zip(starts, shape, sizes, negative)]
    if all(isinstance(c, int) for c in clamped):
        return P.static_slice.bind(x, index=tuple(_py_slice(c, c + k, 1) for c, k in zip(clamped, sizes)))
    if not shape:
        return x
    return P.gather.bind(x, *_index_arrays(clamped, shape, sizes), index=("array",) * len(shape))


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Any:
    """A dynamic slice of `slice_size` entries along `axis` (whole along the other dimensions)."""
    x = _operand(operand)
    shape = aval_of(x).shape
    axis = _normalize_axis(axis, len(shape))
    starts: list[Any] = [0] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, int(slice_size)
    return dynamic_slice(x, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Any:
    """The entry at a possibly traced `index` along `axis`."""
    x = _operand(operand)
    axis = _normalize_axis(axis, aval_of(x).ndim)
    out = dynamic_slice_in_dim(x, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice(operand: Any, update: Any, start_indices: Any, *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """`operand` with the block at (possibly traced, clamped) `start_indices` replaced by `update`."""
    x, y = _operand(operand), _operand(update)
    shape, sizes = aval_of(x).shape, aval_of(y).shape
    if aval_of(x).dtype != aval_of(y).dtype:
        raise TypeError(f"dynamic_update_slice update dtype {aval_of(y).dtype} must match the operand's "
                        f"{aval_of(x).dtype}.")
    starts = list(start_indices) if not isinstance(start_indices, (Tracer, Array, np.ndarray)) else \
        [start_indices[d] for d in range(aval_of(start_indices).shape[0])]
    if len(sizes) != len(shape):
        raise TypeError(f"dynamic_update_slice update rank {len(sizes)} must equal the operand's {len(shape)}.")
    _check_sizes("dynamic_update_slice", shape, starts, sizes)
    negative = [allow_negative_indices] * len(shape) if isinstance(allow_negative_indices, bool) else \
        list(allow_negative_indices)
    clamped = [_clamped_start(s, n, k, neg) for s, n, k, neg in zip(starts, shape, sizes, negative)]
    if not shape:
        return y
    if all(isinstance(c, int) for c in clamped):
        index = tuple(_py_slice(c, c + k, 1) for c, k in zip(clamped, sizes))
        return P.scatter.bind(x, y, index=index, mode="set")
    return P.scatter.bind(x, y, *_index_arrays(clamped, shape, sizes), index=("array",) * len(shape), mode="set")


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """`operand` with `update` written at a possibly traced `start_index` along `axis`."""
    x = _operand(operand)
    axis = _normalize_axis(axis, aval_of(x).ndim)
    starts: list[Any] = [0] * aval_of(x).ndim
    starts[axis] = start_index
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """`operand` with the entry at `index` along `axis` replaced by `update` (which may lack that axis)."""
    x, y = _operand(operand), _operand(update)
    axis = _normalize_axis(axis, aval_of(x).ndim)
    if aval_of(y).ndim == aval_of(x).ndim - 1:
        y = expand_dims(y, (axis,))
    return dynamic_update_slice_in_dim(x, y, index, axis, allow_negative_indices=allow_negative_indices)


# ---- shapes ----------------------------------------------------------------------------------------------------------


def reshape(operand: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None, *,
            out_sharding: Any = None) -> Any:
    """`operand` reshaped to `new_sizes` (after transposing by `dimensions`, when given)."""
    x = _operand(operand)
    if dimensions is not None and tuple(dimensions) != tuple(range(aval_of(x).ndim)):
        x = transpose(x, dimensions)
    new = tuple(int(n) for n in new_sizes)
    if int(np.prod(new, dtype=np.int64)) != aval_of(x).size:
        raise TypeError(f"reshape total size must be unchanged, got new_sizes {new} for shape {aval_of(x).shape}.")
    if out_sharding is not None:
        return P.reshape.bind(x, new_sizes=new, out_sharding=getattr(out_sharding, "spec", out_sharding))
    return x if new == aval_of(x).shape else P.reshape.bind(x, new_sizes=new)


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    """`operand` with its dimensions permuted."""
    x = _operand(operand)
    perm = tuple(int(p) for p in permutation)
    if sorted(perm) != list(range(aval_of(x).ndim)):
        raise TypeError(f"transpose permutation {perm} is not a permutation of the operand's dimensions.")
    return x if perm == tuple(range(len(perm))) else P.transpose.bind(x, permutation=perm)


def broadcast_in_dim(operand: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int], *,
                     out_sharding: Any = None) -> Any:
    """`operand` placed in `shape`, its dimension i at output dimension broadcast_dimensions[i]."""
    if out_sharding is not None:
        raise NotImplementedError(f"broadcast_in_dim(out_sharding={out_sharding!r}) is not supported by meshax; "
                                  "reshard the result instead.")
    x = _operand(operand)
    shape, dims = tuple(int(n) for n in shape), tuple(int(d) for d in broadcast_dimensions)
    aval = aval_of(x)
    if len(dims) != aval.ndim or any(aval.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
        raise TypeError(f"broadcast_in_dim: operand shape {aval.shape} cannot be broadcast to {shape} with "
                        f"broadcast_dimensions {dims}.")
    if shape == aval.shape and dims == tuple(range(aval.ndim)):
        return x
    return P.broadcast_in_dim.bind(x, shape=shape, broadcast_dimensions=dims)


def broadcast(operand: Any, sizes: Sequence[int], *, out_sharding: Any = None) -> Any:
    """`operand` with new leading dimensions of `sizes`."""
    x = _operand(operand)
    ndim = aval_of(x).ndim
    sizes = tuple(int(s) for s in sizes)
    return broadcast_in_dim(x, sizes + aval_of(x).shape, tuple(range(len(sizes), len(sizes) + ndim)),
                            out_sharding=out_sharding)


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """`x` with leading dimensions of size 1 added up to `rank`."""
    x = _operand(x)
    ndim = aval_of(x).ndim
    return x if ndim >= rank else broadcast(x, (1,) * (rank - ndim))


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    """`array` with dimensions of size 1 inserted at `dimensions` (positions in the result)."""
    x = _operand(array)
    shape = list(aval_of(x).shape)
    rank = len(shape) + len(dimensions)
    for d in sorted(_normalize_axis(int(d), rank) for d in dimensions):
        shape.insert(d, 1)
    return reshape(x, shape)


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    """`array` without the size-1 `dimensions`."""
    x = _operand(array)
    shape = aval_of(x).shape
    dims = {_normalize_axis(int(d), len(shape)) for d in dimensions}
    for d in dims:
        if shape[d] != 1:
            raise ValueError(f"cannot select an axis to squeeze out which has size not equal to one, got "
                             f"shape={shape} and dimensions={tuple(dimensions)}")
    return reshape(x, [n for d, n in enumerate(shape) if d not in dims])


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """`operand` with dimensions [start, stop) merged into one."""
    x = _operand(operand)
    shape = aval_of(x).shape
    stop = len(shape) if stop_dimension is None else stop_dimension
    merged = int(np.prod(shape[start_dimension:stop], dtype=np.int64))
    return reshape(x, shape[:start_dimension] + (merged,) + shape[stop:])


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    """`operand` reversed along `dimensions`."""
    x = _operand(operand)
    dims = tuple(_normalize_axis(int(d), aval_of(x).ndim) for d in dimensions)
    return P.flip.bind(x, axes=dims) if dims else x


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    """The operands (of one dtype) joined along `dimension`."""
    xs = [_operand(x) for x in operands]
    if not xs:
        raise TypeError("concatenate requires a non-empty sequence of operands")
    dtypes = {np.dtype(aval_of(x).dtype) for x in xs}
    if len(dtypes) > 1:
        raise TypeError(f"concatenate requires arguments to have the same dtypes, got {sorted(map(str, dtypes))}.")
    dim = _normalize_axis(dimension, aval_of(xs[0]).ndim)
    return U._as_array(xs[0]) if len(xs) == 1 else P.concatenate.bind(*xs, axis=dim)


def pad(operand: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """`operand` padded by (low, high, interior) per dimension with `padding_value`; negative low/high crop."""
    from .. import numpy as jnp

    x = _operand(operand)
    aval = aval_of(x)
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != aval.ndim:
        raise ValueError(f"padding_config has {len(config)} entries for an operand of rank {aval.ndim}.")
    if any(i < 0 for _, _, i in config):
        raise ValueError(f"interior padding must be non-negative, got {config}.")
    fill = jnp.asarray(padding_value, dtype=aval.dtype)
    for d, (_, _, interior) in enumerate(config):  # interior padding: interleave with fill, then drop the tail
        n = aval_of(x).shape[d]
        if interior and n > 1:
            rows = jnp.full(aval_of(x).shape[:d] + (n, interior) + aval_of(x).shape[d + 1:], fill, aval.dtype)
            woven = jnp.concatenate([expand_dims(x, (d + 1,)), rows], axis=d + 1)
            woven = reshape(woven, aval_of(x).shape[:d] + (n * (interior + 1),) + aval_of(x).shape[d + 1:])
            x = slice_in_dim(woven, 0, n * (interior + 1) - interior, 1, d)
    for d, (lo, hi, _) in enumerate(config):  # low/high padding: blocks of the fill value on either side
        shape = aval_of(x).shape
        blocks = [jnp.full(shape[:d] + (max(w, 0),) + shape[d + 1:], fill, aval.dtype) for w in (lo, hi)]
        parts = ([blocks[0]] if lo > 0 else []) + [x] + ([blocks[1]] if hi > 0 else [])
        x = concatenate(parts, d) if len(parts) > 1 else x
    crops = [(max(-lo, 0), max(-hi, 0)) for lo, hi, _ in config]
    if any(c != (0, 0) for c in crops):
        shape = aval_of(x).shape
        x = slice(x, [a for a, _ in crops], [n - b for n, (_, b) in zip(shape, crops)])
    return x
