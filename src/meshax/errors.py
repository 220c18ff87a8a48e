"""Errors meshax raises that programs catch (as jax.errors)."""
from meshax._src.core import (ConcretizationTypeError, ShardingTypeError, TracerArrayConversionError,
                              TracerBoolConversionError, TracerIntegerConversionError, UnexpectedTracerError)

__all__ = ["ConcretizationTypeError", "ShardingTypeError", "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]
