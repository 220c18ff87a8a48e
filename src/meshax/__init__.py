"""meshax: multi-controller SPMD arrays on CPUs, with JAX's API, NumPy compute and MPI communication.

Names are loaded on first use, so ``import meshax`` (and the ``meshax launch`` command,
which lives in this package) starts without importing NumPy or the array machinery.
"""
from __future__ import annotations

import importlib
import os as _os
from typing import Any

__version__ = "0.1.0"

from ._src.runtime import blas_threads as _blas_threads

# OpenBLAS's threads spin for about 0.1 s after each call before they sleep: unless the user chose
# otherwise, they sleep at once (runtime/blas_threads.py).
_blas_threads.choose_at_import()

if _os.environ.get("MESHAX_PROFILE_DIR"):  # a process of `meshax launch --profile DIR`: traced from start to exit
    from . import profiler as _profiler

    _profiler.trace_whole_process(_os.environ["MESHAX_PROFILE_DIR"])

_SUBMODULES = ("checkpoint", "debug", "distributed", "dtypes", "errors", "experimental", "lax", "nn", "numpy", "random",
               "sharding", "tree", "tree_util")
_SUBMODULES += ("ad_checkpoint", "stages")  # JAX documentation's modules (issue 25)
_SUBMODULES += ("profiler", "ops", "image")

# Public name -> module that defines it.
_NAMES = {
    "block_until_ready": "meshax._src.arrays.placement",
    "device_get": "meshax._src.arrays.placement",
    "device_put": "meshax._src.arrays.placement",
    "make_array_from_callback": "meshax._src.arrays.placement",
    "make_array_from_process_local_data": "meshax._src.arrays.placement",
    "make_array_from_single_device_arrays": "meshax._src.arrays.placement",
    "Array": "meshax._src.arrays.basearray",
    "Shard": "meshax._src.arrays.array",
    "config": "meshax._src.config",
    "Device": "meshax._src.runtime.devices",
    "device_count": "meshax._src.runtime.devices",
    "devices": "meshax._src.runtime.devices",
    "local_device_count": "meshax._src.runtime.devices",
    "local_devices": "meshax._src.runtime.devices",
    "process_count": "meshax._src.runtime.devices",
    "process_index": "meshax._src.runtime.devices",
    "make_mesh": "meshax._src.sharding.mesh",
    "jit": "meshax._src.transforms.jit",
    "shard_map": "meshax._src.transforms.shard_map",
    "grad": "meshax._src.transforms.autodiff",
    "value_and_grad": "meshax._src.transforms.autodiff",
    "vjp": "meshax._src.transforms.autodiff",
    "jvp": "meshax._src.transforms.autodiff",
    "linearize": "meshax._src.transforms.autodiff",
    "make_jaxpr": "meshax._src.interpreters.staging",
    "jacfwd": "meshax._src.transforms.jacobians",
    "jacrev": "meshax._src.transforms.jacobians",
    "hessian": "meshax._src.transforms.jacobians",
    "custom_jvp": "meshax._src.transforms.custom_derivatives",
    "custom_vjp": "meshax._src.transforms.custom_derivatives",
    "remat": "meshax._src.transforms.remat",
    "checkpoint_policies": "meshax._src.transforms.remat",
    "vmap": "meshax._src.transforms.vmap",
    "typeof": "meshax._src.transforms.sharding_in_types",
    "reshard": "meshax._src.transforms.sharding_in_types",
    "set_mesh": "meshax._src.sharding.mesh",
    "NamedSharding": "meshax._src.sharding.shardings",
    "P": "meshax._src.sharding.shardings",
    "default_backend": "meshax._src.compat.top_level",
    "default_device": "meshax._src.compat.top_level",
    "jacobian": "meshax._src.compat.top_level",
    "named_call": "meshax._src.compat.top_level",
    "named_scope": "meshax._src.compat.top_level",
    "disable_jit": "meshax._src.transforms.jit",
    "clear_caches": "meshax._src.transforms.jit",
    "effects_barrier": "meshax._src.compat.top_level",
    "float0": "meshax._src.core.dtypes",
    "eval_shape": "meshax._src.transforms.shape_eval",
    "ShapeDtypeStruct": "meshax._src.transforms.shape_eval",
    "pure_callback": "meshax._src.transforms.callbacks",
    "ensure_compile_time_eval": "meshax._src.compat.top_level",
    "live_arrays": "meshax._src.compat.top_level",
    "linear_transpose": "meshax._src.compat.top_level",
    "closure_convert": "meshax._src.compat.top_level",
    "print_environment_info": "meshax._src.compat.top_level",
    "host_count": "meshax._src.compat.top_level",
    "host_id": "meshax._src.compat.top_level",
    "host_ids": "meshax._src.compat.top_level",
    "process_indices": "meshax._src.compat.top_level",
    "enable_x64": "meshax._src.compat.top_level",
    "default_matmul_precision": "meshax._src.compat.top_level",
    "numpy_rank_promotion": "meshax._src.compat.top_level",
    "numpy_dtype_promotion": "meshax._src.compat.top_level",
    "transfer_guard": "meshax._src.compat.top_level",
    "transfer_guard_host_to_device": "meshax._src.compat.top_level",
    "transfer_guard_device_to_host": "meshax._src.compat.top_level",
    "transfer_guard_device_to_device": "meshax._src.compat.top_level",
    "log_compiles": "meshax._src.compat.top_level",
    "explain_cache_misses": "meshax._src.compat.top_level",
    "check_tracer_leaks": "meshax._src.compat.top_level",
    "checking_leaks": "meshax._src.compat.top_level",
    "custom_gradient": "meshax._src.compat.top_level",
}
_NAMES.update({  # JAX documentation's names (issue 25)
    "debug_nans": "meshax._src.compat.top_level",
    "debug_infs": "meshax._src.compat.top_level",
    "new_ref": "meshax._src.transforms.refs",
    "freeze": "meshax._src.transforms.refs",
    "Ref": "meshax._src.transforms.refs",
})

