"""Eager evaluation: primitives run at once on global Arrays, partitioned over their mesh.

For one primitive: pick the mesh of the largest Array input, ask the sharding rule
where inputs must be, reshard them (any-to-any, across processes), run the NumPy
implementation once per distinct set of local input buffers (replicas share the
work and the result), and reduce across mesh axes where the rule says so.
This is the root trace: it has no parent. With jax_debug_nans/infs on, a checking variant replaces it; while a
profiler trace is recorded, a recording variant (each operation an event; each device's call on its device's track).
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ..config import config
from ..profiler import recorder
from ..runtime.denormals import flushed
from ..runtime.numpy_errors import silenced
from ..core.jaxpr import Jaxpr
from ..core.dtypes import issubdtype
from ..arrays.array import Array, read_only
from ..arrays.collectives import allreduce_devices
from ..core.core import (Primitive, ShapedArray, Trace, Tracer, abstract_eval, aval_of, binding_eagerly,
                         check_not_escaped, eager_trace, impl_rules, set_eager_trace, sharding_rules)
from ..sharding.mesh import Mesh, retyping
from ..sharding.explicit_types import explicit_names, target_spec
from ..arrays.partial_sums import as_plain, as_unreduced
from ..arrays.partition import SINGLE_AXIS, as_named, choose_mesh, current_specs, place, sharding_for, spec_of, to_partition_spec
from ..sharding.placement_rules import Spec, fit
from ..sharding.shardings import NamedSharding, PartitionSpec, Sharding
from ..arrays.placement import check_committed_devices
from ..arrays.transfer import reshard
from .numpy_eval import learn, structured_rules, try_primitive
from ..arrays.joined_values import JoinedValues
from .process_blocks import run_joined
from .shard_map import run_device_calls
from .staging import inline_rules

eager_rules: dict[Primitive, Callable[..., Any]] = {}  # primitives with their own eager evaluation


class EagerTrace(Trace):
    """Runs primitives at once on global Arrays."""

    def __init__(self) -> None:
        super().__init__(None)

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        with flushed, silenced:  # subnormals flush to zero and NumPy warns of nothing, as XLA's CPU (runtime/)
            return self._process(primitive, args, params)

    def _process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        hold = bool(_holding) and _holding.pop(primitive, False)  # this call's, never a nested call's
        for arg in args:
            if isinstance(arg, Tracer):
                check_not_escaped(arg, self)
        if len(args) > 1:
            _check_devices(primitive, args, params)
        if primitive in structured_rules:
            fast = try_primitive(primitive, args, params)
            if fast is not None:
                return fast
        rule = eager_rules.get(primitive) or inline_rules.get(primitive)
        if rule is not None:
            outputs = rule(*args, **params)
            if primitive in structured_rules:
                learn(primitive, args, params, outputs)
            return outputs
        key = _plan_key(primitive, args, params)
        try:
            plan = _plans.get(key)
        except TypeError:  # a parameter or an input that cannot be a key: planned afresh each time
            plan = key = None
        if plan is None:
            avals = [aval_of(a) for a in args]
            out_avals = abstract_eval(primitive, avals, params)
            if any(a.unreduced for a in (*avals, *out_avals)):
                return _on_partial_sums(self, primitive, args, params, out_avals)
            mesh = choose_mesh(args)
            plan = (avals, out_avals, mesh, _layout(primitive, args, params, avals, out_avals, mesh))
            if key is not None:
                if len(_plans) >= MAX_PLANS:
                    _plans.clear()
                _plans[key] = plan
        return self.run(primitive, args, params, *plan, hold)

    def execute(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any],
                avals: list[ShapedArray], out_avals: list[ShapedArray], hold: bool = False) -> Any:
        """Run `primitive` (typed: `out_avals`) on each device's blocks, moving data where its layout says; with
        `hold`, a result to be reduced across devices comes back as a HeldReduction."""
        mesh = choose_mesh(args)
        layout = _layout(primitive, args, params, avals, out_avals, mesh)
        return self.run(primitive, args, params, avals, out_avals, mesh, layout, hold)

    def run(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any], avals: list[ShapedArray],
            out_avals: list[ShapedArray], mesh: Mesh, layout: Any, hold: bool) -> Any:
        """`execute` with the mesh and layout already chosen."""
        inputs = [place(a, mesh, s, v) for a, s, v in zip(args, layout.in_specs, avals)]
        reduce_axes = tuple(a for a in layout.reduce_axes or () if a not in _kept_partial_sums.stack[-1])
        summed = reduce_axes if layout.reduce_op == "sum" and len(reduce_axes) == len(layout.reduce_axes or ()) else ()
        results = run_locally(primitive, inputs, params, mesh, out_avals, layout.out_specs, summed)
        finish = functools.partial(_outputs, primitive, args, params, mesh, layout, out_avals)
        if reduce_axes:
            if hold and len(results) == 1:
                return HeldReduction(mesh, reduce_axes, layout.reduce_op, results[0], finish)
            results = [allreduce_devices(mesh, reduce_axes, r, layout.reduce_op) for r in results]
        return finish(results)


def _layout(primitive: Primitive, args: Sequence[Any], params: dict[str, Any], avals: list[ShapedArray],
            out_avals: list[ShapedArray], mesh: Mesh) -> Any:
    """Where the primitive's inputs must be and where its outputs land on `mesh` (its sharding rule)."""
    layout = sharding_rules[primitive](current_specs(args, mesh), avals, mesh_shape=dict(mesh.shape),
                                       out_ndims=[a.ndim for a in out_avals], **params)
    out_sharding = params.get("out_sharding")
    if out_sharding is not None:
        _refuse_spec_without_mesh(primitive, mesh, out_sharding)
    return layout


