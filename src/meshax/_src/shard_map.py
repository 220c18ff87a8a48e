"""shard_map: per-device code with explicit collectives.

The function is traced once on the local (per-device) shapes into a Jaxpr. Running it
places the inputs as the in_specs say, then evaluates the Jaxpr with a DeviceTrace, in
which every value is one NumPy array per local device: ordinary primitives run their
implementation device by device; collectives combine devices through memory within a
process and MPI across processes (collectives.py).
"""
from __future__ import annotations

import functools
import math
import threading
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from . import devices as device_table
from .array import Array, read_only
from .core import Jaxpr, Primitive, ShapedArray, Trace, aval_of, eval_jaxpr, new_trace, trace_to_jaxpr
from .mesh import Mesh, current_mesh
from .partition import place, spec_of
from .sharding import NamedSharding, PartitionSpec
from .tree_util import tree_flatten, tree_unflatten


class _MeshStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[Mesh] = []


_meshes = _MeshStack()


def axis_sizes(axes: Sequence[str], what: str) -> int:
    """The product of the sizes of mesh `axes` of the enclosing shard_map (clear errors outside one)."""
    if not _meshes.stack:
        raise NameError(
            f"{what} over axis {tuple(axes)!r} used outside shard_map: collectives need the mesh axes of an "
            "enclosing meshax.shard_map."
        )
    mesh = _meshes.stack[-1]
    size = 1
    for name in axes:
        if name not in mesh.shape:
            raise NameError(f"{what}: unbound axis name {name!r}; the shard_map mesh has axes {mesh.axis_names}.")
        size *= mesh.shape[name]
    return size


class PerDevice:
    """A value inside shard_map: one NumPy array per local device of the mesh."""

    def __init__(self, aval: ShapedArray, values: dict) -> None:
        self.aval = aval
        self.values = values


class DeviceTrace(Trace):
    """Evaluates primitives device by device; collectives have their own `device_impl`."""

    def __init__(self, mesh: Mesh, devices: Sequence[Any]) -> None:
        self.mesh = mesh
        self.devices = devices  # this process's devices of the mesh

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        if primitive.device_impl is not None:
            return primitive.device_impl(self, *args, **params)
        avals = [aval_of(a) for a in args]
        out = primitive.abstract_eval(*avals, **params)
        out_avals = out if primitive.multiple_results else [out]
        extra = {"local_shapes": [a.shape for a in out_avals]} if primitive.needs_local_shape else {}
        results: list[dict] = [dict() for _ in out_avals]
        for device in self.devices:
            value = primitive.impl(*[self.value(a, device) for a in args], **params, **extra)
            for slot, v in zip(results, value if primitive.multiple_results else [value]):
                slot[device] = np.asarray(v)
        outputs = [PerDevice(a, r) for a, r in zip(out_avals, results)]
        return outputs if primitive.multiple_results else outputs[0]

    @staticmethod
    def value(x: Any, device: Any) -> Any:
        if isinstance(x, PerDevice):
            return x.values[device]
        if isinstance(x, Array):
            return np.asarray(x)
        return x

    def lift(self, x: Any) -> PerDevice:
        return x if isinstance(x, PerDevice) else PerDevice(aval_of(x), {d: np.asarray(self.value(x, d))
                                                                          for d in self.devices})


def _specs_for(specs: Any, tree: Any, count: int, what: str) -> list[PartitionSpec]:
    if isinstance(specs, PartitionSpec) or specs is None:
        return [specs or PartitionSpec()] * count
    flat, spec_structure = tree_flatten(specs, is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)
    if len(flat) != count:
        # As JAX's: the specs may be a prefix of the tree, one spec then covering a whole subtree.
        try:
            parts = spec_structure.flatten_up_to(tree_unflatten(tree, list(range(count))))
        except ValueError:
            raise ValueError(f"shard_map {what} has {len(flat)} PartitionSpecs but there are {count} {what[:-6]}s "
                             f"({tree}); give one spec per {what[:-6]}, or a tree of specs that is a prefix "
                             "of theirs.") from None
        expanded: list[PartitionSpec | None] = [None] * count
        for spec, part in zip(flat, parts):
            for index in tree_flatten(part)[0]:
                expanded[index] = spec
        flat = expanded
    return [s or PartitionSpec() for s in flat]


def _parts(mesh: Mesh, spec: PartitionSpec, ndim: int) -> list[int]:
    axes = spec.normalized()
    return [math.prod(mesh.shape[a] for a in (axes[d] if d < len(axes) else ())) for d in range(ndim)]


