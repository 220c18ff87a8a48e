"""Debugging helpers (as jax.debug): printing and calling back with runtime values, drawing shardings."""
from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.transforms.debugging import callback, print  # noqa: A004
from meshax._src.sharding.visualize import visualize_array_sharding, visualize_sharding
from meshax._src.compat.small_modules import (DebugEffect, OrderedDebugEffect, breakpoint,  # noqa: A004
                                             inspect_array_sharding, log)

__all__ = ["DebugEffect", "OrderedDebugEffect", "breakpoint", "callback", "inspect_array_sharding", "log", "print",
           "visualize_array_sharding", "visualize_sharding"]


def __getattr__(name: str):
    """Names of jax.debug that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.debug", name)
