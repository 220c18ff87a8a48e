"""meshax: multi-controller SPMD arrays on CPUs, with JAX's API, NumPy compute and MPI communication."""
from meshax import distributed, sharding, tree_util
from meshax._src.api import (
    block_until_ready,
    device_get,
    device_put,
    make_array_from_callback,
    make_array_from_process_local_data,
    make_array_from_single_device_arrays,
)
from meshax._src.array import Array, Shard
from meshax._src.config import config
from meshax._src.devices import (
    Device,
    device_count,
    devices,
    local_device_count,
    local_devices,
    process_count,
    process_index,
)
from meshax._src.mesh import make_mesh
from meshax._src.jit import jit
from meshax._src.shard_map import shard_map
from meshax import numpy, nn, lax, random  # noqa: E402
from meshax import debug, experimental  # noqa: E402  (after the names they use)

__version__ = "0.1.0"

__all__ = [
    "Array",
    "Device",
    "Shard",
    "block_until_ready",
    "config",
    "debug",
    "device_count",
    "device_get",
    "device_put",
    "devices",
    "distributed",
    "experimental",
    "local_device_count",
    "local_devices",
    "make_array_from_callback",
    "make_array_from_process_local_data",
    "make_array_from_single_device_arrays",
    "jit",
    "lax",
    "make_mesh",
    "nn",
    "numpy",
    "process_count",
    "process_index",
    "shard_map",
    "random",
    "sharding",
    "tree_util",
]