def _local_aval(aval: ShapedArray, mesh: Mesh, spec: PartitionSpec, index: int) -> ShapedArray:
    NamedSharding(mesh, spec).check_rank(aval.ndim, f"argument {index}")
    parts = _parts(mesh, spec, aval.ndim)
    for dim, (size, n) in enumerate(zip(aval.shape, parts)):
        if size % n:
            raise ValueError(
                f"shard_map argument {index} of shape {aval.shape}: dimension {dim} (size {size}) is not divisible "
                f"by the {n} shards that {spec!r} asks for."
            )
    return ShapedArray(tuple(s // n for s, n in zip(aval.shape, parts)), aval.dtype, aval.weak_type)


def _global_aval(aval: ShapedArray, mesh: Mesh, spec: PartitionSpec) -> ShapedArray:
    NamedSharding(mesh, spec)  # unknown or repeated axis names raise here, naming them
    axes = spec.normalized()
    if len(axes) > aval.ndim:  # trailing Nones beyond the rank are accepted, as seed 003 writes them
        raise ValueError(f"shard_map out_specs {spec!r} is longer than the rank {aval.ndim} of the output {aval}.")
    parts = _parts(mesh, spec, aval.ndim)
    return ShapedArray(tuple(s * n for s, n in zip(aval.shape, parts)), aval.dtype, aval.weak_type)


class _RunPlan(NamedTuple):
    """What a shard_map call needs besides its inputs' buffers, fixed by its signature."""

    devices: tuple  # this process's devices of the mesh, in mesh order
    in_shardings: tuple  # NamedSharding per input
    in_specs: tuple  # normalized spec per input (partition.spec_of)
    in_local_avals: tuple
    out_shardings: tuple


@functools.lru_cache(maxsize=256)
def _plan(mesh: Mesh, in_specs: tuple, in_avals: tuple, out_specs: tuple) -> _RunPlan:
    here = device_table.process_index()
    in_shardings = tuple(NamedSharding(mesh, spec) for spec in in_specs)
    return _RunPlan(
        tuple(d for d in mesh.flat_devices if d.process_index == here),
        in_shardings,
        tuple(spec_of(sharding, aval.ndim) for sharding, aval in zip(in_shardings, in_avals)),
        tuple(_local_aval(aval, mesh, spec, i) for i, (aval, spec) in enumerate(zip(in_avals, in_specs))),
        tuple(NamedSharding(mesh, spec) for spec in out_specs),
    )


def _run(*args: Any, jaxpr: Jaxpr, mesh: Mesh, in_specs: tuple, out_specs: tuple, out_avals: tuple) -> list[Array]:
    in_avals = tuple(aval_of(arg) for arg in args)
    plan = _plan(mesh, in_specs, in_avals, out_specs)
    trace = DeviceTrace(mesh, plan.devices)
    inputs = []
    for arg, aval, spec, local_aval in zip(args, in_avals, plan.in_specs, plan.in_local_avals):
        buffers = place(arg, mesh, spec, aval).local_buffers()
        inputs.append(PerDevice(local_aval, {d: buffers[d] for d in trace.devices}))
    _meshes.stack.append(mesh)
    try:
        with new_trace(trace):
            outputs = [trace.lift(o) for o in eval_jaxpr(jaxpr, inputs)]
    finally:
        _meshes.stack.pop()
    return [Array(aval.shape, aval.dtype, sharding, _read_only_values(out.values, aval.dtype), aval.weak_type)
            for out, sharding, aval in zip(outputs, plan.out_shardings, out_avals)]


def _read_only_values(values: dict, dtype: np.dtype) -> dict:
    """Read-only views of per-device results, one per distinct buffer (replicas keep sharing it)."""
    views: dict[int, np.ndarray] = {}
    result = {}
    for device, value in values.items():
        view = views.get(id(value))
        if view is None:
            view = views[id(value)] = read_only(np.asarray(value, dtype))
        result[device] = view
    return result


def _abstract(*avals: ShapedArray, jaxpr: Jaxpr, mesh: Mesh, in_specs: tuple, out_specs: tuple,
              out_avals: tuple) -> list[ShapedArray]:
    return list(out_avals)


shard_map_p = Primitive("shard_map", None, _abstract, None, multiple_results=True)
shard_map_p.eager = lambda *args, **params: _run(*args, **params)


def shard_map(f: Callable[..., Any] | None = None, mesh: Mesh | None = None, in_specs: Any = None,
              out_specs: Any = None, check_vma: bool = True, check_rep: bool | None = None,
              axis_names: Any = None, auto: Any = None) -> Any:
    """Map `f` over the shards of its inputs: `f` sees each device's block and may use collectives."""
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma, check_rep=check_rep, axis_names=axis_names)
    if out_specs is None:
        raise TypeError("shard_map needs out_specs (a PartitionSpec or a tree of them matching f's outputs).")
    cache: dict[Any, tuple[Jaxpr, Any, tuple, tuple, tuple]] = {}

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        the_mesh = mesh if mesh is not None else current_mesh()
        if the_mesh is None:
            raise ValueError("shard_map needs a mesh: pass mesh= or call it inside `with mesh:`.")
        leaves, structure = tree_flatten(args)
        specs = tuple(_specs_for(in_specs, structure, len(leaves), "in_specs"))
        avals = [aval_of(x) for x in leaves]
        key = (structure, tuple(avals), specs, the_mesh)
        if key not in cache:
            cache[key] = _trace(f, the_mesh, structure, avals, specs, out_specs)
        jaxpr, out_structure, out_spec_list, out_avals, _ = cache[key]
        outs = shard_map_p.bind(*leaves, jaxpr=jaxpr, mesh=the_mesh, in_specs=specs, out_specs=out_spec_list,
                                out_avals=out_avals)
        return tree_unflatten(out_structure, outs)

    return mapped


def _trace(f: Callable[..., Any], mesh: Mesh, structure: Any, avals: list[ShapedArray], specs: tuple,
           out_specs: Any) -> tuple:
    local = [_local_aval(a, mesh, s, i) for i, (a, s) in enumerate(zip(avals, specs))]
    out_structure = []

    def flat(*xs: Any) -> list[Any]:
        result = f(*tree_unflatten(structure, list(xs)))
        leaves, tree = tree_flatten(result)
        out_structure.append(tree)
        return leaves

    _meshes.stack.append(mesh)
    try:
        jaxpr, outputs = trace_to_jaxpr(flat, local)
    finally:
        _meshes.stack.pop()
    out_spec_list = tuple(_specs_for(out_specs, out_structure[0], len(outputs), "out_specs"))
    out_avals = tuple(_global_aval(aval_of(o), mesh, s) for o, s in zip(outputs, out_spec_list))
    out_spec_list = tuple(PartitionSpec(*tuple(s)[:a.ndim]) for s, a in zip(out_spec_list, out_avals))
    return jaxpr, out_structure[0], out_spec_list, out_avals, local

