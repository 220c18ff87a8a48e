"""meshax: multi-controller SPMD arrays on CPUs, with JAX's API, NumPy compute and MPI communication."""
from meshax import distributed
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

__version__ = "0.1.0"

__all__ = [
    "Device",
    "config",
    "device_count",
    "devices",
    "distributed",
    "local_device_count",
    "local_devices",
    "process_count",
    "process_index",
]
