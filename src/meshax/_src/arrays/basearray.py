"""meshax.Array, the public array type (as jax.Array): an abstract class that concrete arrays and traced values
both are instances of, so ``isinstance(x, meshax.Array)`` holds inside jit, grad, vmap and shard_map too.

The concrete class (``meshax._src.arrays.array.Array``) is what ``type(x)`` gives for an array outside any trace.
"""
from __future__ import annotations

import abc

from .array import Array as _ConcreteArray
from ..core.core import Tracer


class Array(abc.ABC):
    """A meshax array or a traced one: anything meshax.numpy returns (use it in isinstance checks and
    annotations; arrays are made by meshax.numpy, device_put and friends, not by calling this class)."""

    __slots__ = ()


Array.register(_ConcreteArray)
Array.register(Tracer)
Array.__module__ = "meshax"
