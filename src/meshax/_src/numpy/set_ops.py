"""jax.numpy's set_ops (in progress)."""
from __future__ import annotations

__all__: list[str] = []
