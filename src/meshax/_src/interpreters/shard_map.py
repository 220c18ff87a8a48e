"""Per-device evaluation inside shard_map: every value is one NumPy array per local device.

Ordinary primitives run their implementation device by device (heavy kernels side by side, within the
controller's CPU budget: device_pool.py); primitives with a rule
in `device_rules` (collectives, nested shard_maps) combine devices themselves, through
memory within a process and MPI across processes (collectives.py).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ..profiler import recorder
from ..runtime import compute_pool as device_pool
from ..arrays.array import Array
from ..core.jaxpr import Jaxpr, eval_jaxpr
from ..core.core import (Primitive, ShapedArray, Trace, Tracer, abstract_eval, aval_of, impl_rules, pvary_p,
                         reduced_vary_cast_p, sharding_rules)
from ..sharding.placement_rules import elementwise
from .fusion import fused_p
from .process_blocks import one_buffer, run_joined_on_devices, run_summed_product, summed_products
from .staging import inline_rules

device_rules: dict[Primitive, Callable[..., Any]] = {}  # rule(device_trace, *args, **params)


SIDE_BY_SIDE_ELEMENTS = 1 << 16  # a device's elementwise result from this size up runs beside the other devices'


def run_device_calls(primitive: Primitive, calls: Sequence[Callable[[], Any]], elements: int) -> list[Any]:
    """The results of one primitive's calls, one per device (or distinct set of buffers): heavy kernels, fused
    clusters whose results together reach `SIDE_BY_SIDE_ELEMENTS`, and other elementwise ones of `elements` or more
    per device, side by side within the controller's share of the cores (a pool's hand-over costs more than a
    small call)."""
    if primitive is fused_p:  # elementwise work, no BLAS: side by side once all the devices' results are large
        if len(calls) * elements < SIDE_BY_SIDE_ELEMENTS:
            return [call() for call in calls]
        return device_pool.run_each(calls, blas=False)
    if primitive.parallel_devices:
        return device_pool.run_each(calls)
    if len(calls) > 1 and elements >= SIDE_BY_SIDE_ELEMENTS and sharding_rules.get(primitive) is elementwise:
        return device_pool.run_each(calls, blas=False)
    return [call() for call in calls]


class DeviceTrace(Trace):
    """Evaluates primitives device by device on this process's devices of `mesh`."""

    def __init__(self, parent: Trace | None, mesh: Any, devices: Sequence[Any]) -> None:
        super().__init__(parent)
        self.mesh = mesh
        self.devices = tuple(devices)

    def process(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
        rule = device_rules.get(primitive)
        if rule is not None:
            abstract_eval(primitive, [aval_of(a) for a in args], params)  # its checks, before any data moves
            return rule(self, *args, **params)
        if primitive in inline_rules:
            return inline_rules[primitive](*args, **params)
        own = [self.is_own(a) for a in args]
        constants = [None if mine else np.asarray(a) if isinstance(a, Array) else
                     np.asarray(a, aval_of(a).dtype) if isinstance(a, (bool, int, float, complex)) else a
                     for a, mine in zip(args, own)]  # Python scalars (a jaxpr's literals) as NumPy values
        out_avals = _out_avals(primitive, [aval_of(a) for a in args], params)
        if len(out_avals) == 1 and len(self.devices) > 1:
            operands = [a.payload if mine else c for a, mine, c in zip(args, own, constants)]
            begin = recorder.now() if recorder.on else 0
            joined = run_joined_on_devices(primitive, operands, own, params, out_avals[0], self.devices)
            if joined is not None:
                if begin:  # one call over every device's blocks: an event of the process
                    recorder.add(primitive.name, "joined", (recorder.HOST,), begin, recorder.now(),
                                 {"devices": [d.id for d in self.devices]})
                return self.new(out_avals[0], joined)
        extra = {"local_shapes": [a.shape for a in out_avals]} if primitive.needs_local_shape else {}
        impl = impl_rules[primitive]
        results: list[dict] = [dict() for _ in out_avals]
        if all(one_buffer([a.payload[d] for d in self.devices]) for a, mine in zip(args, own) if mine):
            # every device holds the same buffers (a replicated value's update): computed once, shared as replicas are
            first = self.devices[0]
            begin = recorder.now() if recorder.on else 0
            value = impl(*[a.payload[first] if mine else c for a, mine, c in zip(args, own, constants)],
                         **params, **extra)
            if begin:  # one call for every device
                recorder.add(primitive.name, "device", [d.id for d in self.devices], begin, recorder.now())
            values = [value] * len(self.devices)
        else:
            calls = [functools.partial(impl, *[a.payload[d] if mine else c for a, mine, c in
                                               zip(args, own, constants)], **params, **extra) for d in self.devices]
            if recorder.on:
                calls = [recorder.timed(call, primitive.name, "device", (d.id,)) for call, d in zip(calls, self.devices)]
            values = run_device_calls(primitive, calls, sum(a.size for a in out_avals))
        for device, value in zip(self.devices, values):
            for slot, v in zip(results, value if primitive.multiple_results else [value]):
                slot[device] = np.asarray(v)
        outputs = [self.new(aval, r) for aval, r in zip(out_avals, results)]
        return outputs if primitive.multiple_results else outputs[0]

    def summed_product(self, primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Tracer | None:
        """A matrix product summed next over all of this process's devices, as one product over their joined values
        (process_blocks.run_summed_product); None where it does not apply."""
        if not all(self.is_own(a) for a in args) or len({a.aval.vma for a in args}) != 1:
            return None
        combined = run_summed_product(primitive, [a.payload for a in args], params, self.devices)
        if combined is None:
            return None
        out_aval = abstract_eval(primitive, [a.aval for a in args], params)[0]
        return self.new(out_aval, {d: combined for d in self.devices})

    def describe(self, tracer: Tracer) -> str:
        """Each local device's value, as JAX prints a value inside an eager shard_map."""
        names = ", ".join(self.mesh.axis_names) + ","
        return "\n".join(f"On cpu:{device.id} at mesh coordinates ({names}) = {self.mesh.coordinates(device)!r}:\n"
                         f"{np.asarray(tracer.payload[device])}\n" for device in self.devices)

    def new(self, aval: ShapedArray, values: dict) -> Tracer:
        return Tracer(self, aval, values)

    def lift(self, x: Any) -> Tracer:
        """Our tracer for `x`: constants (host values, Arrays) are the same on every device."""
        if self.is_own(x):
            return x
        aval = aval_of(x)
        value = np.asarray(x, dtype=aval.dtype)
        return Tracer(self, aval.update(vma=frozenset()), {d: value for d in self.devices})


def _out_avals(primitive: Primitive, avals: list[ShapedArray], params: dict[str, Any]) -> list[ShapedArray]:
    """abstract_eval of an ordinary primitive, remembered per primitive, parameters and input avals (a body's
    operations repeat every call); avals on a mesh with Explicit axes, typed in context (and whose mesh their
    equality ignores), are not remembered."""
    if any(a.mesh is not None for a in avals):
        return abstract_eval(primitive, avals, params)
    try:
        key = (primitive, tuple(avals), tuple(params.items()))
        out = _typed.get(key)
    except TypeError:  # a parameter that cannot be a key
        return abstract_eval(primitive, avals, params)
    if out is None:
        out = abstract_eval(primitive, avals, params)
        if all(a.mesh is None for a in out):
            if len(_typed) >= 4096:
                _typed.clear()
            _typed[key] = out
    return list(out)


_typed: dict[tuple, list[ShapedArray]] = {}


def evaluate_body(trace: DeviceTrace, program: Jaxpr, inputs: Sequence[Any]) -> list[Any]:
    """`program` (a shard_map's executable body) evaluated in `trace`, a product whose result is only summed next over
    all of this process's devices running as one product over their joined values (process_blocks.py)."""
    summed = summed_products(program, trace.mesh, trace.devices) if len(trace.devices) > 1 else frozenset()
    if not summed:
        return eval_jaxpr(program, (), inputs)

    def bind(eq: Any, args: list[Any]) -> Any:
        out = trace.summed_product(eq.primitive, args, eq.params) if id(eq) in summed else None
        return eq.primitive.bind(*args, **eq.params) if out is None else out

    return eval_jaxpr(program, (), inputs, bind)


def same_values(primitive: Primitive) -> Callable[..., Tracer]:
    """The device rule of a cast that changes only a value's type (pvary and its unreduced/reduced relatives)."""

    def rule(trace: DeviceTrace, x: Any, *, axes: tuple[str, ...]) -> Tracer:
        x = trace.lift(x)
        return trace.new(abstract_eval(primitive, [x.aval], {"axes": axes})[0], x.payload)

    return rule


device_rules[pvary_p] = same_values(pvary_p)
device_rules[reduced_vary_cast_p] = same_values(reduced_vary_cast_p)
