"""Names of JAX's public API that meshax lacks: asking for one raises NotImplementedError.

The error is also an AttributeError, so ``hasattr`` and ``getattr(module, name, default)``
keep working for code that probes for optional features. This module imports no NumPy.
"""
from __future__ import annotations

from typing import Any, NoReturn

from .jax_names import JAX_NAMES


class NotImplementedInMeshax(NotImplementedError, AttributeError):
    """A public JAX name meshax does not provide yet."""


def missing_attribute(module: str, name: str) -> NoReturn:
    """Raise for `module.name`: NotImplementedError when JAX has that name, else a plain AttributeError."""
    if name in JAX_NAMES.get(module, ()):
        raise NotImplementedInMeshax(f"{module}.{name} is not implemented in meshax yet")
    raise AttributeError(f"module {module.replace('jax', 'meshax', 1)!r} has no attribute {name!r}")


def module_getattr(module: str) -> Any:
    """A module-level ``__getattr__`` for `module` (a JAX module name) that reports missing JAX names."""

    def __getattr__(name: str) -> Any:
        missing_attribute(module, name)

    return __getattr__
