"""One call over a process's block instead of one call per device.

When the devices' shards of every split operand are consecutive blocks along one dimension (the batch
rows of data parallelism) and the primitive computes each block of that dimension from the same blocks
of its inputs, one call over the joined block gives every device's result at once (as views of it):
one dispatch instead of one per device, and one large call that BLAS, or the fused-cluster executor,
spreads over the controller's whole share of the threads, where per-device calls side by side each
get a slice of it (a data-parallel step on one process of 16 devices, 16 cores: 82 -> 63 ms); `_join_mode`
says where that pays. Where it does not (large elementwise calls with several threads), the devices'
calls run side by side but write their blocks into one buffer. The joined inputs are the results of
earlier joined calls where their buffers are those results' views (arrays/joined_values.py), views
where the shards lie one after another in one buffer, else copies. A matrix product that contracts the
split dimension sums the devices' partial products itself; its result stands for all of them
(`collectives.LocallyCombined`) in the reduction across devices that follows; a small one (summed next in
XLA's pairwise order) gives each device's partial product from one call over their blocks stacked.
Inside shard_map (`run_joined_on_devices`) the devices' values are joined along the result's first
dimension where one call's result, cut into equal blocks, is each device's.

Taken: matrix products (`dot_general`), fused clusters, the elementwise primitives whose results do not
depend on the size of the block (cpu_executor.BLOCKWISE, and transcendentals: float32_math gives each element
one value whatever the block) and sums, maxima and
minima that keep the joined dimension (each of its rows reduced on its own, as in a device's block).
The devices' values of one shape may also be stacked along a new first dimension (`_run_stacked`):
inside shard_map scalars (a device's loss), and, there and in eager data parallelism, reductions over a
device's rows (a bias's gradient) and products contracting them (a weight's), which NumPy computes for each
C-ordered block of the stack as for the block alone.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np

from ..arrays.array import Array, read_only
from ..arrays.collectives import TREE_UP_TO, LocallyCombined, local_groups
from ..arrays.joined_values import STACKED, JoinedValues, joined_values, whole_of
from ..arrays.partition import named_sharding
from ..core.core import Primitive, ShapedArray, impl_rules, sharding_rules
from ..runtime import compute_pool
from ..sharding.mesh import Mesh
from ..sharding.placement_rules import Spec, elementwise
from .cpu_executor import BLOCKWISE, CpuExecutor, takes_out, written

_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min"})  # each kept row reduced on its own
_TAKEN = (BLOCKWISE - {"broadcast_in_dim"}) | {"dot_general", "fused"} | _REDUCTIONS
SMALL = 1 << 16  # elements of a result whose devices' calls cost more to dispatch than to compute


ONE_CALL, SIDE_BY_SIDE = "one call", "side by side"


def _join_mode(primitive: Primitive, elements: int, params: dict[str, Any]) -> str | None:
    """How the devices' blocks run as one (None: they do not): `ONE_CALL` over the joined blocks where that
    gives each device's values and beats the devices' calls side by side: always with one compute thread
    (they would run one after the other); else for matmuls (BLAS spreads one over the threads), clusters the
    executor spreads (those whose compiled kernel has run, any from `CpuExecutor.min_threads`) and small results
    (`elements`: of all the devices' results).
    Large elementwise calls with several threads run `SIDE_BY_SIDE`, one per device, but write into one
    buffer, so that the joined calls after them (a matmul of the activations) read it without a copy."""
    if primitive.name not in _TAKEN and not getattr(impl_rules.get(primitive), "precise", False):
        return None
    threads = compute_pool.workers()
    if (threads == 1 or primitive.name == "dot_general" or elements <= SMALL
            or (primitive.name == "fused" and (threads >= CpuExecutor.min_threads or _compiled(params["cluster"])))):
        return ONE_CALL
    return SIDE_BY_SIDE


def _compiled(cluster: Any) -> bool:
    """Whether `cluster` runs as a compiled kernel (its row ranges spread over all the threads)."""
    program = cluster.kernel().numba
    return program is not None and program.compiled


def _side_by_side(primitive: Primitive, operands: list[list[Any]], params: dict[str, Any], dtype: np.dtype,
                  block_shapes: list[tuple[int, ...]]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each device's result (`operands[i]`: device i's operands) computed by its own call, side by side on the
    controller's threads, written into consecutive blocks of rows of one buffer: (that buffer, the blocks)."""
    whole = np.empty((sum(shape[0] for shape in block_shapes),) + block_shapes[0][1:], dtype)
    bounds = np.cumsum([0] + [shape[0] for shape in block_shapes])
    outs = [whole[lo:hi] for lo, hi in zip(bounds, bounds[1:])]
    calls = [functools.partial(_call_into, primitive, args, params, out) for args, out in zip(operands, outs)]
    compute_pool.run_each(calls, blas=False)
    return whole, outs


def _call_into(primitive: Primitive, args: Sequence[Any], params: dict[str, Any], out: np.ndarray) -> None:
    impl = impl_rules[primitive]
    if primitive.needs_local_shape:
        params = {**params, "local_shapes": [out.shape]}
    if primitive.name == "fused":
        impl(*args, **params, out=out)
    elif takes_out(primitive.name, impl, args, out.dtype):
        written(np.asarray(impl.into(*args, out=out)), out)
    else:
        written(np.asarray(impl(*args, **params)), out)


_SAME = -1  # an operand whose shards are the same block on every local device


def run_joined(primitive: Primitive, inputs: Sequence[Any], params: dict[str, Any], mesh: Mesh,
               local: Sequence[Any], out_avals: Sequence[ShapedArray], out_specs: Sequence[Spec],
               summed_over: tuple[str, ...]) -> list[dict] | None:
    """The per-device results of `primitive` (global Arrays `inputs`) over the `local` devices of `mesh`, from
    one call over their joined blocks; None where that does not apply (the caller then runs one call per
    device). `summed_over`: the mesh axes the results are summed over next (empty where they are not)."""
    mode = _join_mode(primitive, out_avals[0].size, params) if len(out_avals) == 1 else None
    if (len(local) < 2 or mode is None or primitive.multiple_results or not inputs
            or not all(isinstance(x, Array) for x in inputs)):
        return None
    devices = tuple(local)
    splits = [_split(x.sharding, x.shape, devices) for x in inputs]
    out = _split(named_sharding(mesh, out_specs[0]), out_avals[0].shape, devices)
    if out is None or None in splits or all(dim == _SAME for dim, _ in splits):
        return None
    in_dims = [dim for dim, _ in splits]
    out_dim, out_intervals = out
    name = primitive.name
    if name == "dot_general":
        plan = _dot_plan(inputs, params, in_dims, out_dim, out_avals[0], summed_over, mesh, local)
    elif name == "fused":
        plan = _cluster_plan(params["cluster"], inputs, in_dims, out_dim)
    elif sharding_rules.get(primitive) is elementwise:
        plan = all(d in (_SAME, out_dim) and (d != _SAME or x.ndim == 0) for x, d in zip(inputs, in_dims))
    elif name in _REDUCTIONS:
        plan = in_dims[0] != _SAME and out_dim == _kept_dim(in_dims[0], params)
    else:
        plan = False
    intervals = {i for dim, i in splits if dim != _SAME}
    if len(intervals) != 1 or (out_dim != _SAME and intervals != {out_intervals}):
        return None  # the split operands' blocks must line up with each other and with the result's
    if not plan:
        if mode != ONE_CALL:
            return None
        return _stacked_partials(primitive, inputs, params, in_dims, out_dim, out_avals[0], devices)
    if mode == SIDE_BY_SIDE:
        if out_dim != 0:
            return None
        blocks = [_block_shape(out_avals[0].shape, 0, [i]) for i in out_intervals]
        operands = [[x.local_buffers()[d] for x in inputs] for d in local]
        whole, _ = _side_by_side(primitive, operands, params, out_avals[0].dtype, blocks)
        return [joined_values(whole, 0, devices, [shape[0] for shape in blocks])]
    buffers = [_joined_buffers(x.local_buffers(), devices, dim) if dim != _SAME else x.local_buffers()[local[0]]
               for x, dim in zip(inputs, in_dims)]
    if primitive.needs_local_shape:
        shape = out_avals[0].shape if out_dim == _SAME else _block_shape(out_avals[0].shape, out_dim, out_intervals)
        params = {**params, "local_shapes": [shape]}
    result = impl_rules[primitive](*buffers, **params)
    if out_dim == _SAME:  # the devices' partial sums, added up
        combined = LocallyCombined(np.asarray(result))
        return [{d: combined for d in local}]
    return [joined_values(np.asarray(result), out_dim, devices, [hi - lo for lo, hi in out_intervals])]


def _joined_buffers(buffers: dict, devices: tuple[Any, ...], dim: int) -> np.ndarray:
    """An Array's local `buffers`, the `devices`' consecutive blocks along `dim`, as one array."""
    whole = whole_of(buffers, devices, dim)
    return whole if whole is not None else join_blocks([buffers[d] for d in devices], dim)


def _stacked_partials(primitive: Primitive, inputs: Sequence[Array], params: dict[str, Any], in_dims: Sequence[int],
                      out_dim: int, out_aval: ShapedArray, devices: tuple[Any, ...]) -> list[dict] | None:
    """Each device's part of a reduction across the devices (a small weight's or bias's gradient under data
    parallelism, reduced in XLA's order next), from one call over the devices' blocks stacked, as shard_map's
    bodies compute them (`_run_stacked`); None where that does not apply."""
    if out_dim != _SAME or (primitive.name != "dot_general" and primitive.name not in _REDUCTIONS):
        return None
    split = [dim != _SAME for dim in in_dims]
    values = [[x.local_buffers()[d] for d in devices] if s else x.local_buffers()[devices[0]]
              for x, s in zip(inputs, split)]
    joined = [x.local_buffers() if s else None for x, s in zip(inputs, split)]
    each = _run_stacked(primitive, params, values, joined, split, out_aval, devices)
    return None if each is None else [each]


def run_joined_on_devices(primitive: Primitive, operands: Sequence[Any], own: Sequence[bool], params: dict[str, Any],
                          out_aval: ShapedArray, devices: tuple[Any, ...]) -> JoinedValues | None:
    """Inside shard_map: each device's result of `primitive` from one call over the devices' values joined along
    the result's first dimension (or stacked), as views of it; None where that does not apply. `operands[i]`:
    the devices' values (device -> array) where `own[i]`, else one value for all of them."""
    if primitive.name == "reshape" and own[0]:
        return _reshaped(operands[0], out_aval, devices)
    mode = _join_mode(primitive, out_aval.size * len(devices), params)
    if len(devices) < 2 or primitive.multiple_results or mode is None:
        return None
    values, joined = _per_device(operands, own, devices)
    split = [isinstance(v, list) for v in values]
    if not any(split):
        return None
    dims = _device_plan(primitive, params, values, split, out_aval) if out_aval.shape else None
    if mode == SIDE_BY_SIDE:
        if dims is None or dims[1] != 0:
            return None
        each = [[v[i] if s else v for v, s in zip(values, split)] for i in range(len(devices))]
        whole, _ = _side_by_side(primitive, each, params, out_aval.dtype, [out_aval.shape] * len(devices))
        return joined_values(whole, 0, devices)
    if dims is None:
        return _run_stacked(primitive, params, values, joined, split, out_aval, devices)
    in_dims, out_dim = dims
    count = len(devices)
    buffers = [v if d == _SAME else _joined(v if s else [v] * count, whole_of(j, devices, d), d)
               for v, j, s, d in zip(values, joined, split, in_dims)]
    if primitive.needs_local_shape:
        shape = out_aval.shape
        params = {**params, "local_shapes": [shape[:out_dim] + (shape[out_dim] * count,) + shape[out_dim + 1:]]}
    return joined_values(np.asarray(impl_rules[primitive](*buffers, **params)), out_dim, devices)


def _reshaped(values: Any, out_aval: ShapedArray, devices: tuple[Any, ...]) -> JoinedValues | None:
    """Each device's value reshaped, as one reshape of the C-ordered result the values are equal blocks of (a view,
    as each device's reshape is); None where they are not."""
    whole = whole_of(values, devices, STACKED)
    if whole is None:
        whole = whole_of(values, devices, 0)
    if whole is None or not whole.flags.c_contiguous or whole.size != len(devices) * out_aval.size:
        return None
    return joined_values(whole.reshape((len(devices),) + out_aval.shape), STACKED, devices)


def _per_device(operands: Sequence[Any], own: Sequence[bool], devices: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
    """Each operand as the call sees it: the list of the devices' arrays, or one array where every device holds the
    same buffer (or it is not the trace's own); and beside it the operand's JoinedValues, if it is one."""
    values: list[Any] = []
    joined: list[Any] = []
    for v, mine in zip(operands, own):
        if not mine:
            values.append(v)
            joined.append(None)
        elif isinstance(v, JoinedValues) and v.over(devices):
            values.append(list(v.values()))
            joined.append(v)
        else:
            each = list(v.values()) if tuple(v) == devices else [v[d] for d in devices]  # keys compared by identity
            values.append(each[0] if one_buffer(each) else each)
            joined.append(None)
    return values, joined


def _joined(buffers: list[np.ndarray], whole: np.ndarray | None, dim: int) -> np.ndarray:
    return whole if whole is not None else join_blocks(buffers, dim)


def _run_stacked(primitive: Primitive, params: dict[str, Any], values: Sequence[Any], joined: Sequence[Any],
                 split: Sequence[bool], out_aval: ShapedArray, devices: tuple[Any, ...]) -> JoinedValues | None:
    """Each device's result of `primitive` from one call over the devices' values (`values[i]`: a list where
    `split[i]`; `joined[i]`: its JoinedValues, if any) stacked along a new first dimension: elementwise
    primitives and clusters without broadcasts whose split operands have the result's shape, reductions of
    C-ordered values (NumPy reduces each block of the stack in the same order as the block alone), and matrix
    products of two per-device operands (a weight's gradient before its sum over the devices: np.matmul makes
    each device's BLAS call in turn, as that device's own call would); large ones spread over the threads in
    ranges of the stack (`_call_stacked`); None where that does not apply."""
    stacks = [v for v, s in zip(values, split) if s]
    if not all(isinstance(x, np.ndarray) and x.shape == stack[0].shape for stack in stacks for x in stack):
        return None
    count = len(stacks[0])
    if primitive.name in _REDUCTIONS:
        if len(values) != 1 or not all(x.flags.c_contiguous for x in stacks[0]):
            return None
        params = {**params, "axes": tuple(a + 1 for a in params["axes"])}
    elif primitive.name == "fused" or sharding_rules.get(primitive) is elementwise:
        inside = params["cluster"].jaxpr.equations if primitive.name == "fused" else ()
        if any(stack[0].shape != out_aval.shape for stack in stacks) or any(
                eq.primitive.needs_local_shape for eq in inside):
            return None
        if primitive.needs_local_shape:
            params = {**params, "local_shapes": [(count,) + out_aval.shape]}
    elif primitive.name == "dot_general" and len(values) == 2 and all(split):
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        if lb or rb:
            return None
        params = {**params, "dimension_numbers": ((tuple(d + 1 for d in lc), tuple(d + 1 for d in rc)), ((0,), (0,)))}
    else:
        return None
    operands = [_stacked(v, j, devices) if s else v for v, j, s in zip(values, joined, split)]
    if any(x is None for x in operands):
        return None
    return joined_values(_call_stacked(primitive, operands, split, params), STACKED, devices)


def _call_stacked(primitive: Primitive, operands: Sequence[Any], split: Sequence[bool],
                  params: dict[str, Any]) -> np.ndarray:
    """`primitive` over operands stacked along their first dimension where `split`, as ranges of the stack side by
    side on the controller's threads where that pays: large reductions (a reduction runs on one thread in NumPy;
    each device's block is reduced as alone), and large products once the controller has `PRODUCTS_APART_FROM`
    threads, each range on one BLAS thread (as each device's own call runs beside the others'). np.matmul runs the
    devices' products one after the other, each on all of BLAS's threads: on 2 cores that measured faster than one
    thread each side by side (1.0 against 1.3-1.9 ms), but a small product gains little from many threads and pays
    their hand-over each time (16 cores, a 1024x10 weight gradient of 128 rows per device, 16 devices: 2.2 ms
    stacked against 0.5 ms for the same 2048 rows as one product)."""
    impl = impl_rules[primitive]
    count = next(len(x) for x, s in zip(operands, split) if s)
    threads = 1 if compute_pool.in_batch() else compute_pool.workers()
    if primitive.name == "dot_general":
        spread = threads >= PRODUCTS_APART_FROM and _multiply_adds(operands, params) >= SPREAD_PRODUCTS_FROM
    else:
        spread = threads >= 2 and primitive.name in _REDUCTIONS and \
            sum(x.size for x, s in zip(operands, split) if s) >= SPREAD_STACK_FROM
    if not spread:
        return np.asarray(impl(*operands, **params))
    parts = min(threads, count)
    bounds = [count * i // parts for i in range(parts + 1)]
    calls = [functools.partial(impl, *[x[lo:hi] if s else x for x, s in zip(operands, split)], **params)
             for lo, hi in zip(bounds, bounds[1:])]
    pieces = compute_pool.run_each(calls, blas=primitive.name == "dot_general")
    return np.concatenate([np.asarray(piece) for piece in pieces])


def _multiply_adds(operands: Sequence[Any], params: dict[str, Any]) -> int:
    """The multiply-adds of a stacked product (both operands stacked, the stack its batch dimension)."""
    left, right = operands
    contracted = math.prod(left.shape[d] for d in params["dimension_numbers"][0][0])
    return left.size * (right.size // max(1, right.shape[0] * contracted)) if contracted else 0


SPREAD_STACK_FROM = 1 << 18  # elements of a stacked reduction's operand worth splitting among the threads
PRODUCTS_APART_FROM = CpuExecutor.min_threads  # compute threads from which large stacked products are spread
SPREAD_PRODUCTS_FROM = 1 << 22  # multiply-adds of a stacked product worth splitting among the threads


def _stacked(values: list[np.ndarray], joined: Any, devices: tuple[Any, ...]) -> np.ndarray | None:
    """The devices' `values` (of one shape) stacked along a new first dimension: without a copy where they are a
    result's views in order (stacked, or cut into equal C-ordered blocks of rows: then a reshape of it, laid out
    as the stack), a copy where they are small; None where a copy would cost more than the devices' calls."""
    whole = whole_of(joined, devices, STACKED)
    if whole is not None:
        return whole
    whole = whole_of(joined, devices, 0)
    if whole is not None and whole.flags.c_contiguous and whole.shape[0] == len(values) * values[0].shape[0]:
        return whole.reshape((len(values),) + values[0].shape)
    return np.stack(values) if len(values) * values[0].size <= SMALL else None


def summed_products(program: Any, mesh: Mesh, devices: tuple[Any, ...]) -> frozenset[int]:
    """The matrix products of a shard_map's `program` (ids of their equations) whose result is only summed next
    over mesh axes joining all of this process's `devices` in one group (a weight's gradient before its
    reduce-scatter): one product over the devices' joined contracted dimension then gives that group's local
    part of the sum (`run_summed_product`)."""
    key = (id(program), mesh, devices)
    if key not in _summed_cache:
        if len(_summed_cache) >= 256:
            _summed_cache.clear()
        _summed_cache[key] = (program, _find_summed_products(program, mesh, devices))
    return _summed_cache[key][1]


_summed_cache: dict[tuple, tuple[Any, frozenset[int]]] = {}  # the program is kept so that its id stays its own


def _find_summed_products(program: Any, mesh: Mesh, devices: tuple[Any, ...]) -> frozenset[int]:
    uses: dict[int, int] = {}
    summed: set[int] = set()
    for eq in program.equations:
        for x in eq.inputs:
            if hasattr(x, "id"):
                uses[x.id] = uses.get(x.id, 0) + 1
        if eq.primitive.name == "grouped_sum" and _one_local_group(mesh, eq.params["axes"], devices):
            summed.update(x.id for x in eq.inputs if hasattr(x, "id"))
    for x in program.outvars:
        if hasattr(x, "id"):
            uses[x.id] = uses.get(x.id, 0) + 1
    return frozenset(id(eq) for eq in program.equations if eq.primitive.name == "dot_general"
                     and eq.outputs[0].id in summed and uses.get(eq.outputs[0].id) == 1)


def _one_local_group(mesh: Mesh, axes: tuple[str, ...], devices: tuple[Any, ...]) -> bool:
    groups = local_groups(mesh, tuple(axes), devices[0].process_index)
    return len(groups) == 1 and set(groups[0].local) == set(devices)


def run_summed_product(primitive: Primitive, operands: Sequence[Any], params: dict[str, Any],
                       devices: tuple[Any, ...]) -> Any:
    """The sum of the devices' matrix products (`operands[i]`: the devices' values of operand i, device -> array),
    as one product over their values joined along a contracted dimension, standing for all of them
    (LocallyCombined); None where the product is not one of two per-device operands, or its result is small
    (summed device by device in XLA's order) or not floating-point."""
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    if len(operands) != 2 or lb or rb or not lc:
        return None
    values, joined = _per_device(operands, [True, True], devices)
    if not all(isinstance(v, list) for v in values):
        return None
    left, right = values[0][0], values[1][0]
    elements = math.prod(n for d, n in enumerate(left.shape) if d not in lc) * \
        math.prod(n for d, n in enumerate(right.shape) if d not in rc)
    if not _summed_in_blas(np.result_type(left, right), elements):
        return None
    lhs = _joined(values[0], whole_of(joined[0], devices, lc[0]), lc[0])
    rhs = _joined(values[1], whole_of(joined[1], devices, rc[0]), rc[0])
    return LocallyCombined(np.asarray(impl_rules[primitive](lhs, rhs, **params)))


def one_buffer(values: Sequence[Any]) -> bool:
    """Whether the devices' values are one buffer (replicated inputs come as one view per device)."""
    first = values[0]
    if all(v is first for v in values):
        return True
    if not isinstance(first, np.ndarray):
        return False
    key = (first.__array_interface__["data"][0], first.shape, first.strides, first.dtype)
    return all(isinstance(v, np.ndarray) and (v.__array_interface__["data"][0], v.shape, v.strides, v.dtype) == key
               for v in values[1:])


def _device_plan(primitive: Primitive, params: dict[str, Any], values: Sequence[Any], split: Sequence[bool],
                 out_aval: ShapedArray) -> tuple[list[int], int] | None:
    """(the dimension each operand is joined along, `_SAME` for one value shared by all devices; the result's
    joined dimension), or None where the devices' results are not blocks of one call's."""
    ndims = [np.ndim(v[0] if s else v) for v, s in zip(values, split)]
    if primitive.name == "dot_general":
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        if lb or rb or len(values) != 2:
            return None
        lhs_free = [d for d in range(ndims[0]) if d not in lc]
        rhs_free = [d for d in range(ndims[1]) if d not in rc]
        if split == [True, False] and lhs_free:
            return [lhs_free[0], _SAME], 0
        if split == [False, True] and rhs_free:
            return [_SAME, rhs_free[0]], len(lhs_free)
        return None
    if primitive.name == "fused":
        row_axes = params["cluster"].kernel().row_axes
        if row_axes is None:
            return None
        rows = out_aval.shape[0]
        dims = []
        for v, s, axis in zip(values, split, row_axes):
            if s and (axis is None or np.shape(v[0])[axis] != rows):
                return None  # a split operand must give each row of the result its own row
            if not s and axis is not None and np.shape(v)[axis] != 1:
                if np.shape(v)[axis] != rows or np.size(v) * len(values[split.index(True)]) > SMALL:
                    return None
                dims.append(axis)  # one small value every device reads row by row: repeated for each
            else:
                dims.append(axis if s else _SAME)
        return dims, 0
    if sharding_rules.get(primitive) is elementwise and all(
            np.shape(v[0]) == out_aval.shape if s else n == 0 for v, n, s in zip(values, ndims, split)):
        return [0 if s else _SAME for s in split], 0
    if primitive.name in _REDUCTIONS and _kept_dim(0, params) == 0:
        return [0], 0
    return None


def _kept_dim(dim: int, params: dict[str, Any]) -> int | None:
    """Where a reduction's operand dimension `dim` lies in its result; None where it is reduced."""
    axes = params["axes"]
    if dim in axes:
        return None
    return dim if params.get("keepdims") else dim - sum(a < dim for a in axes)


@functools.lru_cache(maxsize=4096)
def _split(sharding: Any, shape: tuple[int, ...], local: tuple[Any, ...]) -> tuple[int, Any] | None:
    """How the `local` devices' shards of an array of `shape` laid out as `sharding` lie: (`_SAME`, None) where
    each holds the same block, (dim, their intervals along it) where they are consecutive blocks along one
    dimension in device order, None otherwise."""
    boxes = sharding.device_boxes(shape)
    if any(d not in boxes for d in local):
        return None
    mine = [boxes[d] for d in local]
    first = mine[0]
    if all(b == first for b in mine):
        return _SAME, None
    differing = {i for b in mine for i, (x, y) in enumerate(zip(b, first)) if x != y}
    if len(differing) != 1:
        return None
    dim = differing.pop()
    intervals = tuple(b[dim] for b in mine)
    if any(a[1] != b[0] for a, b in zip(intervals, intervals[1:])):
        return None
    return dim, intervals


def _block_shape(shape: tuple[int, ...], dim: int, intervals: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """`shape` with dimension `dim` cut to the span of `intervals`."""
    return shape[:dim] + (intervals[-1][1] - intervals[0][0],) + shape[dim + 1:]


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
        return (bool(summed_over) and _one_local_group(mesh, summed_over, tuple(local))
                and _summed_in_blas(out_aval.dtype, out_aval.size))
    return False


def _summed_in_blas(dtype: Any, elements: int) -> bool:
    """Whether the devices' partial products may be summed inside one product: floating-point results larger than
    the sums combined device by device in XLA's pairwise order (collectives.TREE_UP_TO)."""
    return np.dtype(dtype).kind == "f" and elements > TREE_UP_TO


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


def join_blocks(buffers: list[np.ndarray], dim: int) -> np.ndarray:
    """The devices' consecutive blocks as one array: a view where they lie one after another in one buffer (their
    common base itself, read-only, where they tile all of it), else a copy."""
    first = buffers[0]
    root = _root(first)
    start = expected = first.__array_interface__["data"][0]
    for previous, buffer in zip(buffers, buffers[1:]):
        expected += previous.shape[dim] * first.strides[dim]
        if (root is None or buffer.dtype != first.dtype or buffer.strides != first.strides
                or _root(buffer) is not root or buffer.__array_interface__["data"][0] != expected):
            return np.concatenate(buffers, axis=dim)
    shape = first.shape[:dim] + (sum(b.shape[dim] for b in buffers),) + first.shape[dim + 1:]
    if (isinstance(root, np.ndarray) and root.dtype == first.dtype and root.shape == shape
            and root.strides == first.strides and root.__array_interface__["data"][0] == start):
        return read_only(root)
    return np.lib.stride_tricks.as_strided(first, shape, first.strides, writeable=False)


def _root(buffer: np.ndarray) -> Any:
    """The object owning `buffer`'s memory (None where it owns it itself: then no other shard shares it)."""
    base = buffer.base
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base
