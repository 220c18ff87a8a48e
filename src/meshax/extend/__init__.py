"""Interfaces for building on meshax's core (as jax.extend): primitives, jaxprs, linear_util, source_info_util."""
from meshax.extend import core, linear_util, source_info_util

__all__ = ["core", "linear_util", "source_info_util"]


def __getattr__(name: str):
    from meshax._src.compat.missing_names import module_getattr

    return module_getattr("jax.extend")(name)
