"""Device meshes (as jax.experimental.mesh_utils): arrays of devices in a good order for a mesh shape."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["create_device_mesh", "create_hybrid_device_mesh"]


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence[Any] | None = None, *,
                       contiguous_submeshes: bool = False, allow_split_physical_axes: bool = False) -> np.ndarray:
    """An array of shape `mesh_shape` holding `devices` (all devices by default), ordered by process then id so
    each process's devices are contiguous (CPU devices have no physical topology to follow)."""
    from meshax._src.runtime.devices import devices as all_devices, more_devices_hint

    chosen = list(all_devices() if devices is None else devices)
    shape = tuple(int(n) for n in mesh_shape)
    if math.prod(shape) != len(chosen):
        fix = f"; {more_devices_hint(math.prod(shape))}" if devices is None and math.prod(shape) > len(chosen) else ""
        raise ValueError(f"Number of devices {len(chosen)} must equal the product of mesh_shape {shape}{fix}")
    chosen.sort(key=lambda d: (getattr(d, "process_index", 0), d.id))
    flat = np.empty(len(chosen), dtype=object)
    flat[:] = chosen
    return flat.reshape(shape)


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence[Any] | None = None, *, process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A mesh of shape mesh_shape * dcn_mesh_shape (elementwise) whose `dcn_mesh_shape` part spans processes:
    each process's devices form one `mesh_shape` block."""
    from meshax._src.runtime.devices import devices as all_devices

    chosen = list(all_devices() if devices is None else devices)
    by_process: dict[int, list[Any]] = {}
    for d in sorted(chosen, key=lambda d: (d.process_index, d.id)):
        by_process.setdefault(d.process_index, []).append(d)
    blocks = [create_device_mesh(mesh_shape, group) for _, group in sorted(by_process.items())]
    if len(blocks) != math.prod(dcn_mesh_shape):
        raise ValueError(f"{len(blocks)} processes do not fill dcn_mesh_shape {tuple(dcn_mesh_shape)}")
    inner = tuple(int(n) for n in mesh_shape)
    outer = tuple(int(n) for n in dcn_mesh_shape)
    result = np.empty(tuple(a * b for a, b in zip(inner, outer)), dtype=object)
    for block, position in zip(blocks, np.ndindex(*outer)):
        result[tuple(slice(p * n, (p + 1) * n) for p, n in zip(position, inner))] = block
    return result
