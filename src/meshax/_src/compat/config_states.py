"""JAX's configuration states (`jax.enable_checks`, `jax.no_tracing`, ...: `.value` and `with state(v):`) and
user context values (jax.make_user_context).

An option meshax's config knows is read and written there, so `jax.config.update` and the state agree; the others
are held by their state. Settings meshax cannot honour (another PRNG, non-partitionable threefry) raise
NotImplementedError rather than being ignored.
"""
from __future__ import annotations

import contextlib
import enum
from typing import Any, Callable, Iterator

from ..config import config

_NO_DEFAULT = object()


class State:
    """A configuration option, as JAX's config states: `.value` reads it, `with state(new_val):` sets it for a block.

    Options meshax's config knows live there (`jax.config.update` and the state agree); the others are held here."""

    def __init__(self, name: str, default: Any, parse: Callable[[Any], Any], context_default: Any = _NO_DEFAULT,
                 refuse: Callable[[Any], str | None] = lambda value: None) -> None:
        self.name, self._parse = name, parse
        self._context_default, self._refuse = context_default, refuse
        self._own = default

    @property
    def value(self) -> Any:
        """The option's current setting."""
        try:
            return self._parse(config.read(self.name))  # as this state keeps it (an enum for a name...)
        except KeyError:
            return self._own

    def _set(self, value: Any) -> None:
        try:
            config.read(self.name)
        except KeyError:
            self._own = value
        else:
            config.update(self.name, value)

    @contextlib.contextmanager
    def __call__(self, new_val: Any = _NO_DEFAULT) -> Iterator[None]:
        """The option set to `new_val` for the block, then restored."""
        if new_val is _NO_DEFAULT:
            if self._context_default is _NO_DEFAULT:
                raise TypeError(f"{self.name} context manager needs a value: {self.name}(new_val).")
            new_val = self._context_default
        value = self._parse(new_val)
        why = self._refuse(value)
        if why:
            raise NotImplementedError(f"{self.name}={value!r} is not implemented in meshax ({why}).")
        previous = self.value
        self._set(value)
        try:
            yield
        finally:
            self._set(previous)

    def __bool__(self) -> bool:
        raise TypeError(f"bool() not supported for the configuration state {self.name}; read {self.name}.value.")

    def __repr__(self) -> str:
        return f"State({self.name}={self.value!r})"


def _bool_state(name: str, default: bool, refuse: Callable[[Any], str | None] = lambda value: None) -> State:
    return State(name, default, bool, True, refuse)


def _enum_state(name: str, default: Any, choices: tuple, optional: bool = False,
                refuse: Callable[[Any], str | None] = lambda value: None) -> State:
    def parse(value: Any) -> Any:
        if (value is None and optional) or value in choices:
            return value
        allowed = ("None or in " if optional else "in ") + repr(list(choices))
        raise ValueError(f"{name}: new value must be {allowed}; got {value!r} of type {type(value)}.")
    return State(name, default, parse, refuse=refuse)


class LegacyPrngKeyState(enum.Enum):
    """What happens when a raw uint32 key (PRNGKey) reaches jax.random (jax.legacy_prng_key)."""
    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


def _legacy_key(value: Any) -> LegacyPrngKeyState:
    if isinstance(value, str):
        return LegacyPrngKeyState(value)
    if not isinstance(value, LegacyPrngKeyState):
        raise TypeError(f"jax_legacy_prng_key: new value must be a LegacyPrngKeyState or its name; got {value!r} of "
                        f"type {type(value)}.")
    return value


def _axis_set(value: Any) -> frozenset:
    if not isinstance(value, (set, frozenset)):
        raise TypeError(f"Expected axis name(s) as set or frozenset, got {value!r} of type {type(value)}.")
    return frozenset(value)


def _only_threefry(value: Any) -> str | None:
    return None if value == "threefry2x32" else "meshax's keys are threefry2x32 keys only"


_PRNG_IMPLS = ("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32")
enable_x64 = _bool_state("jax_enable_x64", False)
debug_nans = _bool_state("jax_debug_nans", False)
debug_infs = _bool_state("jax_debug_infs", False)
allow_f16_reductions = _bool_state("jax_allow_f16_reductions", True)
array_garbage_collection_guard = _enum_state("jax_array_garbage_collection_guard", None, ("allow", "log", "fatal"),
                                             optional=True)
auto_pcast = _bool_state("jax_auto_pcast", True)
debug_key_reuse = _bool_state("jax_debug_key_reuse", False)
default_prng_impl = _enum_state("jax_default_prng_impl", "threefry2x32", _PRNG_IMPLS, refuse=_only_threefry)
enable_checks = _bool_state("jax_enable_checks", False)
enable_custom_prng = _bool_state("jax_enable_custom_prng", False)
jax2tf_associative_scan_reductions = _bool_state("jax2tf_associative_scan_reductions", False)
legacy_prng_key = State("jax_legacy_prng_key", LegacyPrngKeyState.ALLOW, _legacy_key)
no_execution = _bool_state("jax_no_execution", False)
no_tracing = _bool_state("jax_no_tracing", False)
remove_size_one_mesh_axis_from_type = _bool_state("jax_remove_size_one_mesh_axis_from_type", False)
softmax_custom_jvp = _bool_state("jax_softmax_custom_jvp", False)
thread_guard = _bool_state("jax_thread_guard", False)
threefry_partitionable = _bool_state(
    "jax_threefry_partitionable", True,
    lambda value: None if value else "meshax's threefry keys are always split the partitionable way")
no_collectives = State("jax_no_collectives", frozenset(), _axis_set)


class UserContext:
    """A context value of the program's own (jax.make_user_context): `.value`, `with context(v):`."""

    def __init__(self, default_value: Any = None) -> None:
        self._value = default_value

    value = property(lambda self: self._value)

    def get_global(self) -> Any:
        return self._value

    def set_global(self, value: Any) -> None:
        self._value = value

    @contextlib.contextmanager
    def __call__(self, new_val: Any) -> Iterator[None]:
        previous, self._value = self._value, new_val
        try:
            yield
        finally:
            self._value = previous


def make_user_context(default_value: Any = None) -> UserContext:
    """A new context value with `default_value`, set for a block with `with context(new_value):`."""
    return UserContext(default_value)

