"""jax._src.compiler for the alias. meshax compiles nothing (jit traces to a jaxpr that NumPy runs), so this
hook, which libraries such as chex.restrict_backends wrap, is never called by meshax."""
from __future__ import annotations

from typing import Any


def backend_compile_and_load(backend: Any, module: Any, *args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("meshax does not compile programs with an XLA backend.")
