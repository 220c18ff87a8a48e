"""pmap, on top of shard_map (as JAX's own pmap now is): the mapped axis is split over a one-axis mesh of as
many devices as its size, each device runs the function on its slice, and collectives over `axis_name` combine
devices."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import aval_of
from ..tree.tree_util import tree_flatten, tree_unflatten
from .vmap import _broadcast_prefix, mapped_axes

_DEFAULT_AXIS = "_pmap_axis"  # the mesh axis of a pmap without axis_name (no collective can name it)


def pmap(fun: Callable[..., Any], axis_name: Any = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Sequence[Any] | None = None,
         backend: str | None = None, axis_size: int | None = None, donate_argnums: Any = (),
         global_arg_shapes: Any = None) -> Callable[..., Any]:
    """`fun` run in parallel on one device per index of the mapped axis `in_axes` of its arguments (this
    process's devices unless `devices` is given), results stacked along `out_axes`."""
    if not callable(fun):
        raise TypeError(f"pmap requires a callable, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    static = {static_broadcasted_argnums} if isinstance(static_broadcasted_argnums, int) else \
        set(static_broadcasted_argnums)
    name = _DEFAULT_AXIS if axis_name is None else axis_name

    @functools.wraps(fun, updated=())
    def mapped(*args: Any, **kwargs: Any) -> Any:
        from .. import numpy as jnp
        from .jit import jit
        from ..arrays.placement import make_array_from_process_local_data
        from ..sharding.mesh import Mesh
        from ..sharding.shardings import NamedSharding, PartitionSpec
        from .shard_map import shard_map

        static = {i % len(args) for i in static_argnums} if args else set()
        dynamic = [a for i, a in enumerate(args) if i not in static]
        axes_in = in_axes
        if isinstance(in_axes, tuple):
            if len(in_axes) != len(args):
                raise ValueError(f"pmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                                 f"positional arguments passed to the function, but got len(in_axes)={len(in_axes)}, "
                                 f"len(args)={len(args)}")
            axes_in = tuple(a for i, a in enumerate(in_axes) if i not in static)
        leaves, tree = tree_flatten((tuple(dynamic), kwargs))
        axes, size = mapped_axes(leaves, _broadcast_prefix((axes_in, 0), tree, "in_axes"), axis_size,
                                 "pmap got inconsistent sizes for array axes to be mapped",
                                 "pmap requires at least one argument with a mapped axis (in_axes not None)")
        specs = tuple(PartitionSpec() if a is None else PartitionSpec(name) for a in axes)
        moved = [x if a is None else jnp.moveaxis(x, a, 0) for x, a in zip(leaves, axes)]
        if devices is None and _spans_processes(moved):
            # as JAX's multi-process pmap: each process passes one slice per local device; the map spans them all
            mesh = Mesh(np.array(_global_devices(size), dtype=object), (name,))
            moved = [x if a is None else make_array_from_process_local_data(NamedSharding(mesh, spec), np.asarray(x))
                     for x, a, spec in zip(moved, axes, specs)]
        else:
            mesh = Mesh(np.array(_devices_for(size, devices), dtype=object), (name,))
        out_info: list[Any] = []

        def per_device(*blocks: Any) -> list[Any]:
            values = [b if a is None else jnp.squeeze(b, 0) for b, a in zip(blocks, axes)]
            dyn, kw = tree_unflatten(tree, values)
            it = iter(dyn)
            full = [args[i] if i in static else next(it) for i in range(len(args))]
            out_leaves, out_tree = tree_flatten(fun(*full, **kw))
            out_info[:] = [out_tree, _broadcast_prefix(out_axes, out_tree, "out_axes")]
            return [jnp.expand_dims(v, 0) for v in out_leaves]

        # every output is stacked over the devices; an out_axes=None output (the same on every device, as JAX
        # requires) is then the first device's
        outs = jit(shard_map(per_device, mesh=mesh, in_specs=specs, out_specs=PartitionSpec(name),
                             check_vma=False))(*moved)
        out_tree, targets = out_info
        results = [v[0] if t is None else v if t % aval_of(v).ndim == 0 else jnp.moveaxis(v, 0, t)
                   for v, t in zip(outs, targets)]
        return tree_unflatten(out_tree, results)

    static_argnums = static
    return mapped


def _spans_processes(values: Sequence[Any]) -> bool:
    """Whether this is a multi-process job and the mapped values are concrete (not traced)."""
    from ..core.core import Tracer
    from ..runtime.devices import process_count

    return process_count() > 1 and not any(isinstance(v, Tracer) for v in values)


def _global_devices(local_size: int) -> list[Any]:
    """Every process's devices, process by process, for a multi-process pmap of `local_size` per process."""
    from ..runtime.devices import devices, local_device_count

    if local_size != local_device_count():
        raise ValueError(f"a multi-process pmap maps one slice per local device: this process has "
                         f"{local_device_count()} devices, but the mapped axis has size {local_size}.")
    return sorted(devices(), key=lambda d: (d.process_index, d.id))


def _devices_for(size: int, devices: Sequence[Any] | None) -> list[Any]:
    """The devices a pmap of `size` runs on."""
    from ..runtime.devices import local_devices, more_devices_hint

    available = list(devices) if devices is not None else local_devices()
    if size > len(available):
        raise ValueError(f"compiling computation that requires {size} logical devices, but only {len(available)} "
                         f"devices are available (num_replicas={size}); {more_devices_hint(size)}")
    return available[:size]
