"""``jax.debug.print`` and ``jax.debug.callback``: a primitive with a side effect and no outputs.

``debug_callback`` carries the user's function (taking the flat array arguments) as a parameter.
Each interpreter calls it at the moment it would compute: eagerly at once with Arrays; under
``jit`` the staging trace records an equation, which runs (and calls back) every time the staged
program is evaluated; inside ``shard_map`` once per device with that device's block (once per
distinct block along the manual axes the operands vary over, when varying axes are checked, so a
replicated value is printed once as JAX does); under ``vmap`` once per batch element; under
differentiation with the primal values only (the call is not part of the linear program).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..primitives import array_primitives as P
from ..arrays.array import Array, single_device_array
from ..core.core import Primitive, Tracer, abstract_eval_rules, keeps_own_vma, vma_checked, vma_rules
from ..interpreters.ad import jvp_rules
from ..interpreters.batching import batching_rules
from ..interpreters.eager import eager_rules
from ..interpreters.shard_map import DeviceTrace, device_rules
from ..tree.tree_util import tree_flatten, tree_unflatten

__all__ = ["callback", "print"]

debug_callback_p = Primitive("debug_callback", multiple_results=True)
abstract_eval_rules[debug_callback_p] = lambda *avals, **params: []
vma_rules[debug_callback_p] = keeps_own_vma  # operands keep their own varying axes (no implicit pvary)


def _as_array(x: Any) -> Any:
    """Arrays pass; host values (literals of a staged program, Python scalars) become Arrays."""
    if isinstance(x, Array):
        return x
    from ..numpy import asarray

    return asarray(x)


def _eager(*args: Any, callback: Callable[..., Any], ordered: bool) -> list[Any]:
    callback(*[_as_array(a) for a in args])
    return []


def _per_device(trace: DeviceTrace, *args: Any, callback: Callable[..., Any], ordered: bool) -> list[Any]:
    """Call back with each device's blocks; under checked varying axes, once per distinct coordinate along
    the axes the operands vary over (the first device of the mesh with that coordinate calls)."""
    values = [trace.lift(a) for a in args]
    mesh = trace.mesh
    if vma_checked():
        varying = sorted(frozenset().union(*(v.aval.vma for v in values)))
        positions = [mesh.axis_names.index(a) for a in varying if a in mesh.axis_names]
        first: dict[tuple, Any] = {}
        for device in mesh.flat_devices:
            coordinate = tuple(mesh.coordinates(device)[p] for p in positions)
            first.setdefault(coordinate, device)
        callers = {d.id for d in first.values()}
        devices = [d for d in trace.devices if d.id in callers]
    else:
        devices = list(trace.devices)
    for device in devices:
        callback(*[single_device_array(np.asarray(v.payload[device]), device, v.aval.weak_type) for v in values])
    return []


def _jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    debug_callback_p.bind(*primals, **params)
    return [], []


def _batched(values: list[Any], dims: list[int | None], **params: Any) -> tuple[list[Any], list[Any]]:
    """One call per element of the batch, with that element's values (as JAX calls back under vmap)."""
    size = next(np.shape(v)[d] if not isinstance(v, Tracer) else v.shape[d]
                for v, d in zip(values, dims) if d is not None)
    for i in range(size):
        element = [v if d is None else P.static_slice.bind(v, index=(slice(None),) * d + (i,))
                   for v, d in zip(values, dims)]
        debug_callback_p.bind(*element, **params)
    return [], []


eager_rules[debug_callback_p] = _eager
device_rules[debug_callback_p] = _per_device
jvp_rules[debug_callback_p] = _jvp
batching_rules[debug_callback_p] = _batched


def _is_dynamic(x: Any) -> bool:
    """Leaves passed through the primitive (array-like); other leaves (strings, objects) stay static."""
    return isinstance(x, (Array, Tracer, np.ndarray, np.generic, bool, int, float, complex))


def callback(callback: Callable[..., Any], *args: Any, ordered: bool = False, partitioned: bool = False,
             **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` with concrete Arrays when the program runs (eagerly: now; under jit:
    each time the compiled function runs; inside shard_map: per device), returning nothing."""
    if not callable(callback):
        raise TypeError(f"jax.debug.callback expects a callable, got {callback!r}")
    leaves, structure = tree_flatten((args, kwargs))
    dynamic = [i for i, leaf in enumerate(leaves) if _is_dynamic(leaf)]

    def flat_callback(*values: Any) -> None:
        filled = list(leaves)
        for i, value in zip(dynamic, values):
            filled[i] = value
        call_args, call_kwargs = tree_unflatten(structure, filled)
        callback(*call_args, **call_kwargs)

    debug_callback_p.bind(*[leaves[i] for i in dynamic], callback=flat_callback, ordered=bool(ordered))


def _formattable(x: Any) -> Any:
    """What a formatted field shows: an array's NumPy value (a 0-d one as a NumPy scalar)."""
    if isinstance(x, Array):
        value = np.asarray(x)
        return value[()] if value.ndim == 0 else value
    return x


def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:  # noqa: A001
    """Print ``fmt.format(*args, **kwargs)`` with the runtime values of traced arrays (as jax.debug.print)."""
    if not isinstance(fmt, str):
        raise TypeError(f"jax.debug.print's first argument must be a format string, got {fmt!r}")

    def show(*values: Any, **named: Any) -> None:
        import builtins

        builtins.print(fmt.format(*[_formattable(v) for v in values],
                                  **{k: _formattable(v) for k, v in named.items()}), flush=True)

    callback(show, *args, ordered=ordered, **kwargs)

