"""meshax: multi-controller SPMD arrays on CPUs, with JAX's API, NumPy compute and MPI communication.

Names are loaded on first use, so ``import meshax`` (and the ``meshax launch`` command,
which lives in this package) starts without importing NumPy or the array machinery.
"""
from __future__ import annotations

import importlib
import os
from typing import Any

__version__ = "0.1.0"

# OpenBLAS's threads spin for about 0.1 s after each call (and after NumPy's import) before they
# sleep; several controllers sharing a machine's cores lose that time to each other. Unless the user
# chose otherwise, they sleep at once; a large matmul loses nothing measurable. This only takes
# effect when meshax is imported before NumPy (the launcher passes it to its children).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

_SUBMODULES = ("checkpoint", "debug", "distributed", "dtypes", "errors", "experimental", "lax", "nn", "numpy", "random",
               "sharding", "tree", "tree_util")
_SUBMODULES += ("ad_checkpoint", "stages")  # JAX documentation's modules (issue 25)

# Public name -> module that defines it.
_NAMES = {
    "block_until_ready": "meshax._src.api",
    "device_get": "meshax._src.api",
    "device_put": "meshax._src.api",
    "make_array_from_callback": "meshax._src.api",
    "make_array_from_process_local_data": "meshax._src.api",
    "make_array_from_single_device_arrays": "meshax._src.api",
    "Array": "meshax._src.basearray",
    "Shard": "meshax._src.array",
    "config": "meshax._src.config",
    "Device": "meshax._src.devices",
    "device_count": "meshax._src.devices",
    "devices": "meshax._src.devices",
    "local_device_count": "meshax._src.devices",
    "local_devices": "meshax._src.devices",
    "process_count": "meshax._src.devices",
    "process_index": "meshax._src.devices",
    "make_mesh": "meshax._src.mesh",
    "jit": "meshax._src.jit",
    "shard_map": "meshax._src.shard_map",
    "grad": "meshax._src.ad_api",
    "value_and_grad": "meshax._src.ad_api",
    "vjp": "meshax._src.ad_api",
    "jvp": "meshax._src.ad_api",
    "linearize": "meshax._src.ad_api",
    "make_jaxpr": "meshax._src.interpreters.staging",
    "jacfwd": "meshax._src.jacobians",
    "jacrev": "meshax._src.jacobians",
    "hessian": "meshax._src.jacobians",
    "custom_jvp": "meshax._src.custom_derivatives",
    "custom_vjp": "meshax._src.custom_derivatives",
    "remat": "meshax._src.remat",
    "checkpoint_policies": "meshax._src.remat",
    "vmap": "meshax._src.vmap_api",
    "typeof": "meshax._src.sharding_api",
    "reshard": "meshax._src.sharding_api",
    "set_mesh": "meshax._src.mesh",
    "NamedSharding": "meshax._src.sharding",
    "P": "meshax._src.sharding",
    "default_backend": "meshax._src.api_misc",
    "jacobian": "meshax._src.api_misc",
    "named_call": "meshax._src.api_misc",
    "named_scope": "meshax._src.api_misc",
    "disable_jit": "meshax._src.api_misc",
    "clear_caches": "meshax._src.api_misc",
    "effects_barrier": "meshax._src.api_misc",
    "float0": "meshax._src.dtypes",
    "eval_shape": "meshax._src.shape_eval",
    "ShapeDtypeStruct": "meshax._src.shape_eval",
    "pure_callback": "meshax._src.api_extra",
    "ensure_compile_time_eval": "meshax._src.api_extra",
    "live_arrays": "meshax._src.api_extra",
    "linear_transpose": "meshax._src.api_extra",
    "closure_convert": "meshax._src.api_extra",
    "print_environment_info": "meshax._src.api_extra",
    "host_count": "meshax._src.api_extra",
    "host_id": "meshax._src.api_extra",
    "host_ids": "meshax._src.api_extra",
    "process_indices": "meshax._src.api_extra",
    "enable_x64": "meshax._src.api_extra",
    "default_matmul_precision": "meshax._src.api_extra",
    "numpy_rank_promotion": "meshax._src.api_extra",
    "numpy_dtype_promotion": "meshax._src.api_extra",
    "transfer_guard": "meshax._src.api_extra",
    "transfer_guard_host_to_device": "meshax._src.api_extra",
    "transfer_guard_device_to_host": "meshax._src.api_extra",
    "transfer_guard_device_to_device": "meshax._src.api_extra",
    "log_compiles": "meshax._src.api_extra",
    "explain_cache_misses": "meshax._src.api_extra",
    "check_tracer_leaks": "meshax._src.api_extra",
    "checking_leaks": "meshax._src.api_extra",
    "custom_gradient": "meshax._src.api_extra",
}
_NAMES.update({  # JAX documentation's names (issue 25)
    "debug_nans": "meshax._src.debug_nans",
    "debug_infs": "meshax._src.debug_nans",
    "new_ref": "meshax._src.refs",
    "freeze": "meshax._src.refs",
    "Ref": "meshax._src.refs",
})

__all__ = sorted((*_SUBMODULES, *_NAMES))

# Names that never make Arrays: using them does not load the array machinery (nor NumPy).
_WITHOUT_ARRAYS = {"distributed", "config", "Device", "device_count", "devices", "local_device_count",
                   "local_devices", "process_count", "process_index", "tree", "tree_util"}

# The JAX modules and names libraries build on (optax, flax, equinox, chex); see meshax.as_jax.
_SUBMODULES += ("api_util", "core", "custom_derivatives", "extend", "flatten_util", "interpreters", "scipy",
                "test_util", "typing")
_NAMES["pmap"] = "meshax._src.pmap"
__all__ = sorted((*_SUBMODULES, *_NAMES))


def __getattr__(name: str) -> Any:
    """Import a public submodule or name the first time it is used."""
    if (name in _SUBMODULES or name in _NAMES) and name not in _WITHOUT_ARRAYS:
        importlib.import_module("meshax._src.methods")  # Array operators and methods, before any Array exists
    if name in _SUBMODULES:
        value = importlib.import_module(f"meshax.{name}")
    elif name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    else:
        from meshax._src.missing import missing_attribute

        missing_attribute("jax", name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
