"""A scan over several devices of this one process run as one loop over the whole values, where each device's rows
are computed from its own rows alone.

Over several devices an eager scan runs each iteration's body through the eager interpreter (loop_steps.py): some
40 operations an iteration, each choosing a sharding rule and placing its inputs (a GRU's training step over 2
devices of one process: ~9,600 such operations). Where every device of the mesh is this process's, every split
input is cut along one dimension over the same mesh axes, and every operation of the body computes a device's rows
from that device's rows (elementwise operations, products with unsplit weights, reductions and transposes that
keep the split dimension: `_row_dims`), each device's results are its rows of the body computed on the whole
values. The loop then runs as one device's loop does (numpy_eval's scan: generated code, compiled for small
bodies) on the whole values, and its results are placed as the eager loop places them: split as their rows are (a
whole carry that the body returns split, a zero cotangent to start with, is split from the first step).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..arrays.array import Array
from ..arrays.placement import device_put
from ..core.core import aval_of, sharding_rules
from ..core.jaxpr import Jaxpr, Literal
from ..interpreters import numpy_eval
from ..runtime import devices as device_table
from ..sharding.placement_rules import elementwise
from ..sharding.shardings import NamedSharding, PartitionSpec

_REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin"})


def run(scan_numpy: Any, args: Sequence[Any], *, jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int,
        reverse: bool) -> list[Any] | None:
    """The scan's outputs (carry, then stacked ys) as Arrays, computed by `scan_numpy` (the one-device loop) on the
    whole values; None where the devices' rows are not their own (see the module's docstring)."""
    layout = _input_dims(args, num_consts + num_carry)
    if layout is None:
        return None
    mesh, entry, dims = layout
    out_dims = _row_dims(jaxpr, dims)
    carry = slice(num_consts, num_consts + num_carry)
    if out_dims is not None and out_dims[:num_carry] != dims[carry]:
        # a whole carry that the body returns split (a zero cotangent to start with) is split from the first step
        if any(d is not None and d != out for d, out in zip(dims[carry], out_dims)):
            return None
        dims[carry] = out_dims[:num_carry]
        out_dims = _row_dims(jaxpr, dims)
        if out_dims is not None and out_dims[:num_carry] != dims[carry]:
            return None
    if out_dims is None:
        return None
    whole = [np.asarray(a) for a in args]
    outs = scan_numpy(numpy_eval.run, *whole, jaxpr=jaxpr, num_consts=num_consts, num_carry=num_carry,
                      length=length, reverse=reverse)
    ys_dims = [None if d is None else d + 1 for d in out_dims[num_carry:]]  # stacked: one more leading dimension
    return [device_put(value, NamedSharding(mesh, _spec(np.ndim(value), d, entry)))
            for value, d in zip(outs, out_dims[:num_carry] + ys_dims)]


def _input_dims(args: Sequence[Any], leading: int) -> tuple[Any, tuple[str, ...], list[int | None]] | None:
    """(the mesh, the mesh axes splitting the inputs, each input's split dimension in the body: None where whole,
    a row's dimension for the xs), where every input is an Array of one process's mesh of Auto axes, whole or cut
    evenly along one dimension over the same axes (not an xs' leading one), or a constant of one device; else
    None."""
    if device_table.process_count() != 1 or not args or not all(type(a) is Array for a in args):
        return None
    mesh, entry, dims = None, None, []
    for index, a in enumerate(args):
        sharding = a.sharding
        if getattr(aval_of(a), "explicit", None):
            return None
        if not isinstance(sharding, NamedSharding):  # a value of one device (a constant): whole
            if not sharding.is_fully_replicated:
                return None
            dims.append(None)
            continue
        if mesh is None:
            mesh = sharding.mesh
        elif sharding.mesh != mesh:
            return None
        split = [(d, tuple(e) if isinstance(e, tuple) else (e,)) for d, e in enumerate(tuple(sharding.spec)) if e]
        if not split:
            dims.append(None)
            continue
        if len(split) > 1:
            return None
        d, axes = split[0]
        if (entry is not None and axes != entry) or a.shape[d] % math.prod(mesh.shape[x] for x in axes):
            return None
        entry = axes
        if index >= leading:  # an xs: the loop walks its leading dimension, each row keeps the others
            if d == 0:
                return None
            d -= 1
        dims.append(d)
    return (mesh, entry, dims) if entry is not None else None


def _row_dims(jaxpr: Jaxpr, dims: Sequence[int | None]) -> list[int | None] | None:
    """Each output's split dimension (None: whole) where every equation of `jaxpr` computes each device's rows of
    its results from that device's rows of its inputs split along `dims` (None: whole on every device); else None."""
    env = {v.id: d for v, d in zip(jaxpr.invars, dims)}

    def dim(x: Any) -> int | None:
        return None if isinstance(x, Literal) else env.get(x.id)

    for eq in jaxpr.equations:
        ins = [dim(x) for x in eq.inputs]
        split = {d for d in ins if d is not None}
        if not split:
            out: int | None = None
        elif len(split) > 1:
            return None
        else:
            out = _row_dim(eq, ins, split.pop())
            if out is None:
                return None
        for v in eq.outputs:
            env[v.id] = out
    return [dim(v) for v in jaxpr.outvars]


def _row_dim(eq: Any, ins: Sequence[int | None], d: int) -> int | None:
    """The split dimension of `eq`'s outputs where its inputs split along `ins` (all `d` or whole) give each device's
    rows from its own; None where they do not."""
    name, params = eq.primitive.name, eq.params
    shape = eq.outputs[0].aval.shape if eq.outputs else ()
    if sharding_rules.get(eq.primitive) is elementwise and not eq.primitive.multiple_results:
        # the split inputs as large as the result along d (a whole one broadcasts as it is on every device)
        rows = all(x is None or (aval_of(v).ndim == len(shape) and aval_of(v).shape[d] == shape[d])
                   for v, x in zip(eq.inputs, ins))
        return d if rows and len(shape) > d else None
    if name == "dot_general":
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        if lb or rb or len(ins) != 2:
            return None
        left_free = [i for i in range(aval_of(eq.inputs[0]).ndim) if i not in lc]
        right_free = [i for i in range(aval_of(eq.inputs[1]).ndim) if i not in rc]
        if ins[0] is not None and ins[1] is None and ins[0] in left_free:
            return left_free.index(ins[0])
        if ins[1] is not None and ins[0] is None and ins[1] in right_free:
            return len(left_free) + right_free.index(ins[1])
        return None
    if name == "reshape":  # rows kept whole: the split dimension leads and keeps its size
        size = aval_of(eq.inputs[0]).shape[0]
        return 0 if d == 0 and shape and shape[0] == size and params.get("dimensions") is None else None
    if name == "transpose":
        return tuple(params["permutation"]).index(d)
    if name == "broadcast_in_dim":
        target = params["broadcast_dimensions"][d]
        return target if shape[target] == aval_of(eq.inputs[0]).shape[d] else None
    if name in _REDUCTIONS:
        axes = tuple(params["axes"])
        return None if d in axes else d - sum(a < d for a in axes)
    if name == "slice":  # basic indexing: only slices, ints and Ellipsis-free; the split dimension taken whole
        index = tuple(params["index"])
        size = aval_of(eq.inputs[0]).shape[d]
        if len(index) > aval_of(eq.inputs[0]).ndim or any(i is None or i is Ellipsis for i in index):
            return None
        if d < len(index) and (not isinstance(index[d], slice) or index[d].indices(size) != (0, size, 1)):
            return None
        return d - sum(isinstance(i, (int, np.integer)) for i in index[:d])
    if name == "concatenate":
        return d if params["axis"] != d and all(x == d for x in ins) else None
    return None


def _spec(ndim: int, d: int | None, entry: tuple[str, ...]) -> PartitionSpec:
    return PartitionSpec(*[entry if i == d else None for i in range(ndim)])
