"""jax._src.traceback_util for the alias: marking library frames and API boundaries."""
from __future__ import annotations

from typing import Any, Callable

from meshax.extend.source_info_util import _excluded as _exclude_paths
from meshax.extend.source_info_util import register_exclusion

__all__ = ["api_boundary", "register_exclusion"]


def api_boundary(fun: Callable[..., Any] | None = None, **_: Any) -> Any:
    """`fun` itself (meshax does not filter tracebacks); usable with or without arguments."""
    if fun is None:
        return lambda f: f
    return fun
