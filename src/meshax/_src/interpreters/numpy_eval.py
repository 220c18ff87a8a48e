"""A fast path for eager evaluation on one device: a jaxpr run as plain NumPy calls.

When every input of a jitted program (or of a loop) lives on the same single device, the
eager interpreter's work per operation (choosing a mesh, the sharding rule, placing inputs,
wrapping outputs) buys nothing: the program is evaluated by calling each primitive's NumPy
implementation directly, and only the final results become Arrays. The values are the same
as the eager path's (the same implementations, the same dtype of every intermediate).
Programs with primitives this cannot run (collectives, shard_map, resharding) take the
ordinary path.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..arrays.array import Array, read_only
from ..runtime import devices as device_table
from ..core.core import Primitive, abstract_eval, aval_of, impl_rules
from ..core.jaxpr import Jaxpr, Literal
from ..sharding.shardings import SingleDeviceSharding
from .fusion import executable

# primitives with a jaxpr parameter: how to run them here (evaluator, *args, **params) -> outputs
structured_rules: dict[Primitive, Callable[..., list[Any]]] = {}


def one_device(args: Sequence[Any]) -> Any:
    """The device of this process that every Array among `args` is on, if there is one (else None)."""
    device = None
    for arg in args:
        if isinstance(arg, Array):
            sharding = arg.sharding
            if not isinstance(sharding, SingleDeviceSharding) or (device is not None and sharding.device != device):
                return None
            device = sharding.device
    if device is None or device.process_index != device_table.process_index():
        return None
    return device


def _jaxprs(params: dict[str, Any]) -> list[Jaxpr]:
    found = [v for v in params.values() if isinstance(v, Jaxpr)]
    return found + [j for v in params.values() if isinstance(v, tuple) for j in v if isinstance(j, Jaxpr)]


def supported(jaxpr: Jaxpr) -> bool:
    """Whether every equation (recursively) has a NumPy implementation or a structured rule here (remembered on
    the jaxpr)."""
    known = getattr(jaxpr, "_numpy_supported", None)
    if known is None:
        known = all(all(supported(j) for j in _jaxprs(eq.params)) if eq.primitive in structured_rules else
                    eq.primitive in impl_rules and eq.primitive.name != "sharding_constraint"
                    for eq in jaxpr.equations)
        jaxpr._numpy_supported = known
    return known


def host(value: Any) -> np.ndarray:
    """An input as the NumPy value an implementation receives (a host scalar in its JAX dtype)."""
    if isinstance(value, Array):
        return value.local_buffers()[value.sharding.device]
    return np.asarray(value, dtype=aval_of(value).dtype)


def run(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list[np.ndarray]:
    """Evaluate `jaxpr` on NumPy values (its executable program: simplified, elementwise chains fused)."""
    env: dict[int, Any] = {}

    def read(x: Any) -> Any:
        return np.asarray(x.value, dtype=x.aval.dtype) if isinstance(x, Literal) else env[x.id]

    jaxpr = executable(jaxpr)
    for var, value in zip(jaxpr.constvars, consts):
        env[var.id] = value
    for var, value in zip(jaxpr.invars, args):
        env[var.id] = value
    for eq in jaxpr.equations:
        inputs = [read(x) for x in eq.inputs]
        rule = structured_rules.get(eq.primitive)
        if rule is not None:
            outs = rule(run, *inputs, **eq.params)
        else:
            extra = {"local_shapes": [v.aval.shape for v in eq.outputs]} if eq.primitive.needs_local_shape else {}
            value = impl_rules[eq.primitive](*inputs, **eq.params, **extra)
            outs = value if eq.primitive.multiple_results else [value]
        for var, value in zip(eq.outputs, outs):
            value = np.asarray(value)
            env[var.id] = value if value.dtype == var.aval.dtype else value.astype(var.aval.dtype)
    return [read(v) for v in jaxpr.outvars]


def as_arrays(values: Sequence[np.ndarray], avals: Sequence[Any], device: Any, committed: bool) -> list[Array]:
    sharding = SingleDeviceSharding(device)
    return [Array(a.shape, a.dtype, sharding, {device: read_only(np.asarray(v, a.dtype))}, a.weak_type, committed)
            for v, a in zip(values, avals)]


def try_primitive(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
    """A call-like primitive (jit, a loop...) run through NumPy when its inputs share one device; else None."""
    device = one_device(args)
    if device is None or not all(supported(j) for j in _jaxprs(params)):
        return None
    values = structured_rules[primitive](run, *[host(a) for a in args], **params)
    avals = abstract_eval(primitive, [aval_of(a) for a in args], params)
    committed = any(isinstance(a, Array) and a.committed for a in args)
    outs = as_arrays(values, avals, device, committed)
    return outs if primitive.multiple_results else outs[0]
