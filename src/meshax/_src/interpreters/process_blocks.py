"""One call over a process's block instead of one call per device, where a controller's devices would run one
after the other anyway.

A controller with one compute thread runs its devices' calls of a primitive one by one. When the devices'
shards of every split operand are consecutive blocks along one dimension (the batch rows of data
parallelism) and the primitive computes each block of that dimension from the same blocks of its inputs,
one call over the joined block gives every device's result at once (as views of it): fewer calls, and
BLAS on one large matrix instead of several small ones. The joined inputs are views where the shards lie
one after another in one buffer (results of earlier joined calls), else copies. A matrix product that
contracts the split dimension sums the devices' partial products itself; its result stands for all of
them (`collectives.LocallyCombined`) in the reduction across devices that follows.

Taken: matrix products (`dot_general`), fused clusters and the elementwise primitives whose results do
not depend on the size of the block (cpu_executor.BLOCKWISE; not transcendentals).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..arrays.array import Array
from ..arrays.collectives import TREE_UP_TO, LocallyCombined, local_groups
from ..arrays.partition import to_partition_spec
from ..core.core import Primitive, ShapedArray, impl_rules, sharding_rules
from ..runtime import compute_pool
from ..sharding.mesh import Mesh
from ..sharding.placement_rules import Spec, elementwise
from ..sharding.shardings import NamedSharding
from .cpu_executor import BLOCKWISE

Box = tuple[tuple[int, int], ...]
_TAKEN = BLOCKWISE | {"dot_general", "fused"}
_SAME = -1  # an operand whose shards are the same block on every local device


def run_joined(primitive: Primitive, inputs: Sequence[Any], params: dict[str, Any], mesh: Mesh,
               local: Sequence[Any], out_avals: Sequence[ShapedArray], out_specs: Sequence[Spec],
               summed_over: tuple[str, ...]) -> list[dict] | None:
    """The per-device results of `primitive` (global Arrays `inputs`) over the `local` devices of `mesh`, from
    one call over their joined blocks; None where that does not apply (the caller then runs one call per
    device). `summed_over`: the mesh axes the results are summed over next (empty where they are not)."""
    if (len(local) < 2 or len(out_avals) != 1 or primitive.multiple_results or primitive.name not in _TAKEN
            or not inputs or not all(isinstance(x, Array) for x in inputs) or compute_pool.workers() > 1):
        return None
    input_boxes = [x.sharding.device_boxes(x.shape) for x in inputs]
    out_boxes = [NamedSharding(mesh, to_partition_spec(out_specs[0])).device_boxes(out_avals[0].shape)]
    in_dims = [_split_dim([boxes[d] for d in local]) for boxes in input_boxes]
    out_dim = _split_dim([out_boxes[0][d] for d in local])
    if None in in_dims or out_dim is None or all(d == _SAME for d in in_dims):
        return None
    name = primitive.name
    if name == "dot_general":
        plan = _dot_plan(inputs, params, in_dims, out_dim, out_avals[0], summed_over, mesh, local)
    elif name == "fused":
        plan = _cluster_plan(params["cluster"], inputs, in_dims, out_dim)
    elif name in BLOCKWISE and name != "broadcast_in_dim" and sharding_rules.get(primitive) is elementwise:
        plan = all(d in (_SAME, out_dim) and (d != _SAME or x.ndim == 0) for x, d in zip(inputs, in_dims))
    else:
        plan = False
    if not plan or not _aligned(local, input_boxes, in_dims, out_boxes[0], out_dim):
        return None
    buffers = [_join([x.local_buffers()[d] for d in local], dim) if dim != _SAME else x.local_buffers()[local[0]]
               for x, dim in zip(inputs, in_dims)]
    extra = {"local_shapes": [_joined_shape(out_boxes[0], local)]} if primitive.needs_local_shape else {}
    result = impl_rules[primitive](*buffers, **params, **extra)
    if out_dim == _SAME:  # the devices' partial sums, added up
        combined = LocallyCombined(np.asarray(result))
        return [{d: combined for d in local}]
    start = out_boxes[0][local[0]][out_dim][0]
    cut = [slice(None)] * np.ndim(result)
    views = {}
    for d in local:
        lo, hi = out_boxes[0][d][out_dim]
        cut[out_dim] = slice(lo - start, hi - start)
        views[d] = result[tuple(cut)]
    return [views]


def _split_dim(boxes: Sequence[Box]) -> int | None:
    """The one dimension along which `boxes` (in device order) are consecutive blocks, `_SAME` where they are all
    equal, None otherwise."""
    first = boxes[0]
    if all(b == first for b in boxes):
        return _SAME
    differing = {i for b in boxes for i, (x, y) in enumerate(zip(b, first)) if x != y}
    if len(differing) != 1:
        return None
    dim = differing.pop()
    if any(a[dim][1] != b[dim][0] for a, b in zip(boxes, boxes[1:])):
        return None
    return dim


def _aligned(local: Sequence[Any], input_boxes: Sequence[dict], in_dims: Sequence[int], out_boxes: dict,
             out_dim: int) -> bool:
    """Whether every split operand is split into the same intervals (the devices' blocks line up)."""
    reference = None
    for boxes, dim in zip(input_boxes, in_dims):
        if dim == _SAME:
            continue
        intervals = [boxes[d][dim] for d in local]
        if reference is None:
            reference = intervals
        elif intervals != reference:
            return False
    return out_dim == _SAME or reference == [out_boxes[d][out_dim] for d in local]


def _dot_plan(inputs: Sequence[Any], params: dict[str, Any], in_dims: Sequence[int], out_dim: int,
              out_aval: ShapedArray, summed_over: tuple[str, ...], mesh: Any, local: Sequence[Any]) -> bool:
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    if lb or rb or len(inputs) != 2:
        return False
    left, right = in_dims
    lhs_free = [d for d in range(inputs[0].ndim) if d not in lc]
    rhs_free = [d for d in range(inputs[1].ndim) if d not in rc]
    if right == _SAME and left in lhs_free:  # rows of the left operand: rows of the result
        return out_dim == lhs_free.index(left)
    if left == _SAME and right in rhs_free:
        return out_dim == len(lhs_free) + rhs_free.index(right)
    if left in lc and right in rc and lc.index(left) == rc.index(right) and out_dim == _SAME:
        # both split along one contracted dimension: partial products, summed over every local device next
        groups = local_groups(mesh, tuple(summed_over), local[0].process_index) if summed_over else ()
        return (len(groups) == 1 and set(groups[0].local) == set(local) and np.dtype(out_aval.dtype).kind == "f"
                and out_aval.size > TREE_UP_TO)
    return False


def _cluster_plan(cluster: Any, inputs: Sequence[Any], in_dims: Sequence[int], out_dim: int) -> bool:
    """A fused cluster computes each block of its output's rows from the same rows of its inputs (cpu_executor's
    row axes); inputs not split must be broadcast along the rows."""
    row_axes = cluster.kernel().row_axes
    if out_dim != 0 or row_axes is None:
        return False
    for x, dim, axis in zip(inputs, in_dims, row_axes):
        if dim == _SAME:
            if axis is not None and x.shape[axis] != 1:
                return False
        elif dim != axis:
            return False
    return True


def _join(buffers: list[np.ndarray], dim: int) -> np.ndarray:
    """The devices' consecutive blocks as one array: a view where they lie one after another in one buffer (the
    views of an earlier joined result), else a copy."""
    first = buffers[0]
    root = _root(first)
    expected = first.__array_interface__["data"][0]
    for previous, buffer in zip(buffers, buffers[1:]):
        expected += previous.shape[dim] * first.strides[dim]
        if (root is None or buffer.dtype != first.dtype or buffer.strides != first.strides
                or _root(buffer) is not root or buffer.__array_interface__["data"][0] != expected):
            return np.concatenate(buffers, axis=dim)
    shape = list(first.shape)
    shape[dim] = sum(b.shape[dim] for b in buffers)
    return np.lib.stride_tricks.as_strided(first, tuple(shape), first.strides, writeable=False)


def _root(buffer: np.ndarray) -> Any:
    """The object owning `buffer`'s memory (None where it owns it itself: then no other shard shares it)."""
    base = buffer.base
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base


def _joined_shape(boxes: dict, local: Sequence[Any]) -> tuple[int, ...]:
    """The shape of the block that the `local` devices' boxes cover together."""
    return tuple(max(boxes[d][i][1] for d in local) - min(boxes[d][i][0] for d in local)
                 for i in range(len(boxes[local[0]])))
