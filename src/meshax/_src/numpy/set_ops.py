"""meshax.numpy's set operations, sorting helpers, histograms and interp, built on the sort, search and
scatter functions so each runs eagerly and under jit (the set operations of a data-dependent length need
size= there), grad and vmap."""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Sequence

import numpy as np

from ..arrays.out_sharding import reshard
from ..core import dtypes
from ..core.core import ConcretizationTypeError, Tracer
from ..sharding.shardings import NamedSharding, PartitionSpec
from .promotion import ArrayLike, _cast, _lift, _promote, _promote_inexact, _shape
from .ufuncs import (_where, abs, add, astype, clip, divide, equal, greater, greater_equal, isnan, less, logical_and,
                     logical_not, logical_or, logical_xor, multiply, not_equal, remainder, subtract)
from .shape_ops import argsort, concatenate, flip, moveaxis, ravel, reshape, sort, stack
from .creation import linspace, ones, zeros
from .indexing import _reject_list, take, take_along_axis
from .reductions import any, max, min, sum
from .searching import bincount, isin, searchsorted, unique
from .numerics import diff

__all__ = ["argpartition", "digitize", "histogram", "histogram2d", "histogram_bin_edges", "histogramdd",
           "interp", "intersect1d", "lexsort", "partition", "setdiff1d", "setxor1d", "sort_complex", "union1d"]

_INDEX = dtypes.default_int_dtype


# ---- set operations -------------------------------------------------------------------------------------

def _size_error(function: str, a: Any) -> ConcretizationTypeError:
    return ConcretizationTypeError(
        f"jnp.{function} of a traced array ({a.aval}) has a data-dependent shape: its size argument must be "
        "statically specified inside jit and other transformations; pass size= (the result is cut or padded "
        "with fill_value to that length).")


def _check_args(function: str, *arrays: Any) -> None:
    """JAX's error for a Python list or tuple where an array is expected."""
    for position, value in enumerate(arrays):
        _reject_list(value, function, position)


def _check_size(function: str, size: int | None, *arrays: Any) -> None:
    """Raise JAX's errors for list arguments, and for a data-dependent length under a transformation."""
    _check_args(function, *arrays)
    traced = [a for a in arrays if isinstance(a, Tracer)]
    if size is None and traced:
        raise _size_error(function, traced[0])


def _first_mask(s: Any, equal_nan: bool = False) -> Any:
    """Whether each element of the sorted 1-D `s` differs from the one before it (with equal_nan, a NaN
    after a NaN does not)."""
    if s.shape[0] == 0:
        return zeros(0, bool)
    differs = not_equal(s[1:], s[:-1])
    if equal_nan:
        differs = logical_and(differs, logical_not(logical_and(isnan(s[1:]), isnan(s[:-1]))))
    return concatenate([np.ones(1, bool), differs])


def _compact(keep: Any, size: int | None, *columns: tuple[Any, Any]) -> list[Any]:
    """The elements of each (values, fill) column where `keep` holds, in order, cut or padded to `size` (the
    number kept when None); a fill of None means the first value kept (0 when none is)."""
    count = sum(keep, dtype=_INDEX())
    if size is None:
        size = int(np.asarray(count))
    n = keep.shape[0]
    order = argsort(logical_not(keep))
    order = order[:size] if n >= size else concatenate([order, np.zeros(size - n, _INDEX())])
    valid = less(np.arange(size, dtype=_INDEX()), count)
    out = []
    for values, fill in columns:
        picked = take(values, order) if n else zeros(size, values.dtype)
        if fill is None:
            fill = _where(greater(count, 0), picked[0], _cast(0, values.dtype)) if size else 0
        out.append(_where(valid, picked, _cast(_lift(fill), values.dtype)))
    return out


