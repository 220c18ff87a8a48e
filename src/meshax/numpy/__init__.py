"""NumPy's API on meshax arrays (as jax.numpy): eager, partitioned over the arrays' devices, traceable by jit."""
import types as _types

import numpy as _np

from meshax._src import methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src import numpy as _api
from meshax._src.array import Array as ndarray
from meshax._src.dtypes import bfloat16, finfo, iinfo  # noqa: F401
from meshax._src.numpy import *  # noqa: F401,F403
from meshax._src.numpy import (  # noqa: F401
    abs, all, any, divmod, max, min, pow, round, sum,
)

bool_ = bool = _np.bool_
int_, uint, float_, complex_ = _np.int64, _np.uint64, _np.float64, _np.complex128  # canonicalized when used
single, double, csingle, cdouble = _np.float32, _np.float64, _np.complex64, _np.complex128
generic, character, flexible = _np.generic, _np.character, _np.flexible
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
float16, float32, float64 = _np.float16, _np.float32, _np.float64
complex64, complex128 = _np.complex64, _np.complex128
dtype = _np.dtype
integer, floating, inexact, number, signedinteger, unsignedinteger, complexfloating = (
    _np.integer, _np.floating, _np.inexact, _np.number, _np.signedinteger, _np.unsignedinteger, _np.complexfloating)
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None

# What `from meshax.numpy import *` gives: the API, not the helpers meshax._src.numpy imports for itself (its `P`, the
# primitives module, would otherwise replace a user's `P = PartitionSpec`).
_NOT_API = {"annotations", "Any", "Sequence", "Array", "Tracer", "Device", "Sharding", "ArrayLike", "device_put",
            "host_value", "aval_of", "P", "np", "math", "builtins", "string", "operator", "dtypes", "partition"}
for _name in _NOT_API:
    if _name in globals() and getattr(_api, _name, None) is globals()[_name]:
        del globals()[_name]
__all__ = sorted(_name for _name, _value in list(globals().items())
                 if not _name.startswith("_") and not isinstance(_value, _types.ModuleType))

from meshax.numpy import fft, linalg  # noqa: E402  (jnp.linalg.inv, jnp.fft.fft)


def __getattr__(name: str):
    """Names of jax.numpy that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.missing import missing_attribute

    missing_attribute("jax.numpy", name)
