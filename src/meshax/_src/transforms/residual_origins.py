"""Where staged values come from, recorded while print_saved_residuals describes a backward pass's residuals.

While an `Origins` is recording, every staged equation notes its outputs' primitive and the user's source
line; remat's partial evaluation, which recomputes values of an inner jaxpr, passes their origins on.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterator, Sequence

from ..core.jaxpr import Jaxpr, Literal, eval_jaxpr

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../meshax


def _user_source() -> str | None:
    """`file:line:column (function)` of the innermost frame outside meshax."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
    if frame is None:
        return None
    code, column = frame.f_code, None
    try:
        positions = list(code.co_positions())
        column = positions[frame.f_lasti // 2][2]
    except (AttributeError, IndexError):
        pass
    where = f"{code.co_filename}:{frame.f_lineno}" + (f":{column}" if column is not None else "")
    return f"{where} ({getattr(code, 'co_qualname', code.co_name)})"


class Origins:
    """Where each staged value comes from: var id -> how print_saved_residuals describes it."""

    def __init__(self) -> None:
        self.of: dict[int, str] = {}
        self.source_of: dict[int, str | None] = {}  # var id -> the user's source line

    def __call__(self, equation: Any) -> None:
        replayed = _replaying[-1][recording.index(self)] if _replaying else None
        if isinstance(replayed, _Fixed):  # inside a jitted function's program: one description for all
            for var in equation.outputs:
                self.of[var.id], self.source_of[var.id] = replayed.description, None
            return
        source = replayed if replayed is not None else _user_source()  # replayed: the inner equation's line
        params = equation.params
        kind = f"named '{params['name']}'" if equation.primitive.name == "name" and "name" in params else \
            f"output of {equation.primitive.name}"
        for var in equation.outputs:
            self.of[var.id] = kind + (f" from {source}" if source else "")
            self.source_of[var.id] = source


class SourceLines:
    """The user's source line of each value staged while it observes (kept with a cached checkpoint trace)."""

    def __init__(self) -> None:
        self.of: dict[int, str | None] = {}

    def __call__(self, equation: Any) -> None:
        source = _user_source()
        self.of.update((var.id, source) for var in equation.outputs)


def recall(lines: dict[int, str | None]) -> None:
    """The recordings under way learn where a cached trace's values come from (its equations replay them)."""
    for origins in recording:
        for var_id, source in lines.items():
            origins.source_of.setdefault(var_id, source)


class _Fixed:
    """Every value staged while this is being replayed is described as `description`."""

    def __init__(self, description: str) -> None:
        self.description = description


@contextlib.contextmanager
def jitted_call(name: str) -> Iterator[None]:
    """While recording: the values a jitted function's program stages are its outputs, as JAX describes them."""
    if not recording:
        yield
        return
    _replaying.append([_Fixed(f"output of jitted function '{name}' from ") for _ in recording])
    try:
        yield
    finally:
        _replaying.pop()


recording: list[Origins] = []
_replaying: list[list[Any]] = []  # per equation being replayed: its origin in each recording


def eval_jaxpr_keeping_origins(jaxpr: Jaxpr, args: Sequence[Any]) -> list[Any]:
    """`eval_jaxpr(jaxpr, (), args)`; while recording, the values it stages keep the origins of `jaxpr`'s."""
    if not recording:
        return eval_jaxpr(jaxpr, (), args)
    env: dict[int, Any] = {var.id: value for var, value in zip(jaxpr.invars, args)}

    def read(x: Any) -> Any:
        return x.value if isinstance(x, Literal) else env[x.id]

    for eq in jaxpr.equations:
        outer = _replaying[-1] if _replaying else [None] * len(recording)
        known = [fixed if isinstance(fixed, _Fixed) else origins.source_of.get(eq.outputs[0].id) if eq.outputs
                 else None for origins, fixed in zip(recording, outer)]
        _replaying.append(known)
        try:
            out = eq.primitive.bind(*map(read, eq.inputs), **eq.params)
        finally:
            _replaying.pop()
        env.update(zip((v.id for v in eq.outputs), out if eq.primitive.multiple_results else [out]))
    return [read(v) for v in jaxpr.outvars]
