"""More of jax.lax, built from the primitives: the generic `reduce` (any binary computation, pytrees of operands),
`top_k` and the approximate variants, multi-operand `sort`, `cumlogsumexp`, and small structural helpers
(tile, split, complex, broadcast_shapes, batch_matmul, optimization_barrier...)."""
from __future__ import annotations

import builtins
import enum
from typing import Any, Callable, Sequence, Union

import numpy as np

from ..core import dtypes
from ..primitives import array_primitives as P
from ..core.core import aval_of
from ..arrays.out_sharding import reshard
from ..tree.tree_util import tree_flatten, tree_map, tree_unflatten
from . import lax_ops as L
from . import slicing as S
from .control_flow import associative_scan

__all__ = ["DotDimensionNumbers", "GatherScatterMode", "Precision", "PrecisionLike", "approx_max_k", "approx_min_k", "batch_matmul", "broadcast_like", "broadcast_shapes", "complex", "composite",
           "dce_sink", "platform_dependent", "shape_as_value", "stack", "unstack", "cumlogsumexp", "dtype", "empty",
           "index_take", "optimization_barrier", "reduce", "reduce_xor", "sort", "sort_key_val", "split", "tile",
           "top_k"]


class Precision(enum.Enum):
    """Matmul precision asked of the backend (meshax computes in the operands' full precision whatever is asked)."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: Any) -> "Precision | None":
        names = {"default": cls.DEFAULT, "high": cls.HIGH, "highest": cls.HIGHEST, "fastest": cls.DEFAULT,
                 "bfloat16": cls.DEFAULT, "tensorfloat32": cls.HIGH, "float32": cls.HIGHEST}
        return names.get(value.lower()) if isinstance(value, str) else None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Precision.{self.name}"


class GatherScatterMode(enum.Enum):
    """How indexing treats out-of-bounds indices."""

    CLIP = 1
    FILL_OR_DROP = 2
    PROMISE_IN_BOUNDS = 3
    ONE_HOT = 4

    @staticmethod
    def from_any(s: "str | GatherScatterMode | None") -> "GatherScatterMode":
        if isinstance(s, GatherScatterMode):
            return s
        if s is None:
            return GatherScatterMode.FILL_OR_DROP
        aliases = {"fill": "FILL_OR_DROP", "drop": "FILL_OR_DROP", "promise_in_bounds": "PROMISE_IN_BOUNDS"}
        try:
            return GatherScatterMode[aliases.get(s, s.upper())]
        except KeyError:
            raise ValueError(f"Unknown gather mode {s!r}; use one of {[m.name.lower() for m in GatherScatterMode]}.") \
                from None


DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]
PrecisionLike = Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision]]


def _jnp() -> Any:
    from .. import numpy as jnp

    return jnp


# ---- reduce -----------------------------------------------------------------------------------------------------


def _monoids() -> dict[Any, str]:
    jnp = _jnp()
    return {L.add: "sum", jnp.add: "sum", L.mul: "prod", jnp.multiply: "prod", L.max: "max", jnp.maximum: "max",
            L.min: "min", jnp.minimum: "min", L.bitwise_or: "or", L.bitwise_and: "and"}


def reduce(operands: Any, init_values: Any, computation: Callable[..., Any], dimensions: Sequence[int],
           out_sharding: Any = None) -> Any:
    """Reduce `operands` (an array or a pytree of same-shaped arrays) over `dimensions` with the binary
    `computation` (elementwise on pytrees like the operands), starting from `init_values` (the same structure);
    the results laid out as `out_sharding` (a PartitionSpec over the mesh in use, or a Sharding) when given."""
    result = _reduce(operands, init_values, computation, dimensions)
    return result if out_sharding is None else reshard(result, out_sharding)


def _reduce(operands: Any, init_values: Any, computation: Callable[..., Any], dimensions: Sequence[int]) -> Any:
    """lax.reduce without its out_sharding."""
    flat, tree = tree_flatten(operands)
    inits, init_tree = tree_flatten(init_values)
    if tree != init_tree:
        raise TypeError(f"lax.reduce: operands {tree} and init_values {init_tree} must have the same structure.")
    flat = [L._lift(x) for x in flat]
    shapes = {tuple(aval_of(x).shape) for x in flat}
    if len(shapes) != 1:
        raise TypeError(f"lax.reduce: all operands must have one shape; got {sorted(shapes)}.")
    shape = shapes.pop()
    dims = tuple(sorted(d % builtins.max(len(shape), 1) for d in dimensions))
    kind = _monoids().get(computation) if len(flat) == 1 else None
    if kind is not None and (kind not in ("or", "and") or aval_of(flat[0]).dtype == np.bool_):
        return computation(inits[0], P.REDUCE[kind].bind(flat[0], axes=dims))
    return _fold(flat, inits, tree, computation, shape, dims)


def _fold(flat: list[Any], inits: list[Any], tree: Any, computation: Callable[..., Any], shape: tuple[int, ...],
          dims: tuple[int, ...]) -> Any:
    """The general reduction: the reduced dimensions flattened to the front, then halves combined pairwise with
    `computation` until one row remains, which is combined with the initial values."""
    kept = [d for d in range(len(shape)) if d not in dims]
    rest = tuple(shape[d] for d in kept)
    n = int(np.prod([shape[d] for d in dims], dtype=np.int64))
    rows = [S.reshape(S.transpose(x, dims + tuple(kept)), (n,) + rest) for x in flat]

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        out = computation(tree_unflatten(tree, a), tree_unflatten(tree, b))
        return tree_flatten(out)[0]

    while n > 1:
        half = n // 2
        paired = combine([S.slice_in_dim(r, 0, half) for r in rows], [S.slice_in_dim(r, half, 2 * half) for r in rows])
        if n % 2:
            paired = [S.concatenate([p, S.slice_in_dim(r, 2 * half, n)], 0) for p, r in zip(paired, rows)]
        rows, n = paired, half + n % 2
    init_rows = [S.broadcast_in_dim(L.convert_element_type(i, aval_of(r).dtype), rest, ()) for i, r in
                 zip(inits, rows)]
    if n == 0:
        return tree_unflatten(tree, init_rows)
    return tree_unflatten(tree, combine(init_rows, [S.reshape(r, rest) for r in rows]))


def reduce_xor(operand: Any, axes: Sequence[int]) -> Any:
    """Bitwise (or logical, for booleans) exclusive or over `axes`."""
    return reduce(operand, np.zeros((), aval_of(L._lift(operand)).dtype), L.bitwise_xor, axes)


# ---- sorting and top-k ---------------------------------------------------------------------------------------------


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """`operand` sorted along `dimension`; a sequence of operands is sorted together, lexicographically by the
    first `num_keys` of them (as jax.lax.sort)."""
    jnp = _jnp()
    if not isinstance(operand, (tuple, list)):
        if num_keys != 1:
            raise ValueError(f"lax.sort: num_keys={num_keys} needs a sequence of at least that many operands.")
        return jnp.sort(operand, axis=dimension)
    operands = [L._lift(x) for x in operand]
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"lax.sort: num_keys={num_keys} must be between 1 and the {len(operands)} operands.")
    shapes = {tuple(aval_of(x).shape) for x in operands}
    if len(shapes) != 1:
        raise TypeError(f"lax.sort: all operands must have one shape; got {sorted(shapes)}.")
    order = jnp.argsort(operands[num_keys - 1], axis=dimension, stable=True)
    for key in reversed(operands[:num_keys - 1]):  # least significant key first, each sort stable
        order = jnp.take_along_axis(order, jnp.argsort(jnp.take_along_axis(key, order, dimension), axis=dimension,
                                                       stable=True), dimension)
    return tuple(jnp.take_along_axis(x, order, dimension) for x in operands)


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """`keys` sorted along `dimension`, and `values` in the same order."""
    return sort((keys, values), dimension, is_stable, num_keys=1)


def top_k(operand: Any, k: int, *, axis: int = -1, is_stable: bool = True) -> list[Any]:
    """The `k` largest entries along the last axis (or `axis`), largest first, and their int32 indices (ties: the
    lower index first, which `is_stable=False` also allows)."""
    jnp = _jnp()
    x = L._lift(operand)
    size = aval_of(x).shape[axis] if aval_of(x).ndim else 0
    if not 0 <= int(k) <= size:
        raise ValueError(f"lax.top_k: k={k} must be between 0 and the size {size} of the operand's axis {axis}.")
    order = jnp.argsort(x, axis=axis, descending=True, stable=True)
    indices = S.slice_in_dim(order, 0, int(k), 1, axis % aval_of(x).ndim)
    return [jnp.take_along_axis(x, indices, axis), indices.astype(np.int32)]


def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> list[Any]:
    """The `k` largest entries along `reduction_dimension` and their indices (exact, as JAX's on CPU)."""
    return top_k(operand, k, axis=reduction_dimension)


def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> list[Any]:
    """The `k` smallest entries along `reduction_dimension` and their indices (exact, as JAX's on CPU)."""
    jnp = _jnp()
    x = L._lift(operand)
    axis = reduction_dimension % aval_of(x).ndim
    indices = S.slice_in_dim(jnp.argsort(x, axis=axis, stable=True), 0, int(k), 1, axis)
    return [jnp.take_along_axis(x, indices, axis), indices.astype(np.int32)]


# ---- scans ---------------------------------------------------------------------------------------------------------


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """log(cumsum(exp(operand))) along `axis`, computed without overflow (a prefix scan of logaddexp)."""
    return associative_scan(_jnp().logaddexp, L._lift(operand), reverse=reverse, axis=axis)


# ---- structure -----------------------------------------------------------------------------------------------------


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """`operand` repeated `reps[i]` times along each dimension i."""
    return _jnp().tile(operand, tuple(int(r) for r in reps))


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """`operand` cut along `axis` into consecutive pieces of the given `sizes` (which must add up to its size)."""
    x = L._lift(operand)
    total = aval_of(x).shape[axis]
    if builtins.sum(sizes) != total:
        raise ValueError(f"lax.split: sizes {tuple(sizes)} must add up to the size {total} of axis {axis}.")
    starts = np.cumsum([0] + list(sizes))
    return [S.slice_in_dim(x, int(a), int(b), 1, axis % aval_of(x).ndim) for a, b in zip(starts[:-1], starts[1:])]


def complex(x: Any, y: Any) -> Any:  # noqa: A001 - jax.lax.complex
    """x + i y from two real arrays of one dtype."""
    x, y = L._same_dtype("complex", x, y)
    kind = np.complex64 if aval_of(x).dtype == np.float32 else np.complex128
    jnp = _jnp()
    return jnp.add(x.astype(kind), jnp.multiply(y.astype(kind), np.asarray(1j, kind)))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape all of `shapes` broadcast to (NumPy's rule)."""
    return _jnp().broadcast_shapes(*[tuple(s) for s in shapes])


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Any:
    """An array of `shape` and `dtype` whose values are unspecified (zeros here)."""
    return _jnp().zeros(tuple(shape), dtype, out_sharding=out_sharding)


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """`operands` (of one shape) stacked along a new dimension `axis`."""
    return _jnp().stack([L._lift(x) for x in operands], axis=axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """`x` cut along `axis` into its slices (that dimension removed)."""
    x = L._lift(x)
    axis = axis % aval_of(x).ndim
    return tuple(S.index_in_dim(x, i, axis, keepdims=False) for i in range(aval_of(x).shape[axis]))


def broadcast_like(arr: Any, like_arr: Any) -> Any:
    """`arr` broadcast (aligned on trailing dimensions) to the shape of `like_arr`."""
    return _jnp().broadcast_to(arr, tuple(aval_of(L._lift(like_arr)).shape))


def shape_as_value(shape: Sequence[int]) -> Any:
    """`shape` as an int32 array."""
    return _jnp().asarray(np.asarray(shape, np.int32))


def platform_dependent(*args: Any, default: Callable[..., Any] | None = None, **per_platform: Callable[..., Any]) -> Any:
    """The `cpu` branch applied to `args` (meshax runs on CPUs), else `default`."""
    branch = per_platform.get("cpu", default)
    if branch is None:
        raise NotImplementedError(f"platform_dependent has no branch for cpu (given: {sorted(per_platform)}) and no "
                                  "default.")
    return branch(*args)


def composite(decomposition: Callable[..., Any], name: str, version: int = 0) -> Callable[..., Any]:
    """`decomposition` itself (meshax has no compiler to hand a named composite to)."""
    return decomposition


def dce_sink(val: Any, *, prevent_mlir_dce: bool = False) -> None:
    """Marks `val` as used (nothing to do: meshax removes no dead code)."""
    return None


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Any:
    """Matrix products over matching leading batch dimensions."""
    nd = aval_of(L._lift(lhs)).ndim
    if nd < 2 or nd != aval_of(L._lift(rhs)).ndim:
        raise ValueError(f"lax.batch_matmul needs operands of one rank of at least 2; got ranks {nd} and "
                         f"{aval_of(L._lift(rhs)).ndim}.")
    batch = tuple(range(nd - 2))
    return L.dot_general(lhs, rhs, (((nd - 1,), (nd - 2,)), (batch, batch)), precision)


def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Any:
    """`src` indexed by the integer arrays `idxs` along `axes` (one index array per axis, broadcast together)."""
    index: list[Any] = [builtins.slice(None)] * aval_of(L._lift(src)).ndim
    for i, axis in zip(idxs, axes):
        index[axis] = i
    return L._lift(src)[tuple(index)]


def optimization_barrier(operand: Any) -> Any:
    """`operand` unchanged (meshax does not reorder or fuse operations, so there is nothing to hold back)."""
    return tree_map(L.U._as_array, operand)


def dtype(x: Any, *, canonicalize: bool = False) -> np.dtype:
    """The dtype of `x` (canonicalized to the enabled precision when asked)."""
    kind = np.dtype(getattr(x, "dtype", None) or dtypes.dtype_of(x)[0])
    return dtypes.canonicalize_dtype(kind) if canonicalize else kind
