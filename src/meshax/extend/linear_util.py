"""Wrapped functions (as jax.extend.linear_util): `wrap_init(f)` gives a callable with `call_wrapped`."""
from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["StoreException", "WrappedFun", "cache", "transformation", "transformation_with_aux", "wrap_init"]


class StoreException(Exception):
    """A value was stored twice, or read before being stored."""


class Store:
    """A write-once box for a value a transformation reports after the call (e.g. an output tree)."""

    _EMPTY = object()

    def __init__(self) -> None:
        self._value: Any = self._EMPTY

    def store(self, value: Any) -> None:
        if self._value is not self._EMPTY:
            raise StoreException("Store occupied")
        self._value = value

    @property
    def val(self) -> Any:
        if self._value is self._EMPTY:
            raise StoreException("Store empty")
        return self._value

    def __call__(self) -> Any:
        return self.val


class WrappedFun:
    """A function plus its fixed keyword parameters and the transformations applied to it."""

    def __init__(self, f: Callable[..., Any], params: dict[str, Any] | None = None, debug_info: Any = None) -> None:
        self.f = f
        self.params = dict(params or {})
        self.debug_info = debug_info
        functools.update_wrapper(self, f, updated=())

    def call_wrapped(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*args, **self.params, **kwargs)

    __call__ = call_wrapped

    def __repr__(self) -> str:
        return f"Wrapped function: {getattr(self.f, '__name__', self.f)!r}"


def wrap_init(f: Callable[..., Any], params: dict[str, Any] | None = None, *, debug_info: Any = None) -> WrappedFun:
    return WrappedFun(f, params, debug_info)


def transformation(gen: Callable[..., Any]) -> Callable[..., WrappedFun]:
    """A transformation written as a function of the wrapped function (meshax's form: `gen(f, *args)`)."""

    def apply(fun: WrappedFun, *gen_args: Any) -> WrappedFun:
        return WrappedFun(lambda *args, **kwargs: gen(fun.call_wrapped, *gen_args, *args, **kwargs),
                          debug_info=fun.debug_info)

    return apply


def transformation_with_aux(gen: Callable[..., Any]) -> Callable[..., tuple[WrappedFun, Store]]:
    """Like `transformation`, for `gen` returning (output, aux): aux is read from the returned store."""

    def apply(fun: WrappedFun, *gen_args: Any) -> tuple[WrappedFun, Store]:
        store = Store()

        def run(*args: Any, **kwargs: Any) -> Any:
            out, aux = gen(fun.call_wrapped, *gen_args, *args, **kwargs)
            store.store(aux)
            return out

        return WrappedFun(run, debug_info=fun.debug_info), store

    return apply


def cache(call: Callable[..., Any], **_: Any) -> Callable[..., Any]:
    """`call` itself: meshax caches traced programs in jit, not here."""
    return call
