"""Experimental APIs, as in jax.experimental."""
from meshax.experimental import multihost_utils

__all__ = ["multihost_utils"]
