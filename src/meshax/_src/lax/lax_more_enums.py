"""jax.lax's option types: AccuracyMode and Tolerance (the accuracy of transcendentals), DotAlgorithm and
DotAlgorithmPreset (a dot's algorithm), FftType, RandomAlgorithm and RaggedDotDimensionNumbers. meshax computes on
the CPU in each dtype's own precision, so these are accepted and checked but do not change results."""
from __future__ import annotations

import dataclasses
import enum
from typing import Any, NamedTuple, Sequence

import ml_dtypes
import numpy as np

__all__ = ["AccuracyMode", "DotAlgorithm", "DotAlgorithmPreset", "FftType", "RaggedDotDimensionNumbers",
           "RandomAlgorithm", "Tolerance"]


class AccuracyMode(enum.Enum):
    """How accurately a transcendental function is computed: at most the ulps of XLA's own kernel, or the default."""
    HIGHEST = 1
    DEFAULT = 2


class Tolerance:
    """An accuracy requirement for a transcendental function: absolute, relative and ulps tolerances."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0) -> None:
        if atol < 0 or rtol < 0 or ulps < 0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0 and rtol == 0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps


class FftType(enum.IntEnum):
    """The kind of transform `lax.fft` computes."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


class RandomAlgorithm(enum.IntEnum):
    """The bit generator `lax.rng_bit_generator` uses."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self) -> str:
        return self.name


class DotAlgorithm(NamedTuple):
    """A dot's algorithm spelled out: operand precision types, accumulation type and how many passes."""
    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


_F8_OUTPUTS = (np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
               ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e4m3b11fnuz)


class DotAlgorithmPreset(enum.Enum):
    """Named dot algorithms: operand types, accumulation type and passes (as XLA's presets)."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def supported_lhs_types(self) -> tuple[Any, ...] | None:
        """The dtypes the left operand may have (None: any)."""
        return _OPERAND_TYPES.get(self.name)

    @property
    def supported_rhs_types(self) -> tuple[Any, ...] | None:
        """The dtypes the right operand may have (None: any)."""
        return _OPERAND_TYPES.get(self.name)

    @property
    def accumulation_type(self) -> Any:
        """The dtype products are summed in (None: the operands')."""
        return _ACCUMULATION.get(self.name)

    def supported_output_types(self, lhs_dtype: Any, rhs_dtype: Any) -> tuple[Any, ...] | None:
        """The result dtypes this algorithm can produce (None: any)."""
        if self.name.startswith("ANY_F8_ANY_F8_F32"):
            return _F8_OUTPUTS
        own = {"F16_F16_F16": np.float16, "BF16_BF16_BF16": ml_dtypes.bfloat16}.get(self.name)
        accumulation = self.accumulation_type
        return (own,) if own is not None else None if accumulation is None else (accumulation,)


_OPERAND_TYPES = {"F16_F16_F16": (np.float16,), "F16_F16_F32": (np.float16,),
                  "BF16_BF16_BF16": (ml_dtypes.bfloat16, np.float32), "BF16_BF16_F32": (ml_dtypes.bfloat16, np.float32),
                  **{name: (np.float32,) for name in ("BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
                                                      "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32")},
                  "F64_F64_F64": (np.float64,)}
_ACCUMULATION = {"ANY_F8_ANY_F8_F32": np.float32, "ANY_F8_ANY_F8_F32_FAST_ACCUM": np.float32,
                 "F16_F16_F16": np.float16, "BF16_BF16_BF16": ml_dtypes.bfloat16, "F64_F64_F64": np.float64,
                 **{name: np.float32 for name in ("F16_F16_F32", "BF16_BF16_F32", "BF16_BF16_F32_X3",
                                                  "BF16_BF16_F32_X6", "BF16_BF16_F32_X9", "TF32_TF32_F32",
                                                  "TF32_TF32_F32_X3", "F32_F32_F32")}}


def _ints(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """The dimensions of a ragged dot: `dot_dimension_numbers` as dot_general's ((lhs_contracting,
    rhs_contracting), (lhs_batch, rhs_batch)), the lhs dimensions that are ragged and the rhs group dimensions."""
    dot_dimension_numbers: Any
    lhs_ragged_dimensions: Any
    rhs_group_dimensions: Any

    def __init__(self, dot_dimension_numbers: Any, lhs_ragged_dimensions: Sequence[int],
                 rhs_group_dimensions: Sequence[int]) -> None:
        (lc, rc), (lb, rb) = dot_dimension_numbers
        object.__setattr__(self, "dot_dimension_numbers", ((_ints(lc), _ints(rc)), (_ints(lb), _ints(rb))))
        object.__setattr__(self, "lhs_ragged_dimensions", _ints(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", _ints(rhs_group_dimensions))