def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The sorted distinct values in either array (under jit pass size=; fill_value defaults to the
    smallest value)."""
    _check_size("union1d", size, ar1, ar2)
    ar1, ar2 = _promote(ar1, ar2)
    return unique(concatenate([ravel(ar1), ravel(ar2)]), size=size, fill_value=fill_value)


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
              fill_value: ArrayLike | None = None) -> Any:
    """The distinct values of `ar1` not in `ar2`, sorted (in `ar1`'s order with assume_unique); under jit
    pass size= (fill_value defaults to 0)."""
    _check_size("setdiff1d", size, ar1, ar2)
    ar1 = ravel(_lift(ar1))
    if assume_unique:
        keep = logical_not(isin(ar1, ar2))
    else:
        ar1 = sort(ar1)
        keep = logical_and(_first_mask(ar1, equal_nan=True), logical_not(isin(ar1, ar2)))
    return _compact(keep, size, (ar1, 0 if fill_value is None else fill_value))[0]


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *, size: int | None = None,
             fill_value: ArrayLike | None = None) -> Any:
    """The sorted values in exactly one of the arrays (then one NaN for each array holding any); under jit
    pass size= (fill_value defaults to the first value)."""
    _check_size("setxor1d", size, ar1, ar2)
    ar1, ar2 = (ravel(a) for a in _promote(ar1, ar2))
    both = sort(concatenate([ar1, ar2]))
    if assume_unique:
        after = concatenate([not_equal(both[:-1], both[1:]), np.ones(1, bool)]) if both.shape[0] else both
        keep = logical_and(_first_mask(both), after)
    else:
        nans = add(astype(any(isnan(ar1)), _INDEX()), astype(any(isnan(ar2)), _INDEX()))
        nan_rank = subtract(np.arange(both.shape[0], dtype=_INDEX()), sum(logical_not(isnan(both)), dtype=_INDEX()))
        keep = logical_or(logical_and(_first_mask(both), logical_xor(isin(both, ar1), isin(both, ar2))),
                          logical_and(isnan(both), less(nan_rank, nans)))
    return _compact(keep, size, (both, fill_value))[0]


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: ArrayLike | None = None) -> Any:
    """The sorted distinct values in both arrays, with return_indices also the (first) positions of each in
    the flattened inputs (padded with the inputs' sizes); under jit pass size= (fill_value defaults to the
    first value)."""
    _check_size("intersect1d", size, ar1, ar2)
    ar1, ar2 = (ravel(a) for a in _promote(ar1, ar2))
    order1 = argsort(ar1)
    s1 = take(ar1, order1) if ar1.shape[0] else ar1
    keep = logical_and(_first_mask(s1), isin(s1, ar2))
    if not return_indices:
        return _compact(keep, size, (s1, fill_value))[0]
    order2 = argsort(ar2)
    s2 = take(ar2, order2) if ar2.shape[0] else ar2
    where2 = clip(searchsorted(s2, s1), 0, builtins.max(ar2.shape[0] - 1, 0))
    index2 = take(order2, where2) if ar2.shape[0] else zeros(s1.shape, _INDEX())
    return tuple(_compact(keep, size, (s1, fill_value), (astype(order1, _INDEX()), ar1.shape[0]),
                          (astype(index2, _INDEX()), ar2.shape[0])))


# ---- sorting helpers ------------------------------------------------------------------------------------

def lexsort(keys: ArrayLike | Sequence[ArrayLike], axis: int = -1, *, batch_size: int = 16) -> Any:
    """The stable order that sorts by the last key, then the one before it, and so on. `batch_size` (a positive
    static integer) is how many keys JAX compares in one sort; meshax sorts key by key, the same order."""
    if isinstance(batch_size, Tracer):
        raise ConcretizationTypeError(f"Abstract tracer value encountered where concrete value is expected: "
                                      f"{batch_size.aval}\nThe batch_size argument of jnp.lexsort() must be static.")
    batch_size = operator.index(batch_size)
    if batch_size < 1:
        raise ValueError(f"lexsort: batch_size must be positive, got {batch_size}")
    keys = list(keys) if isinstance(keys, (list, tuple)) else [keys[i] for i in builtins.range(_shape(keys)[0])]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    _check_args("lexsort", *keys)
    keys = [_lift(k) for k in keys]
    if len({_shape(k) for k in keys}) != 1:
        raise ValueError("all keys need to be the same shape")
    if not _shape(keys[0]):
        return zeros((), _INDEX())
    order = argsort(keys[0], axis=axis)
    for key in keys[1:]:
        order = take_along_axis(order, argsort(take_along_axis(key, order, axis=axis), axis=axis), axis=axis)
    return astype(order, _INDEX())


def _kth(a: Any, kth: int, axis: int) -> tuple[int, int]:
    """`kth` and `axis` checked and made non-negative."""
    kth = operator.index(kth)
    ndim = len(_shape(a))
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for an array of dimension {ndim}.")
    n = _shape(a)[axis]
    if not -n <= kth < n:
        raise ValueError(f"kth(={kth}) out of bounds ({n}); pass -{n} <= kth < {n}.")
    return kth % n, axis % ndim


def partition(a: ArrayLike, kth: int, axis: int = -1) -> Any:
    """`a` with its kth-smallest element (along `axis`) in place, the smaller ones before it in ascending order
    and the larger ones after it in descending order (as JAX's)."""
    _check_args("partition", a)
    a = _lift(a)
    kth, axis = _kth(a, kth, axis)
    s = moveaxis(sort(a, axis=axis), axis, -1)
    return moveaxis(concatenate([s[..., :kth + 1], flip(s[..., kth + 1:], -1)], axis=-1), -1, axis)


def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Any:
    """The positions of the kth + 1 smallest elements of `a` along `axis`, in ascending order of value, then
    those of the others in their original order (as JAX's)."""
    _check_args("partition", a)  # JAX names partition here too
    a = _lift(a)
    kth, axis = _kth(a, kth, axis)
    rank = argsort(argsort(a, axis=axis), axis=axis)
    key = _where(less(rank, kth + 1), rank, kth + 1)
    return astype(argsort(key, axis=axis), _INDEX())


def sort_complex(a: ArrayLike) -> Any:
    """`a` sorted along its last axis, as a complex array."""
    _check_args("sort_complex", a)
    a = sort(_lift(a), axis=-1)
    dtype = a.dtype if dtypes.issubdtype(a.dtype, np.complexfloating) else \
        np.result_type(np.dtype(dtypes.default_float_dtype()) if not dtypes.issubdtype(a.dtype, np.inexact)
                       else a.dtype, np.complex64)
    return _cast(a, dtype)


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *, method: str | None = None) -> Any:
    """The index of the bin of `bins` (increasing or decreasing) each value of `x` falls in."""
    _check_args("digitize", x, bins)
    x, bins = _promote(x, bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got bins={bins}")
    if bins.shape[0] == 0:
        return zeros(x.shape, _INDEX())
    method = "scan" if method is None else method
    side = "left" if right else "right"
    rising = searchsorted(bins, x, side=side, method=method)
    falling = bins.shape[0] - searchsorted(flip(bins), x, side=side, method=method)
    return _where(greater_equal(bins[-1], bins[0]), rising, falling)


# ---- histograms -----------------------------------------------------------------------------------------

def histogram_bin_edges(a: ArrayLike, bins: ArrayLike = 10, range: Any = None, weights: ArrayLike | None = None
                        ) -> Any:
    """The edges of the bins `histogram` uses: `bins` itself when it is a 1-D array, else `bins` + 1 evenly
    spaced values over `range` (by default the range of `a`, widened by 0.5 each way when it is a point)."""
    _check_args("histogram_bin_edges", a, bins)
    if _shape(bins):
        return _promote_inexact(bins)[0]
    bins = operator.index(bins)
    if bins < 1:
        raise ValueError(f"`bins` must be positive, when an integer; got bins={bins}.")
    a = ravel(_promote_inexact(a)[0])
    dtype = a.dtype
    if range is None:
        low, high = min(a), max(a)
    else:
        if len(range) != 2:
            raise ValueError(f"range must be a pair (low, high); got range={range}.")
        low, high = (_cast(_lift(r), dtype) for r in range)
    point = equal(low, high)
    low = _where(point, subtract(low, _cast(0.5, dtype)), low)
    high = _where(point, add(high, _cast(0.5, dtype)), high)
    return astype(linspace(low, high, bins + 1), dtype)


def _bin_index(values: Any, edges: Any) -> Any:
    """Each value's bin among `edges`, 1-based (0 below, len(edges) above), the last edge inclusive."""
    found = searchsorted(edges, values, side="right")
    return _where(equal(values, edges[-1]), edges.shape[0] - 1, found)


def _histogram_sharding(out_sharding: Any, name: str) -> Any:
    """`out_sharding` as a NamedSharding (a PartitionSpec over the mesh of `set_mesh`), checked as JAX checks it:
    its spec may name Explicit mesh axes only."""
    from ..sharding.mesh import AxisType, current_mesh
    from ..sharding.shardings import NamedSharding, PartitionSpec

    if out_sharding is None:
        return None
    if isinstance(out_sharding, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise ValueError("Using PartitionSpec when you are not under a mesh context is not allowed. Please pass "
                             "a NamedSharding instance or enter into a mesh context via `jax.set_mesh`. Got "
                             f"{out_sharding!r}")
        out_sharding = NamedSharding(mesh, out_sharding)
    if not isinstance(out_sharding, NamedSharding):
        raise TypeError(f"`out_sharding` argument of {name} only supports instances of `NamedSharding` or "
                        f"`PartitionSpec`. Got {out_sharding!r} of type: {type(out_sharding)}")
    types = dict(zip(out_sharding.mesh.axis_names, out_sharding.mesh.axis_types))
    for entry in out_sharding.spec:
        for axis in (entry if isinstance(entry, tuple) else (entry,)):
            if axis is not None and types.get(axis) is not AxisType.Explicit:
                raise ValueError(f"PartitionSpec passed to {name} cannot contain axis names that are of type Auto "
                                 f"or Manual. Got PartitionSpec: {out_sharding.spec!r} with axis name: {axis} of "
                                 f"type: {types.get(axis)}.")
    return out_sharding


def histogram(a: ArrayLike, bins: ArrayLike = 10, range: Any = None, weights: ArrayLike | None = None,
              density: bool | None = None, out_sharding: Any = None) -> tuple[Any, Any]:
    """The (weighted) count of the values of `a` in each bin, or with density the count per unit of width
    normalised to integrate to 1, and the bin edges; `out_sharding` (over Explicit mesh axes) lays both out."""
    sharding = _histogram_sharding(out_sharding, "jnp.histogram")
    _check_args("histogram", a, bins, weights)
    if weights is not None and _shape(weights) != _shape(a):
        raise ValueError(f"weights should have the same shape as a; got {_shape(weights)} and {_shape(a)}.")
    if sharding is not None:  # computed on replicated values, the results laid out as asked
        replicated = NamedSharding(sharding.mesh, PartitionSpec())
        counts, edges = histogram(reshard(a, replicated), bins, range,
                                  None if weights is None else reshard(weights, replicated), density)
        return reshard(counts, sharding), reshard(edges, sharding)
    edges = histogram_bin_edges(a, bins, range)
    a = ravel(_promote_inexact(a)[0])
    weights = ones(a.shape, a.dtype) if weights is None else ravel(_promote_inexact(a, weights)[1])
    index = _bin_index(a, edges)
    counts = bincount(index, weights, length=edges.shape[0] + 1)[1:-1]
    if density:
        counts = divide(divide(counts, diff(edges)), sum(counts))  # in JAX's order (the same rounding)
    return counts, edges


def _dims_bins(bins: Any, d: int) -> list[Any]:
    """One `bins` entry per dimension."""
    if isinstance(bins, (list, tuple)):
        if len(bins) != d:
            raise ValueError("should be a bin for each dimension.")
        return list(bins)
    if _shape(bins) == (d,) and not isinstance(bins, Tracer):
        return [int(b) for b in np.asarray(bins)]
    if _shape(bins):
        raise ValueError("should be a bin for each dimension.")
    return [bins] * d


def histogramdd(sample: ArrayLike, bins: ArrayLike | list[ArrayLike] = 10, range: Any = None,
                weights: ArrayLike | None = None, density: bool | None = None) -> tuple[Any, list[Any]]:
    """The (weighted) count of the points, rows of the 2-D `sample`, in each cell of a grid, and the edges
    along each dimension."""
    _check_args("histogramdd", sample, weights)
    sample = _promote_inexact(sample)[0]
    if sample.ndim != 2:
        raise ValueError(f"histogramdd: sample must be 2-dimensional (points by dimensions); got shape "
                         f"{sample.shape}.")
    n, d = sample.shape
    if weights is not None and _shape(weights) != (n,):
        raise ValueError(f"should have one weight for each sample; got weights of shape {_shape(weights)}.")
    if range is not None and len(range) != d:
        raise ValueError("should be a range for each dimension.")
    ranges = [None] * d if range is None else list(range)
    edges = [histogram_bin_edges(sample[:, i], b, r) for i, (b, r) in enumerate(zip(_dims_bins(bins, d), ranges))]
    shape = tuple(e.shape[0] + 1 for e in edges)
    flat = zeros(n, _INDEX())
    for i, e in enumerate(edges):
        flat = add(multiply(flat, shape[i]), astype(_bin_index(sample[:, i], e), _INDEX()))
    weights = None if weights is None else _promote_inexact(sample, weights)[1]
    counts = reshape(bincount(flat, weights, length=math.prod(shape)), shape)
    counts = counts[tuple(slice(1, -1) for _ in shape)]
    if density:
        counts = divide(counts, sum(counts))
        for i, e in enumerate(edges):
            counts = divide(counts, reshape(diff(e), [-1 if j == i else 1 for j in builtins.range(d)]))
    return counts, edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins: ArrayLike | list[ArrayLike] = 10, range: Any = None,
                weights: ArrayLike | None = None, density: bool | None = None) -> tuple[Any, Any, Any]:
    """The (weighted) count of the points (x, y) in each cell of a grid, and the x and y edges."""
    try:
        count = len(bins)
    except TypeError:
        count = 1
    if count != 1 and count != 2:
        bins = [bins, bins]
    _check_args("histogram2d", x, y, weights)
    sample = stack(_promote_inexact(x, y), axis=1)
    counts, edges = histogramdd(sample, bins, range, weights, density)
    return counts, edges[0], edges[1]


# ---- interpolation --------------------------------------------------------------------------------------

def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | str | None = None,
           right: ArrayLike | str | None = None, period: ArrayLike | None = None) -> Any:
    """The piecewise-linear interpolant through (xp, fp) at `x` (xp increasing, or any order with `period`);
    beyond the ends `left`/`right` (by default fp's end values, or "extrapolate")."""
    for name, value in (("left", left), ("right", right)):
        if isinstance(value, str) and value != "extrapolate":
            raise ValueError(f"{name}={value!r} is not a valid option; use a value, None or 'extrapolate'.")
    _check_args("interp", x, xp, fp)
    if _shape(xp) != _shape(fp) or len(_shape(xp)) != 1:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    x, xp = _promote_inexact(x, xp)
    fp = _promote_inexact(fp)[0]
    if period is not None:
        if isinstance(left, str) or isinstance(right, str):
            raise ValueError("the 'extrapolate' option is not compatible with a period.")
        period = abs(_cast(_lift(period), x.dtype))
        x, xp = remainder(x, period), remainder(xp, period)
        order = argsort(xp)
        xp, fp = take(xp, order), take(fp, order)
        xp = concatenate([subtract(xp[-1:], period), xp, add(xp[:1], period)])
        fp = concatenate([fp[-1:], fp, fp[:1]])
    i = clip(searchsorted(xp, x, side="right"), 1, xp.shape[0] - 1)
    x0, x1, f0, f1 = take(xp, i - 1), take(xp, i), take(fp, i - 1), take(fp, i)
    dx = subtract(x1, x0)
    flat = equal(dx, 0)
    slope = divide(subtract(x, x0), _where(flat, _cast(1, dx.dtype), dx))
    f = _where(flat, f0, add(f0, multiply(_cast(slope, fp.dtype), subtract(f1, f0))))
    if period is None:
        if not isinstance(left, str):
            f = _where(less(x, xp[0]), fp[0] if left is None else _cast(_lift(left), fp.dtype), f)
        if not isinstance(right, str):
            f = _where(greater(x, xp[-1]), fp[-1] if right is None else _cast(_lift(right), fp.dtype), f)
    return f
