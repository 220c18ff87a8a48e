"""Process-wide settings, read from the environment and changed with `config.update`."""
from __future__ import annotations

import os
from typing import Any, Callable


def _env_flag(*names: str, default: bool = False) -> bool:
    for name in names:
        value = os.environ.get(name)
        if value is not None:
            return value.strip().lower() in ("1", "true", "yes", "on")
    return default


# JAX's options that its documentation sets, with JAX 0.10.2's defaults. `jax_debug_nans`/`jax_debug_infs` check
# every operation's results; the others are accepted and change nothing in meshax (no XLA, no compilation
# cache, one remat implementation, one partitioner, threefry keys that are always partitionable).
JAX_OPTIONS: dict[str, Any] = {
    "jax_debug_nans": False, "jax_debug_infs": False, "jax_remat3": False, "jax_traceback_filtering": "auto",
    "jax_threefry_partitionable": True, "jax_use_shardy_partitioner": True, "jax_default_prng_impl": "threefry2x32",
    "jax_enable_checks": False, "jax_log_compiles": False, "jax_explain_cache_misses": False,
    "jax_check_tracer_leaks": False, "jax_compilation_cache_dir": None, "jax_softmax_custom_jvp": False,
    "jax_traceback_in_locations_limit": 100, "jax_random_seed_offset": 0, "jax_enable_custom_prng": False,
    "jax_persistent_cache_min_compile_time_secs": 1.0, "jax_persistent_cache_min_entry_size_bytes": 0,
    "jax_allow_f16_reductions": True, "jax_array_garbage_collection_guard": None, "jax_auto_pcast": True,
    "jax_debug_key_reuse": False, "jax_no_execution": False, "jax_no_tracing": False,
    "jax_remove_size_one_mesh_axis_from_type": False, "jax_thread_guard": False,
    "jax2tf_associative_scan_reductions": False, "jax_legacy_prng_key": "allow", "jax_no_collectives": frozenset(),
    "jax_raise_on_ppermute_sort_diff": True,
}


class Config:
    """Holds meshax's options; `update(name, value)` changes one, as in `jax.config`."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {
            "jax_enable_x64": _env_flag("MESHAX_ENABLE_X64", "JAX_ENABLE_X64"),
            "jax_platforms": os.environ.get("JAX_PLATFORMS", "cpu"),
            "meshax_check": _env_flag("MESHAX_CHECK", default=True),
            "meshax_collective_timeout": float(os.environ.get("MESHAX_COLLECTIVE_TIMEOUT", 300)),
            "meshax_buffer_pool_mb": float(os.environ.get("MESHAX_BUFFER_POOL_MB", 256)),
            # True: `make_mesh` without axis_types gives Explicit axes, as today's JAX (the seeds' default is Auto).
            "meshax_explicit_axes_by_default": _env_flag("MESHAX_EXPLICIT_AXES_BY_DEFAULT"),
            "jax_num_cpu_devices": -1,  # -1: from JAX_NUM_CPU_DEVICES / MESHAX_NUM_CPU_DEVICES / XLA_FLAGS
            "jax_default_device": None,  # where uncommitted values land (runtime/devices.default_device)
            # a job that goes on when processes die (runtime/recovery.py); set before distributed.initialize()
            "jax_enable_recoverability": False,
        }
        self._values.update(JAX_OPTIONS)
        self._watchers: dict[str, list[Callable[[Any], None]]] = {}

    def watch(self, name: str, callback: Callable[[Any], None]) -> None:
        """Call `callback(new_value)` before option `name` changes from now on (it may raise to refuse the change).

        Higher layers register here, so that this module imports none of them."""
        self._watchers.setdefault(name, []).append(callback)

    def update(self, name: str, value: Any) -> None:
        """Set option `name` to `value`; unknown names raise AttributeError listing the known ones."""
        if name not in self._values:
            known = ", ".join(sorted(self._values))
            raise AttributeError(f"meshax.config has no option {name!r}; known options: {known}.")
        if name == "meshax_buffer_pool_mb" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                                or not value >= 0):
            raise ValueError(f"meshax_buffer_pool_mb={value!r} must be a number of MiB >= 0 (0 turns the buffer "
                             "pool off).")
        for callback in self._watchers.get(name, ()):
            callback(value)
        self._values[name] = value

    def read(self, name: str) -> Any:
        return self._values[name]

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"meshax.config has no option {name!r}.")


config = Config()