__all__ = sorted((*_SUBMODULES, *_NAMES))

# Names that never make Arrays: using them does not load the array machinery (nor NumPy).
_WITHOUT_ARRAYS = {"distributed", "config", "Device", "device_count", "devices", "local_device_count",
                   "local_devices", "process_count", "process_index", "tree", "tree_util", "profiler"}

# The JAX modules and names libraries build on (optax, flax, equinox, chex); see meshax.as_jax.
_SUBMODULES += ("api_util", "core", "custom_derivatives", "extend", "flatten_util", "interpreters", "scipy",
                "test_util", "typing")
_NAMES["pmap"] = "meshax._src.transforms.pmap"
_SUBMODULES += ("custom_batching", "dlpack", "monitoring", "ref", "version", "export")  # issue 40
_NAMES.update({n: "meshax._src.compat.top_level" for n in (
    "CompilerEffortLevel", "Inline", "ad", "memory", "copy_to_host_async", "ds", "empty_ref", "free_ref",
    "fwd_and_bwd", "get_mesh", "smap")})
_NAMES.update({n: "meshax._src.compat.config_states" for n in (
    "allow_f16_reductions", "array_garbage_collection_guard", "auto_pcast", "debug_key_reuse", "default_prng_impl",
    "enable_checks", "enable_custom_prng", "jax2tf_associative_scan_reductions", "legacy_prng_key", "no_execution",
    "no_tracing", "remove_size_one_mesh_axis_from_type", "softmax_custom_jvp", "thread_guard",
    "threefry_partitionable", "make_user_context")})
_NAMES.update({"get_abstract_mesh": "meshax._src.sharding.mesh", "use_abstract_mesh": "meshax._src.sharding.mesh"})
_WITHOUT_ARRAYS |= {"monitoring", "version"}
__all__ = sorted((*_SUBMODULES, *_NAMES))


def __getattr__(name: str) -> Any:
    """Import a public submodule or name the first time it is used."""
    if (name in _SUBMODULES or name in _NAMES) and name not in _WITHOUT_ARRAYS:
        importlib.import_module("meshax._src.compat.array_methods")  # Array operators and methods, before any Array exists
    if name in _SUBMODULES:
        value = importlib.import_module(f"meshax.{name}")
    elif name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    else:
        from meshax._src.compat.missing_names import missing_attribute

        missing_attribute("jax", name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
