"""jax.experimental.io_callback: a host function with side effects, called eagerly or each time a jitted program
runs, in program order (meshax evaluates programs in order, so `ordered=True` holds either way)."""
from __future__ import annotations

from typing import Any, Callable

from ..compat.top_level import pure_callback


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """Call `callback` on NumPy values of `args`; its results are typed as `result_shape_dtypes` (a pytree of
    ShapeDtypeStructs or arrays). It runs on every process, once per evaluation."""
    return pure_callback(callback, result_shape_dtypes, *args, sharding=sharding, **kwargs)
