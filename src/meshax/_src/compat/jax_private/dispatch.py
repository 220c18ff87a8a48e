"""jax._src.dispatch for the alias."""
from __future__ import annotations


def wait_for_tokens() -> None:
    """Wait for pending effects: meshax runs effects in program order as they come, so there are none."""
