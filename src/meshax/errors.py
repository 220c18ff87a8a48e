"""Errors meshax raises that programs catch (as jax.errors)."""
from meshax._src.core.core import (ConcretizationTypeError, JAXIndexError, JAXTypeError, NonConcreteBooleanIndexError,
                                   ShardingTypeError, TracerArrayConversionError, TracerBoolConversionError,
                                   TracerIntegerConversionError, UnexpectedTracerError)
from meshax._src.runtime.recovery import JaxRuntimeError

__all__ = ["ConcretizationTypeError", "InconclusiveDimensionOperation", "JAXIndexError", "JAXTypeError",
           "JaxRuntimeError", "JaxprTypeError", "KeyReuseError", "NonConcreteBooleanIndexError", "ShardingTypeError",
           "TracerArrayConversionError", "TracerBoolConversionError", "TracerIntegerConversionError",
           "UnexpectedTracerError"]


class KeyReuseError(JAXTypeError):
    """A PRNG key used twice where jax.debug_key_reuse checks keys."""


class JaxprTypeError(TypeError):
    """A jaxpr whose equations do not type-check."""


class InconclusiveDimensionOperation(Exception):
    """A comparison or operation on symbolic dimensions whose result depends on their values."""
