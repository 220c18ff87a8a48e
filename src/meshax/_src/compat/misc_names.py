"""Small top-level entry points of jax: default_backend, jacobian, named_call/named_scope, disable_jit,
clear_caches, effects_barrier."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator


def default_backend() -> str:
    """The platform arrays live on: meshax has CPU devices only."""
    return "cpu"


def jacobian(fun: Callable[..., Any], argnums: Any = 0, has_aux: bool = False, holomorphic: bool = False,
             allow_int: bool = False) -> Callable[..., Any]:
    """The Jacobian of `fun` (as jax.jacobian: reverse mode)."""
    from ..transforms.jacobians import jacrev

    return jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)


def named_call(fun: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """`fun` itself: names label XLA's profiles, which meshax does not make."""
    return fun


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """A scope name for profiles (a no-op in meshax, as names only label XLA's programs)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope name argument must be a string; got {name!r}.")
    yield


class _JitState(threading.local):
    def __init__(self) -> None:
        self.disabled = False


_jit_state = _JitState()


def jit_disabled() -> bool:
    return _jit_state.disabled


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the block, jitted functions run their Python code eagerly (values are the same)."""
    previous, _jit_state.disabled = _jit_state.disabled, disable
    try:
        yield
    finally:
        _jit_state.disabled = previous


def clear_caches() -> None:
    """Forget every traced program (jit and shard_map re-trace on their next call)."""
    import gc

    from ..transforms.jit import Jitted, forget_traces

    forget_traces()
    for obj in gc.get_objects():
        if isinstance(obj, Jitted):
            obj._cache.clear()


def effects_barrier() -> None:
    """Wait for pending side effects: meshax runs them in order as they come, so there are none."""


__all__ = ["clear_caches", "default_backend", "disable_jit", "effects_barrier", "jacobian", "named_call",
           "named_scope"]
