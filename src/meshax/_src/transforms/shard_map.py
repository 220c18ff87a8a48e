"""shard_map: per-device code with explicit collectives.

The function is traced once on the local (per-device) shapes into a Jaxpr, inside the
named-axis environment of the mesh. Values there carry the manual axes they vary over
(`check_vma=True`, as JAX 0.10): inputs vary over the axes of their in_specs, operations
combine varying axes (marking invariant operands with `pvary`), and an output may only be
invariant over the axes its out_spec leaves out. Eagerly, the Jaxpr runs in a
DeviceTrace (interpreters/shard_map.py), one NumPy array per local device.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..profiler import recorder
from ..runtime import devices as device_table
from ..arrays.array import Array, read_only
from ..core.core import (AxisFrame, Tracer, axis_mesh, current_trace, eager_trace, Primitive, ShapedArray, abstract_eval_rules, aval_of, extend_axis_env, keeps_own_vma,
                   set_current_trace, vma_rules)
from ..sharding.explicit_types import sharding_aval
from ..interpreters.eager import eager_rules
from ..interpreters.numpy_eval import placing, run_alone, structured_applies, structured_rules, supported
from ..arrays.collectives import gather_devices, group_index
from ..arrays.joined_values import JoinedValues
from ..interpreters.shard_map import DeviceTrace, device_rules, evaluate_body
from ..interpreters.staging import consts_as_inputs, trace_to_jaxpr
from ..interpreters.fusion import executable
from ..core.jaxpr import Jaxpr, eval_jaxpr
from ..sharding.mesh import AxisType, Mesh, current_mesh, explicit_names
from ..arrays.partition import place, spec_of
from ..sharding.shardings import NamedSharding, PartitionSpec
from ..tree.tree_util import tree_flatten, tree_unflatten
from ..lax.unreduced_casts import with_partial_sums

shard_map_p = Primitive("shard_map", multiple_results=True)


def spec_axes(spec: PartitionSpec) -> list[str]:
    """The mesh axes a PartitionSpec names, in order."""
    return [name for entry in spec.normalized() for name in entry]


def _is_spec(x: Any) -> bool:
    return isinstance(x, PartitionSpec) or x is None


def _specs_for(specs: Any, tree: Any, count: int, what: str) -> list[PartitionSpec]:
    """One PartitionSpec per leaf of `tree`: `specs` is one for all, or a tree of them that is a prefix of `tree`
    (as JAX's), each spec covering its whole subtree; None is a replicated P()."""
    if _is_spec(specs):
        return [specs if specs is not None else PartitionSpec()] * count
    flat, spec_structure = tree_flatten(specs, is_leaf=_is_spec)
    try:
        parts = spec_structure.flatten_up_to(tree_unflatten(tree, list(range(count))))
    except ValueError as error:
        noun = "argument" if what == "in_specs" else "output"
        raise ValueError(f"shard_map {what} has {len(flat)} PartitionSpecs ({spec_structure}) for {count} "
                         f"{noun}s ({tree}), and their tree is not a prefix of the {noun}s' tree: give one "
                         f"PartitionSpec per {noun}, or a tree of them that is a prefix of theirs ({error}).") from None
    expanded = [PartitionSpec()] * count
    for spec, part in zip(flat, parts):
        for index in tree_flatten(part)[0]:
            expanded[index] = spec if spec is not None else PartitionSpec()
    return expanded


def _out_specs_for(specs: Any, tree: Any, count: int) -> list[PartitionSpec]:
    """out_specs for each output; None only fits a function that returns no arrays (None, (), ...)."""
    if specs is None and count:
        raise TypeError(f"shard_map got out_specs=None, but the function returns {count} arrays ({tree}); give "
                        "out_specs: a PartitionSpec or a tree of them matching the function's outputs.")
    return _specs_for(specs, tree, count, "out_specs")


def _parts(mesh: Mesh, spec: PartitionSpec, ndim: int) -> list[int]:
    axes = spec.normalized()
    return [math.prod(mesh.shape[a] for a in (axes[d] if d < len(axes) else ())) for d in range(ndim)]


def _local_aval(aval: ShapedArray, mesh: Mesh, spec: PartitionSpec, index: int, check_vma: bool) -> ShapedArray:
    NamedSharding(mesh, spec).check_rank(aval.ndim, f"argument {index}")
    parts = _parts(mesh, spec, aval.ndim)
    for dim, (size, n) in enumerate(zip(aval.shape, parts)):
        if size % n:
            raise ValueError(
                f"shard_map argument {index} of shape {aval.shape}: dimension {dim} (size {size}) is not divisible "
                f"by the {n} shards that {spec!r} asks for."
            )
    varying = frozenset(spec_axes(spec)) | aval.vma if check_vma else frozenset()
    local = ShapedArray(tuple(s // n for s, n in zip(aval.shape, parts)), aval.dtype, aval.weak_type, varying)
    if check_vma and (spec.unreduced or spec.reduced):  # partial sums, or reduced: typed on the mesh (its rules)
        local = local.update(unreduced=spec.unreduced, reduced=spec.reduced, mesh=mesh)
    return local


def trimmed(spec: PartitionSpec, ndim: int) -> PartitionSpec:
    """`spec` without entries beyond rank `ndim` (seed 003 writes trailing Nones), keeping its unreduced/reduced."""
    return PartitionSpec(*tuple(spec)[:ndim], unreduced=spec.unreduced, reduced=spec.reduced)


def _check_out_rank(f: Callable[..., Any], aval: ShapedArray, spec: PartitionSpec, index: int,
                    trailing_nones: bool) -> None:
    """An out_spec may not have more entries than its output has dimensions (as JAX checks); the older spelling
    (`older_shard_map`) accepts extra trailing Nones, as seed 003 writes them."""
    entries = spec.normalized() if trailing_nones else tuple(spec)
    if len(entries) > aval.ndim:
        name = getattr(f, "__name__", repr(f))
        raise ValueError(f"shard_map applied to the function '{name}' was given out_specs {spec!r} (length "
                         f"{len(tuple(spec))}) for output {index} ({aval.str_short()}), which has rank "
                         f"{aval.ndim}: an out_specs entry may not be longer than its output's rank; shorten the "
                         f"spec or return a value with more dimensions.")


def _global_aval(aval: ShapedArray, mesh: Mesh, spec: PartitionSpec, manual: tuple = ()) -> ShapedArray:
    """The aval outside the map of an output `aval` laid out as `spec` (varying only over enclosing maps' axes)."""
    NamedSharding(mesh, spec)  # unknown or repeated axis names raise here, naming them
    parts = _parts(mesh, spec, aval.ndim)
    out = ShapedArray(tuple(s * n for s, n in zip(aval.shape, parts)), aval.dtype, aval.weak_type,
                      aval.vma - frozenset(manual))
    return sharding_aval(out, NamedSharding(mesh, spec))  # typed with the mesh's Explicit axes


class _RunPlan(NamedTuple):
    """What a shard_map call needs besides its inputs' buffers, fixed by its signature."""

    devices: tuple  # this process's devices of the mesh, in mesh order
    in_shardings: tuple  # NamedSharding per input
    in_specs: tuple  # normalized spec per input (partition.spec_of)
    in_local_avals: tuple
    out_shardings: tuple


@functools.lru_cache(maxsize=256)
def _plan(mesh: Mesh, in_specs: tuple, in_avals: tuple, out_specs: tuple, check_vma: bool) -> _RunPlan:
    here = device_table.process_index()
    in_shardings = tuple(NamedSharding(mesh, spec) for spec in in_specs)
    return _RunPlan(
        tuple(d for d in mesh.flat_devices if d.process_index == here),
        in_shardings,
        tuple(spec_of(sharding, aval.ndim) for sharding, aval in zip(in_shardings, in_avals)),
        tuple(_local_aval(aval, mesh, spec, i, check_vma) for i, (aval, spec) in enumerate(zip(in_avals, in_specs))),
        tuple(NamedSharding(mesh, spec) for spec in out_specs),
    )


def _run(*args: Any, jaxpr: Jaxpr, mesh: Mesh, in_specs: tuple, out_specs: tuple, out_avals: tuple,
         check_vma: bool, manual_axes: tuple) -> list[Array]:
    """Eager evaluation: place the inputs as in_specs say, run the body device by device, assemble outputs."""
    in_avals = tuple(aval_of(arg) for arg in args)
    plan = _plan(mesh, in_specs, in_avals, out_specs, check_vma)
    trace = DeviceTrace(None, mesh, plan.devices)
    inputs = []
    for arg, aval, spec, local_aval in zip(args, in_avals, plan.in_specs, plan.in_local_avals):
        inputs.append(trace.new(local_aval, _device_values(place(arg, mesh, spec, aval), trace.devices)))
    with set_current_trace(trace, finish=True), extend_axis_env(AxisFrame(mesh, manual_axes, check_vma)):
        outputs = [trace.lift(o) for o in evaluate_body(trace, executable(jaxpr), inputs)]
    return [Array(aval.shape, aval.dtype, sharding, _read_only_values(out.payload, aval.dtype), aval.weak_type)
            for out, sharding, aval in zip(outputs, plan.out_shardings, out_avals)]


def _device_values(array: Array, devices: tuple) -> dict:
    """`array`'s buffers on `devices`, as a shard_map body's per-device values (its JoinedValues kept)."""
    buffers = array.local_buffers()
    if isinstance(buffers, JoinedValues) and buffers.over(devices):
        return buffers
    return {d: buffers[d] for d in devices}


def _read_only_values(values: dict, dtype: np.dtype) -> dict:
    """Read-only views of per-device results, one per distinct buffer (replicas keep sharing it)."""
    if isinstance(values, JoinedValues) and values.whole.dtype == dtype:  # read-only views already
        return values
    views: dict[int, np.ndarray] = {}
    result = {}
    for device, value in values.items():
        view = views.get(id(value))
        if view is None:
            view = views[id(value)] = read_only(np.asarray(value, dtype))
        result[device] = view
    return result


def _abstract(*avals: ShapedArray, out_avals: tuple, **_: Any) -> list[ShapedArray]:
    return list(out_avals)


def _run_nested(trace: DeviceTrace, *args: Any, jaxpr: Jaxpr, mesh: Mesh, in_specs: tuple, out_specs: tuple,
                out_avals: tuple, check_vma: bool, manual_axes: tuple) -> list[Any]:
    """A shard_map inside another one's per-device evaluation: each device cuts its block along this map's
    axes, runs the body, and the outputs are gathered back along them."""
    inner = DeviceTrace(trace, mesh, trace.devices)
    inputs = []
    for arg, spec, var in zip(args, in_specs, jaxpr.invars):
        x = trace.lift(arg)
        inputs.append(inner.new(var.aval, {d: _block(x.payload[d], mesh, spec, d) for d in trace.devices}))
    with set_current_trace(inner, finish=True), extend_axis_env(AxisFrame(mesh, manual_axes, check_vma)):
        outputs = [inner.lift(o) for o in eval_jaxpr(executable(jaxpr), (), inputs)]
    return [trace.new(aval, _assembled(out.payload, mesh, spec)) for out, spec, aval in
            zip(outputs, out_specs, out_avals)]


def _block(value: np.ndarray, mesh: Mesh, spec: PartitionSpec, device: Any) -> np.ndarray:
    for dim, axes in enumerate(spec.normalized()):
        if axes:
            size = value.shape[dim] // math.prod(mesh.shape[a] for a in axes)
            start = group_index(mesh, axes, device) * size
            value = value[(slice(None),) * dim + (slice(start, start + size),)]
    return value


def _assembled(values: dict, mesh: Mesh, spec: PartitionSpec) -> dict:
    for dim, axes in enumerate(spec.normalized()):
        if axes:
            gathered = gather_devices(mesh, axes, values)
            values = {d: np.concatenate(g.values, axis=dim) for d, g in gathered.items()}
    return values


def _alone(params: dict[str, Any]) -> bool:
    """Whether a shard_map runs as a plain NumPy program (numpy_eval.py): its mesh is one device of this process,
    whose block of every value is all of it, and its body runs there with its collectives over that device alone."""
    mesh = params["mesh"]
    return (mesh.size == 1 and mesh.flat_devices[0].process_index == device_table.process_index()
            and supported(params["jaxpr"], alone=True))


abstract_eval_rules[shard_map_p] = _abstract
eager_rules[shard_map_p] = _run
device_rules[shard_map_p] = _run_nested
vma_rules[shard_map_p] = keeps_own_vma
structured_rules[shard_map_p] = lambda run, *args, jaxpr, **_: run_alone(jaxpr, (), args)
structured_applies[shard_map_p] = _alone
placing.add(shard_map_p)


def shard_map(f: Callable[..., Any] | None = None, mesh: Mesh | None = None, in_specs: Any = None,
              out_specs: Any = None, check_vma: bool = True, check_rep: bool | None = None,
              axis_names: Any = None, auto: Any = None) -> Any:
    """Map `f` over the shards of its inputs: `f` sees each device's block and may use collectives."""
    if check_rep is not None:
        check_vma = check_rep
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_vma=check_vma, axis_names=axis_names)
    return _mapped(f, mesh, in_specs, out_specs, check_vma, axis_names, trailing_nones=False)


def older_shard_map(f: Callable[..., Any], mesh: Mesh | None = None, in_specs: Any = None,
                    out_specs: Any = None) -> Callable[..., Any]:
    """The map of the older spelling jax.experimental.shard_map.shard_map as the seeds use it: without varying-axes
    typing, and its out_specs may hold trailing Nones beyond their outputs' rank."""
    return _mapped(f, mesh, in_specs, out_specs, False, None, trailing_nones=True)


def _mapped(f: Callable[..., Any], mesh: Mesh | None, in_specs: Any, out_specs: Any, check_vma: bool,
            axis_names: Any, trailing_nones: bool) -> Callable[..., Any]:
    """`f` mapped over the shards of its inputs (see shard_map)."""
    cache: dict[Any, tuple] = {}

    @functools.wraps(f, updated=())
    def mapped(*args: Any) -> Any:
        the_mesh = mesh if mesh is not None else (axis_mesh() or current_mesh())
        if the_mesh is None:
            raise ValueError("shard_map needs a mesh: pass mesh= or call it inside `with mesh:`.")
        if not isinstance(the_mesh, Mesh):
            raise TypeError(f"shard_map mesh= must be a Mesh; got {the_mesh!r} of type {type(the_mesh).__name__}.")
        leaves, structure = tree_flatten(args)
        specs = tuple(_specs_for(in_specs, structure, len(leaves), "in_specs")) if in_specs is not None else \
            tuple(_spec_of_argument(x, the_mesh) for x in leaves)
        avals = [aval_of(x) for x in leaves]
        if in_specs is not None:
            _check_types_match(the_mesh, specs, avals)
        manual = _manual_axes(the_mesh, axis_names, specs)
        _check_partial_sum_specs(the_mesh, manual, specs, "in_specs", avals)
        _check_partial_sum_specs(the_mesh, manual, out_specs, "out_specs")
        _check_spec_axes(out_specs, the_mesh, manual, "out_specs")
        if current_trace() is eager_trace():  # eagerly, f runs per device (print shows each device's value)
            return _run_eagerly(f, the_mesh, structure, leaves, specs, out_specs, check_vma, manual, trailing_nones)
        key = (structure, tuple(avals), specs, the_mesh, manual)
        traced = cache.get(key)
        if traced is None:
            traced = _trace(f, the_mesh, structure, avals, specs, out_specs, check_vma, manual, trailing_nones)
            if not traced[-1]:  # programs that captured tracers of an enclosing trace are not reused
                cache[key] = traced
        jaxpr, consts, out_structure, out_spec_list, out_avals, _ = traced
        const_specs = tuple(PartitionSpec() for _ in consts)
        outs = shard_map_p.bind(*consts, *leaves, jaxpr=jaxpr, mesh=the_mesh, in_specs=const_specs + specs,
                                out_specs=out_spec_list, out_avals=out_avals, check_vma=check_vma,
                                manual_axes=manual)
        return tree_unflatten(out_structure, outs)

    return mapped


def _check_types_match(mesh: Mesh, specs: tuple, avals: list[ShapedArray]) -> None:
    """On Explicit mesh axes a value's type says how it is split: in_specs must say the same (as JAX checks)."""
    names = explicit_names(mesh)
    if not names:
        return
    for spec, aval in zip(specs, avals):
        typed = [tuple(axes) for axes in aval.explicit] or [()] * aval.ndim
        given = [tuple(a for a in spec_axes(PartitionSpec(entry)) if a in names) for entry in
                 list(spec) + [None] * (aval.ndim - len(spec))]
        if given != typed:
            raise ValueError(f"in_specs passed to shard_map: {PartitionSpec.from_entries(given)} does not match the specs of the input: "
                             f"{PartitionSpec.from_entries(typed)} for arg: {aval}. `in_specs` is an optional argument so you can omit "
                             "specifying it and shard_map will infer the in_specs from the arguments. If you want to "
                             "reshard your inputs, you can use `jax.reshard` on the arguments and then pass those args "
                             "to shard_map.")


def _check_partial_sum_specs(mesh: Mesh, manual: tuple, specs: Any, what: str,
                             avals: Sequence[ShapedArray] = ()) -> None:
    """unreduced/reduced in specs: only where the map makes every mesh axis manual, only over Explicit axes, and
    (in_specs) equal to the inputs' own (JAX's checks)."""
    flat, _ = tree_flatten(specs, is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)
    for spec in flat:
        if not isinstance(spec, PartitionSpec) or not (spec.unreduced or spec.reduced):
            continue
        if set(manual) != set(mesh.axis_names):
            raise NotImplementedError(f"unreduced/reduced can only be passed to {what} when shard_map is in full "
                                      f"manual mode. Got mesh axis names {mesh.axis_names}, manual_axes: "
                                      f"{frozenset(manual)}, specs: {spec!r}.")
        for kind in ("unreduced", "reduced"):
            if not getattr(spec, kind) <= explicit_names(mesh):
                raise ValueError(f"{kind} in {what} {spec!r} can only be used when the mesh passed to shard_map "
                                 f"contains axis names all of type `Explicit`. Got mesh {mesh}")
    for spec, aval in zip(flat if avals else (), avals):
        _check_partial_sums(aval, spec, "in_specs", "in_aval")


def _spec_of_argument(x: Any, mesh: Mesh) -> PartitionSpec:
    """in_specs left out: an Array's own PartitionSpec on the mesh (a meshax extension for Auto axes); a traced
    value's spec from its type's Explicit axes (as JAX infers them). A traced value on Auto axes has no spec to
    infer: JAX's TypeError, rather than a guess that would differ from the eager result."""
    if isinstance(x, Array):
        sharding = x.sharding
        return sharding.spec if isinstance(sharding, NamedSharding) and sharding.mesh == mesh else PartitionSpec()
    aval = aval_of(x)
    if any(aval.explicit):
        return PartitionSpec.from_entries(aval.explicit, unreduced=aval.unreduced, reduced=aval.reduced)
    implicit = frozenset(name for name, kind in zip(mesh.axis_names, mesh.axis_types) if kind != AxisType.Explicit)
    if isinstance(x, Tracer) and implicit:
        kind = "AxisType.Auto" if all(mesh.axis_types[mesh.axis_names.index(n)] == AxisType.Auto for n in implicit) \
            else "AxisType.Auto or AxisType.Manual"
        raise TypeError(f"shard_map in_specs argument must be a pytree of `jax.sharding.PartitionSpec` instances, "
                        f"but it was `None` when axis_names={implicit} are of type {kind}; a traced value (inside "
                        "jit, grad or vmap) carries no layout on such axes, so pass in_specs= (meshax infers them "
                        "from Arrays' shardings only when shard_map is called on Arrays directly).")
    return PartitionSpec()


def _run_eagerly(f: Callable[..., Any], mesh: Mesh, structure: Any, leaves: list[Any], specs: tuple,
                 out_specs: Any, check_vma: bool, manual: tuple, trailing_nones: bool) -> Any:
    """Run `f` itself in a DeviceTrace: Python runs once, every operation device by device."""
    begin = recorder.now() if recorder.on else 0
    in_avals = tuple(aval_of(x) for x in leaves)
    # checked before the plan cache, whose keys equate P('x', None) with P('x')
    for index, (aval, spec) in enumerate(zip(in_avals, specs)):
        NamedSharding(mesh, spec).check_rank(aval.ndim, f"argument {index}")
    plan = _plan(mesh, specs, in_avals, (), check_vma)
    trace = DeviceTrace(eager_trace(), mesh, plan.devices)
    inputs = []
    for arg, aval, spec, local_aval in zip(leaves, in_avals, plan.in_specs, plan.in_local_avals):
        inputs.append(trace.new(local_aval, _device_values(place(arg, mesh, spec, aval), trace.devices)))
    with set_current_trace(trace, finish=True), extend_axis_env(AxisFrame(mesh, manual, check_vma)):
        out_leaves, out_tree = tree_flatten(f(*tree_unflatten(structure, inputs)))
        out_spec_list = tuple(_out_specs_for(out_specs, out_tree, len(out_leaves)))
        outputs = [trace.lift(o) for o in _as_specs_say(out_leaves, out_spec_list, check_vma)]
    for index, (out, spec) in enumerate(zip(outputs, out_spec_list)):
        _check_out_rank(f, out.aval, spec, index, trailing_nones)
        if check_vma:
            _check_replication(f, mesh, manual, out.aval, spec, index)
    results = []
    for out, spec in zip(outputs, out_spec_list):
        aval = _global_aval(out.aval, mesh, spec, manual)
        spec = trimmed(spec, aval.ndim)
        results.append(Array(aval.shape, aval.dtype, NamedSharding(mesh, spec),
                             _read_only_values(out.payload, aval.dtype), aval.weak_type))
    if begin:
        recorder.add(f"shard_map({getattr(f, '__name__', 'f')})", "operation", (recorder.HOST,), begin, recorder.now())
    return tree_unflatten(out_tree, results)


def _manual_axes(mesh: Mesh, axis_names: Any, specs: Sequence[PartitionSpec]) -> tuple[str, ...]:
    """The mesh axes this map makes manual (all, or `axis_names`), in mesh order; specs may name only those."""
    chosen = set(mesh.axis_names if not axis_names else  # None or an empty set: every axis, as in JAX
                 ((axis_names,) if isinstance(axis_names, str) else axis_names))
    unknown = chosen - set(mesh.axis_names)
    if unknown:
        raise ValueError(f"shard_map axis_names {sorted(unknown)} are not axes of the mesh {mesh.axis_names}.")
    manual = tuple(a for a in mesh.axis_names if a in chosen)
    _check_spec_axes(specs, mesh, manual, "in_specs")
    return manual


def _check_spec_axes(specs: Any, mesh: Mesh, manual: tuple, what: str) -> None:
    """Every axis the PartitionSpecs in `specs` (a tree of them) name is a manual axis of the mesh."""
    flat, _ = tree_flatten(specs, is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)
    for spec in flat:
        if not isinstance(spec, PartitionSpec):
            continue
        for axis in spec_axes(spec):
            if axis in manual:
                continue
            from ..runtime.watch import user_site

            if axis not in mesh.axis_names:
                raise ValueError(f"shard_map {what} {spec!r} (at {user_site()}) names axis {axis!r}, which is not "
                                 f"in the mesh: its axes are {mesh.axis_names}.")
            raise ValueError(f"shard_map {what} {spec!r} (at {user_site()}) names the mesh axis {axis!r}, which "
                             f"is not in axis_names={manual}; name only the axes this shard_map makes manual.")


def _trace(f: Callable[..., Any], mesh: Mesh, structure: Any, avals: list[ShapedArray], specs: tuple,
           out_specs: Any, check_vma: bool, manual: tuple, trailing_nones: bool) -> tuple:
    local = [_local_aval(a, mesh, s, i, check_vma) for i, (a, s) in enumerate(zip(avals, specs))]
    out_structure = []

    def flat(*xs: Any) -> list[Any]:
        result = f(*tree_unflatten(structure, list(xs)))
        leaves, tree = tree_flatten(result)
        out_structure.append(tree)
        specs = _out_specs_for(out_specs, tree, len(leaves))
        return _as_specs_say(leaves, specs, check_vma)

    with extend_axis_env(AxisFrame(mesh, manual, check_vma)):
        jaxpr, outputs = trace_to_jaxpr(flat, local)
    out_spec_list = tuple(_out_specs_for(out_specs, out_structure[0], len(outputs)))
    out_local = [aval_of(o) for o in jaxpr.outvars]
    for index, (aval, spec) in enumerate(zip(out_local, out_spec_list)):
        _check_out_rank(f, aval, spec, index, trailing_nones)
        if check_vma:
            _check_replication(f, mesh, manual, aval, spec, index)
    out_avals = tuple(_global_aval(a, mesh, s, manual) for a, s in zip(out_local, out_spec_list))
    out_spec_list = tuple(trimmed(s, a.ndim) for s, a in zip(out_spec_list, out_avals))
    captured_tracers = any(isinstance(c, Tracer) for c in jaxpr.consts)
    return consts_as_inputs(jaxpr), list(jaxpr.consts), out_structure[0], out_spec_list, out_avals, captured_tracers


def _as_specs_say(outputs: list[Any], specs: Sequence[PartitionSpec], check_vma: bool) -> list[Any]:
    """Outputs whose out_specs ask for partial sums (unreduced) or reduced values cast so, as JAX does."""
    if not check_vma:
        return outputs
    return [with_partial_sums(o, s.unreduced, s.reduced) if s.unreduced or s.reduced else o
            for o, s in zip(outputs, specs)]


def _check_partial_sums(aval: ShapedArray, spec: PartitionSpec, what: str, value: str) -> None:
    """The unreduced and reduced axes of a spec are those of the value it describes (JAX's check)."""
    for kind in ("unreduced", "reduced"):
        if getattr(spec, kind) != getattr(aval, kind):
            raise ValueError(f"{what} passed to shard_map should be equal to the {kind} present on the {value}. "
                             f"Got {what}={spec!r} and {value}={aval.str_short()}")


def _check_replication(f: Callable[..., Any], mesh: Mesh, manual: tuple, aval: ShapedArray, spec: PartitionSpec,
                       index: int) -> None:
    """An output must not vary over a mesh axis its out_spec leaves it replicated over (JAX's check_vma)."""
    _check_partial_sums(aval, spec, "out_specs", "out_aval")
    unreplicated = [a for a in manual if a in aval.vma and a not in spec_axes(spec)]
    if unreplicated:
        name = getattr(f, "__name__", repr(f))
        raise ValueError(
            f"shard_map applied to the function '{name}' was given out_specs which require replication which can't "
            f"be statically inferred given the mesh:\n\nThe mesh given has shape {tuple(mesh.devices.shape)} with "
            f"corresponding axis names {mesh.axis_names}.\n\nout_specs is {spec!r} which implies that the "
            f"corresponding output value (output {index}, {aval.str_short()}) is replicated across mesh axis "
            f"{', '.join(repr(a) for a in unreplicated)}, but it varies over "
            f"{'it' if len(unreplicated) == 1 else 'them'}\n\nCheck if these output values are meant to be "
            "replicated over those mesh axes (reduce them with psum/pmean/all_gather first). If not, consider "
            "revising the corresponding out_specs entries. If so, consider disabling the check by passing the "
            "check_vma=False argument to `jax.shard_map`."
        )
