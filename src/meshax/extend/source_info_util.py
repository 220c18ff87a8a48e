"""Source locations and name stacks (as jax.extend.source_info_util). meshax reports the user's source line in
its own errors; this module keeps the names libraries call (frames to exclude, name scopes)."""
from __future__ import annotations

import contextlib
import os
import traceback
from typing import Any, Iterator

__all__ = ["NameStack", "SourceInfo", "current", "current_name_stack", "extend_name_stack", "new_name_stack",
           "register_exclusion", "reset_name_stack", "set_name_stack", "summarize", "transform_name_stack",
           "user_context"]

_excluded: list[str] = []


def register_exclusion(path: str) -> None:
    """Frames from files under `path` are not the user's code (library internals)."""
    _excluded.append(os.path.abspath(path))


def is_user_filename(filename: str) -> bool:
    return not any(os.path.abspath(filename).startswith(prefix) for prefix in _excluded)


class NameStack(tuple):
    """A stack of scope names."""

    def extend(self, name: str) -> "NameStack":
        return NameStack((*self, name))

    def __str__(self) -> str:
        return "/".join(self)


class SourceInfo:
    """Where an operation was written: the innermost user frame."""

    def __init__(self, frame: traceback.FrameSummary | None, name_stack: NameStack = NameStack()) -> None:
        self.frame = frame
        self.name_stack = name_stack

    def __repr__(self) -> str:
        return summarize(self)


_name_stack = NameStack()


def new_source_info() -> SourceInfo:
    return SourceInfo(None, _name_stack)


def current() -> SourceInfo:
    """The innermost user frame of the current call stack."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        if is_user_filename(frame.filename):
            return SourceInfo(frame, _name_stack)
    return SourceInfo(None, _name_stack)


def summarize(info: SourceInfo, num_frames: int = 1) -> str:
    frame = info.frame
    return "unknown" if frame is None else f"{frame.filename}:{frame.lineno} ({frame.name})"


def current_name_stack() -> NameStack:
    return _name_stack


@contextlib.contextmanager
def _with_stack(stack: NameStack) -> Iterator[NameStack]:
    global _name_stack
    previous, _name_stack = _name_stack, stack
    try:
        yield stack
    finally:
        _name_stack = previous


def extend_name_stack(name: str) -> Any:
    return _with_stack(_name_stack.extend(name))


def new_name_stack(name: str = "") -> NameStack:
    return NameStack((name,)) if name else NameStack()


def set_name_stack(stack: NameStack) -> Any:
    return _with_stack(stack)


def reset_name_stack() -> Any:
    return _with_stack(NameStack())


def transform_name_stack(name: str) -> Any:
    return _with_stack(_name_stack.extend(name))


@contextlib.contextmanager
def user_context(frames: Any, name_stack: NameStack | None = None) -> Iterator[None]:
    yield
