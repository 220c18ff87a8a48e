"""NumPy's API on meshax arrays (as jax.numpy): eager, partitioned over the arrays' devices, traceable by jit."""
import numpy as _np

from meshax._src import methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src.array import Array as ndarray
from meshax._src.numpy_api import *  # noqa: F401,F403
from meshax._src.numpy_api import (  # noqa: F401  (names that shadow builtins are not in *)
    abs, all, any, max, min, pow, round, sum,
)

bool_ = _np.bool_
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
dtype, iinfo, finfo = _np.dtype, _np.iinfo, _np.finfo
integer, floating, inexact, number, signedinteger, unsignedinteger, complexfloating = (
    _np.integer, _np.floating, _np.inexact, _np.number, _np.signedinteger, _np.unsignedinteger, _np.complexfloating)
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None
