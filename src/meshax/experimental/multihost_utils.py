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
from meshax._src.compat.small_modules import reached_preemption_sync_point
from meshax._src.runtime.live import ProcessFailureError, live_devices
from meshax._src.sharding.shardings import PartitionSpec as P  # noqa: F401  (as JAX's module has them)
from meshax.tree_util import tree_flatten, tree_unflatten  # noqa: F401

__all__ = [
    "ProcessFailureError",
    "assert_equal",
    "broadcast_one_to_all",
    "global_array_to_host_local_array",
    "host_local_array_to_global_array",
    "live_devices",
    "process_allgather",
    "reached_preemption_sync_point",
    "sync_global_devices",
]
