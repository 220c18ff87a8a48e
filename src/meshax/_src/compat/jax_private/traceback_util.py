"""jax._src.traceback_util for the alias: marking library frames and API boundaries."""
from __future__ import annotations

from typing import Any, Callable

from meshax.extend.source_info_util import _excluded as _exclude_paths  # noqa: F401  (flax edits this list)
from meshax.extend.source_info_util import register_exclusion

__all__ = ["api_boundary", "register_exclusion"]


def api_boundary(fun: Callable[..., Any] | None = None, **_: Any) -> Any:
    """`fun` itself (meshax does not filter tracebacks); usable with or without arguments."""
    if fun is None:
        return lambda f: f
    return fun


def include_frame(frame: Any) -> bool:
    """Whether `frame` (a frame or traceback entry) belongs to user code rather than a registered library."""
    from meshax.extend.source_info_util import is_user_filename

    code = getattr(frame, "f_code", None) or getattr(getattr(frame, "tb_frame", None), "f_code", None)
    return is_user_filename(code.co_filename) if code is not None else True
