"""Errors meshax raises that programs catch (as jax.errors)."""
from meshax._src.core.core import (ConcretizationTypeError, NonConcreteBooleanIndexError, ShardingTypeError,
                              TracerArrayConversionError, TracerBoolConversionError, TracerIntegerConversionError,
                              UnexpectedTracerError)

__all__ = ["ConcretizationTypeError", "NonConcreteBooleanIndexError", "ShardingTypeError",
           "TracerArrayConversionError", "TracerBoolConversionError", "TracerIntegerConversionError",
           "UnexpectedTracerError"]
