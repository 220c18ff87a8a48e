"""jax.numpy's index_tricks (in progress)."""
from __future__ import annotations

__all__: list[str] = []
