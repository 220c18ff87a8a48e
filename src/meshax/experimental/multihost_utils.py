"""Utilities for programs running on many processes (as jax.experimental.multihost_utils)."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.arrays.multihost_utils import (
    assert_equal,
    broadcast_one_to_all,
    global_array_to_host_local_array,
    host_local_array_to_global_array,
    process_allgather,
    sync_global_devices,
)

__all__ = [
    "assert_equal",
    "broadcast_one_to_all",
    "global_array_to_host_local_array",
    "host_local_array_to_global_array",
    "process_allgather",
    "sync_global_devices",
]