_plans: dict[tuple, tuple] = {}  # (primitive, params, inputs' shardings and types) -> (avals, out avals, mesh, layout)
MAX_PLANS = 8192


def _check_devices(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> None:
    """JAX's error for operands committed to different devices; a program's closed-over values move, as in JAX
    (its parameters are read only when the devices differ: this runs for every eager operation)."""
    try:
        check_committed_devices(args, primitive.name)
    except ValueError:
        if not _has_program(params):
            raise


def _has_program(params: dict[str, Any]) -> bool:
    """Whether a primitive's parameters hold a program (jit, loops, conditionals, shard_map, remat)."""
    return any(isinstance(value, Jaxpr) or isinstance(getattr(value, "jaxpr", None), Jaxpr)
               or (isinstance(value, tuple) and value and isinstance(getattr(value[0], "jaxpr", value[0]), Jaxpr))
               for value in params.values())


def _plan_key(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> tuple | None:
    """What an operation's typing, mesh and layout depend on: its parameters, each input's sharding, type and
    commitment, the axis types in force (auto_axes/explicit_axes) and the default device; None for a traced input (a parameter
    depending on the mesh in use is not planned ahead)."""
    if params.get("out_sharding") is not None or params.get("sharding") is not None:
        return None  # typed against the mesh in use
    signature = []
    for arg in args:
        if isinstance(arg, Array):
            signature.append((arg.sharding, arg.aval, arg.committed))
        elif isinstance(arg, Tracer):
            return None
        else:
            signature.append((type(arg), aval_of(arg)))
    return primitive, tuple(params.items()), tuple(signature), retyping(), config.read("jax_default_device")


class HeldReduction:
    """A primitive's result whose reduction across devices `bind_holding` left for its caller to do, with more
    reductions at once (collectives.allreduce_devices_many); `finish(reduced)` makes the result."""

    def __init__(self, mesh: Mesh, axes: tuple[str, ...], op: str, partials: dict, finish: Callable[[list], Any]):
        self.mesh, self.axes, self.op, self.partials, self.finish = mesh, tuple(axes), op, partials, finish
        self.nbytes = sum({id(v): np.asarray(v).nbytes for v in partials.values()}.values())  # distinct buffers


_holding: dict[Primitive, bool] = {}  # the primitive whose next eager call holds its reduction (bind_holding)


def plain_eager_call() -> bool:
    """Whether a primitive bound now is evaluated eagerly as it is: by the plain eager trace (not one checking
    for NaNs or recording a profile), with no trace or axis frame around it and no reduction held for its caller
    (`bind_holding`)."""
    return binding_eagerly() and eager_trace() is _PLAIN and not _holding


def bind_holding(primitive: Primitive, *args: Any, **params: Any) -> Any:
    """`primitive.bind(...)` in the eager trace, except that a result to be reduced across devices comes back as
    a HeldReduction instead of being reduced now."""
    _holding[primitive] = True
    try:
        return primitive.bind(*args, **params)
    finally:
        _holding.pop(primitive, None)


def _outputs(primitive: Primitive, args: Sequence[Any], params: dict[str, Any], mesh: Mesh, layout: Any,
             out_avals: list[ShapedArray], results: list[dict]) -> Any:
    """The Arrays of a primitive's (reduced) per-device results, laid out as its rule and parameters say."""
    out_sharding = params.get("out_sharding")
    committed = any(isinstance(a, Array) and a.committed for a in args)
    outputs = [
        _make_output(aval, sharding_for(mesh, spec), buffers, committed)
        for aval, spec, buffers in zip(out_avals, layout.out_specs, results)
    ]
    if layout.result_specs is not None:
        outputs = [_moved(o, mesh, spec) for o, spec in zip(outputs, layout.result_specs)]
    if out_sharding is not None:
        outputs = [reshard(o, NamedSharding(mesh, out_sharding)) for o in outputs]
    names = explicit_names(mesh)
    if names:
        outputs = [_as_typed(o, aval, mesh, names) for o, aval in zip(outputs, out_avals)]
    return outputs if primitive.multiple_results else outputs[0]


class _KeptPartialSums(threading.local):
    """Per thread: the mesh axes whose partial sums the operation being run leaves unreduced."""

    def __init__(self) -> None:
        self.stack: list[frozenset] = [frozenset()]


_kept_partial_sums = _KeptPartialSums()


def _on_partial_sums(trace: EagerTrace, primitive: Primitive, args: Sequence[Any], params: dict[str, Any],
                     out_avals: Sequence[ShapedArray]) -> Any:
    """An operation on or giving unreduced values (its typing allowed only operations linear in their partial
    sums): run on each device's partial sums as they are, without reducing over the unreduced axes; its results
    unreduced as typed."""
    kept = frozenset().union(*(a.unreduced for a in out_avals))
    plain_params = {key: _without_unreduced(value) for key, value in params.items()}
    plain_args = [as_plain(a) if isinstance(a, Array) else a for a in args]
    plain_outs = [a.update(unreduced=frozenset()) for a in out_avals]
    _kept_partial_sums.stack.append(kept)
    try:
        out = trace.execute(primitive, plain_args, plain_params, [aval_of(a) for a in plain_args], plain_outs)
    finally:
        _kept_partial_sums.stack.pop()
    outs = out if primitive.multiple_results else [out]
    tagged = [as_unreduced(o, a.unreduced, a.reduced) for o, a in zip(outs, out_avals)]
    return tagged if primitive.multiple_results else tagged[0]


def _without_unreduced(value: Any) -> Any:
    if isinstance(value, PartitionSpec) and value.unreduced:
        return value.update(unreduced=frozenset())
    if isinstance(value, NamedSharding) and value.spec.unreduced:
        return NamedSharding(value.mesh, value.spec.update(unreduced=frozenset()))
    return value


def _moved(output: Array, mesh: Mesh, spec: Spec) -> Array:
    """`output` laid out as `spec`, each entry cut to the axes that split its dimension evenly (a local cut
    when it only splits what was replicated), as committed as before."""
    spec = tuple(fit(entry, size, dict(mesh.shape)) for entry, size in zip(spec, output.shape))
    target = sharding_for(mesh, spec)
    if target == output.sharding:
        return output
    moved = reshard(output, target)
    moved.committed = output.committed
    return moved


def _as_typed(output: Array, aval: ShapedArray, mesh: Mesh, names: frozenset) -> Array:
    """`output` laid out as its type says on the mesh's Explicit axes (`names`), as JAX's results are."""
    current = spec_of(as_named(output.sharding), output.ndim)
    target = target_spec(aval, current, names)
    full = PartitionSpec(*[None if not e else (e[0] if len(e) == 1 else e) for e in target],  # one entry a dimension
                         unreduced=aval.unreduced, reduced=aval.reduced)
    if target == current and isinstance(output.sharding, NamedSharding) and output.sharding.spec == full \
            and len(output.sharding.spec) == len(full):
        return output
    moved = reshard(output, NamedSharding(mesh, full))
    moved.committed = output.committed
    return moved


def _refuse_spec_without_mesh(primitive: Primitive, mesh: Mesh, out_sharding: PartitionSpec) -> None:
    """A bare PartitionSpec naming mesh axes needs a mesh: none of the operands is on one here."""
    if mesh.axis_names == (SINGLE_AXIS,) and any(out_sharding.normalized()):
        raise ValueError(
            f"{primitive.name}: out_sharding={out_sharding!r} names mesh axes, but there is no mesh to read it on: "
            "no operand is an Array on a mesh and no mesh is in use. Use it inside `with "
            "meshax.sharding.use_mesh(mesh):`, or pass NamedSharding(mesh, spec)."
        )


def run_locally(primitive: Primitive, inputs: list[Array], params: dict[str, Any], mesh: Mesh,
                out_avals: list[ShapedArray], out_specs: list[Spec], summed_over: tuple[str, ...] = ()) -> list[dict]:
    """The implementation on each local device's shards, once per distinct set of input buffers, or once over
    their joined blocks where that gives the same (process_blocks.py); `summed_over`: the mesh axes its results
    are summed over next."""
    local = mesh.local_device_tuple()
    if len(local) > 1:
        begin = recorder.now() if recorder.on else 0
        joined = run_joined(primitive, inputs, params, mesh, local, out_avals, out_specs, summed_over)
        if joined is not None:
            if begin:  # one call over every device's blocks: an event of the process
                recorder.add(primitive.name, "joined", (recorder.HOST,), begin, recorder.now(),
                             {"devices": [d.id for d in local]})
            return joined
    local_shapes = _local_shapes(mesh, out_avals, out_specs) if primitive.needs_local_shape else None
    boxes = inputs[0].sharding.device_boxes(inputs[0].shape) if primitive.needs_local_box else None
    impl = impl_rules[primitive]
    task_of_device: dict = {}
    tasks: dict[tuple[int, ...], Any] = {}
    for device in local:
        buffers = [a.local_buffers()[device] for a in inputs]
        key = tuple(id(b) for b in buffers)
        task_of_device[device] = key
        if key not in tasks:
            extra = {"local_shapes": local_shapes[device]} if local_shapes else {}
            if boxes is not None:
                extra["local_box"] = boxes[device]
            tasks[key] = functools.partial(impl, *buffers, **params, **extra)
    calls = _timed_calls(primitive, tasks, task_of_device) if recorder.on else list(tasks.values())
    values = run_device_calls(primitive, calls, sum(a.size for a in out_avals) // max(len(calls), 1))
    outputs = {key: list(value) if primitive.multiple_results else [value] for key, value in zip(tasks, values)}
    results: list[dict] = [dict() for _ in out_avals]
    for device, key in task_of_device.items():
        for slot, value in zip(results, outputs[key]):
            slot[device] = value
    return results


def _timed_calls(primitive: Primitive, tasks: dict, task_of_device: dict) -> list[Callable[[], Any]]:
    """Each distinct call recording its runs on the tracks of the devices it computes for."""
    devices_of: dict = {}
    for device, key in task_of_device.items():
        devices_of.setdefault(key, []).append(device.id)
    return [recorder.timed(call, primitive.name, "device", devices_of[key]) for key, call in tasks.items()]


def _local_shapes(mesh: Mesh, avals: list[ShapedArray], specs: list[Spec]) -> dict:
    """Per local device, the shapes of its blocks of the outputs (memoized where the specs are hashable)."""
    try:
        return _local_shapes_of(mesh, tuple(a.shape for a in avals), tuple(map(tuple, specs)))
    except TypeError:  # a spec entry built of lists
        return _local_shapes_of.__wrapped__(mesh, [a.shape for a in avals], specs)


@functools.lru_cache(maxsize=4096)
def _local_shapes_of(mesh: Mesh, shapes: Sequence[tuple[int, ...]], specs: Sequence[Spec]) -> dict:
    blocks: dict = {}
    for shape, spec in zip(shapes, specs):
        boxes = NamedSharding(mesh, to_partition_spec(spec)).device_boxes(shape)
        for device, box in boxes.items():
            blocks.setdefault(device, []).append(tuple(b - a for a, b in box))
    return blocks


def _make_output(aval: ShapedArray, sharding: Sharding, buffers: dict, committed: bool) -> Array:
    if isinstance(buffers, JoinedValues) and buffers.whole.dtype == aval.dtype:  # read-only views already
        return Array(aval.shape, aval.dtype, sharding, buffers, aval.weak_type, committed)
    shared: dict[int, np.ndarray] = {}
    final = {}
    for device, value in buffers.items():
        array = shared.get(id(value))
        if array is None:
            array = np.asarray(value)
            if array.dtype != aval.dtype:
                array = array.astype(aval.dtype)
            array = read_only(array)
            shared[id(value)] = array
        final[device] = array
    return Array(aval.shape, aval.dtype, sharding, final, aval.weak_type, committed)


class _CheckingEagerTrace(EagerTrace):
    """jax_debug_nans / jax_debug_infs: eager evaluation followed by a check of each floating result.

    A jitted program then runs unfused, equation by equation (JAX's de-optimized rerun), so the error names the
    operation that made the NaN inside it too."""

    def __init__(self, nans: bool, infs: bool) -> None:
        super().__init__()
        self.nans, self.infs = nans, infs

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        if primitive in inline_rules and isinstance(params.get("jaxpr"), Jaxpr):
            return inline_rules[primitive](*args, **params)  # a program (jit): unfused, each operation checked
        outputs = super().process(primitive, args, params)  # NumPy warns of nothing: the check below reports them
        for output in (outputs if primitive.multiple_results else [outputs]):
            if isinstance(output, Array) and issubdtype(output.dtype, np.inexact):
                self._check(primitive, output)
        return outputs

    def _check(self, primitive: Primitive, output: Array) -> None:
        for buffer in {id(b): b for b in output.local_buffers().values()}.values():
            if self.nans and np.isnan(buffer).any():
                raise FloatingPointError(f"invalid value (nan) encountered in {primitive.name}")
            if self.infs and np.isinf(buffer).any():
                raise FloatingPointError(f"invalid value (inf) encountered in {primitive.name}")


class _Recorded:
    """While a profiler trace is recorded: each operation an event of the process (its device calls nest in it)."""

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        name = params.get("name")
        label = f"{primitive.name}({name})" if isinstance(name, str) else primitive.name
        with recorder.span(label, "jit" if primitive.name == "jit" else "operation", (recorder.HOST,)):
            return super().process(primitive, args, params)


class _RecordedEagerTrace(_Recorded, EagerTrace):
    pass


class _RecordedCheckingEagerTrace(_Recorded, _CheckingEagerTrace):
    pass


def _install_root_trace(nans: bool, infs: bool, recording: bool) -> None:
    """The plain eager trace, or the checking one while jax_debug_nans or jax_debug_infs is on, either recording
    while a profiler trace is (off again: no cost)."""
    if nans or infs:
        set_eager_trace(_RecordedCheckingEagerTrace(nans, infs) if recording else _CheckingEagerTrace(nans, infs))
    else:
        set_eager_trace(_RecordedEagerTrace() if recording else _PLAIN)


def _reinstall(nans: bool | None = None, infs: bool | None = None, recording: bool | None = None) -> None:
    """`_install_root_trace` with the settings not given as they are now."""
    _install_root_trace(bool(config.read("jax_debug_nans")) if nans is None else bool(nans),
                        bool(config.read("jax_debug_infs")) if infs is None else bool(infs),
                        recorder.on if recording is None else recording)


_PLAIN = EagerTrace()
_reinstall()
config.watch("jax_debug_nans", lambda on: _reinstall(nans=on))
config.watch("jax_debug_infs", lambda on: _reinstall(infs=on))
recorder.watch(lambda on: _reinstall(recording=on))
