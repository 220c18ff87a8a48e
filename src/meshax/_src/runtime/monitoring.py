"""jax.monitoring's listener registry: programs register callbacks, meshax and programs record events to them.

Four kinds of record, each with its own listeners: a plain event, an event's duration in seconds, an
event's time span (start and end times) and a scalar value. Keyword arguments are metadata passed on to
the listeners as given. Standard library only, so any layer may record.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

_lock = threading.Lock()
_listeners: dict[str, list[Callable[..., Any]]] = {"event": [], "duration": [], "time_span": [], "scalar": []}


def _register(kind: str, callback: Callable[..., Any]) -> None:
    with _lock:
        _listeners[kind].append(callback)


def _unregister(kind: str, callback: Callable[..., Any]) -> None:
    """Remove one registration of `callback`; AssertionError (as JAX) when it is not registered."""
    with _lock:
        assert callback in _listeners[kind], f"{callback!r} is not a registered {kind} listener"
        _listeners[kind].remove(callback)


def _notify(kind: str, *args: Any, **kwargs: Any) -> None:
    with _lock:
        listeners = list(_listeners[kind])
    for callback in listeners:
        callback(*args, **kwargs)


def record_event(event: str, **kwargs: str | int) -> None:
    """Tell the event listeners that `event` happened."""
    _notify("event", event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    """Tell the duration listeners that `event` took `duration` seconds."""
    _notify("duration", event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float, **kwargs: str | int) -> None:
    """Tell the time-span listeners that `event` ran from `start_time` to `end_time` (seconds)."""
    _notify("time_span", event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    """Tell the scalar listeners the value `value` of `event`."""
    _notify("scalar", event, value, **kwargs)


def register_event_listener(callback: Callable[..., Any]) -> None:
    """Call `callback(event, **kwargs)` for every recorded event."""
    _register("event", callback)


def register_event_duration_secs_listener(callback: Callable[..., Any]) -> None:
    """Call `callback(event, duration, **kwargs)` for every recorded duration."""
    _register("duration", callback)


def register_event_time_span_listener(callback: Callable[..., Any]) -> None:
    """Call `callback(event, start_time, end_time, **kwargs)` for every recorded time span."""
    _register("time_span", callback)


def register_scalar_listener(callback: Callable[..., Any]) -> None:
    """Call `callback(event, value, **kwargs)` for every recorded scalar."""
    _register("scalar", callback)


def unregister_event_listener(callback: Callable[..., Any]) -> None:
    """Stop calling `callback` for events."""
    _unregister("event", callback)


def unregister_event_duration_listener(callback: Callable[..., Any]) -> None:
    """Stop calling `callback` for durations."""
    _unregister("duration", callback)


def unregister_event_time_span_listener(callback: Callable[..., Any]) -> None:
    """Stop calling `callback` for time spans."""
    _unregister("time_span", callback)


def unregister_scalar_listener(callback: Callable[..., Any]) -> None:
    """Stop calling `callback` for scalars."""
    _unregister("scalar", callback)


def clear_event_listeners() -> None:
    """Remove every listener of every kind."""
    with _lock:
        for listeners in _listeners.values():
            listeners.clear()
