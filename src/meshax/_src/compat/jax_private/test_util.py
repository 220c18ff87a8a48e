"""jax._src.test_util for the alias: the derivative checks of jax.test_util and `create_mesh`, which JAX's pages
and tests use to build a mesh of the first devices."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from meshax._src.runtime import devices as device_table
from meshax._src.sharding.mesh import Mesh, make_mesh
from meshax.test_util import check_grads, check_jvp, check_vjp  # noqa: F401


def create_mesh(mesh_shape: Sequence[int], axis_names: Any, iota_order: bool = False, axis_types: Any = None) -> Mesh:
    """A mesh of the first prod(mesh_shape) devices; with `iota_order`, in device id order."""
    if not iota_order:
        return make_mesh(mesh_shape, axis_names, axis_types)
    size = math.prod(mesh_shape)
    devices = sorted(device_table.devices(), key=lambda d: d.id)
    if len(devices) < size:
        raise ValueError(f"create_mesh{tuple(mesh_shape)} needs {size} devices; there are {len(devices)}.")
    grid = np.empty(size, dtype=object)
    grid[:] = devices[:size]
    return Mesh(grid.reshape(tuple(mesh_shape)), axis_names, axis_types)
