"""NumPy's API on meshax arrays (as jax.numpy): eager, partitioned over the arrays' devices, traceable by jit."""
import types as _types

import numpy as _np

from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax._src import numpy as _api
from meshax._src.arrays.basearray import Array as ndarray  # noqa: F401  (jnp.ndarray is meshax.Array, as in JAX)
from meshax._src.core import dtypes as _dtypes
from meshax._src.core.dtypes import iinfo  # noqa: F401

from meshax._src.numpy import *  # noqa: F401,F403
from meshax._src.numpy.ufunc_builtins import *  # noqa: F401,F403  (add, maximum, ... as jnp.ufunc objects)
from meshax._src.numpy import (  # noqa: F401
    abs, all, any, divmod, max, min, pow, round, sum,
)
from meshax._src.numpy.polynomials_linalg import poly, polyfit, roots  # noqa: F401  (on jnp.linalg)
from meshax._src.numpy.bessel import i0  # noqa: F401  (its derivative is I1, from lax)

from meshax._src.numpy.scalar_types import SCALAR_TYPES as _SCALAR_TYPES
from meshax._src.transforms.vectorize import vectorize  # noqa: F401  (vmap over NumPy's gufunc signatures)


def finfo(dtype):  # noqa: ANN001,ANN201  (its parameter is named dtype, as JAX 0.12's)
    """Machine limits of a float type: np.finfo, or ml_dtypes.finfo for bfloat16 and the narrow floats."""
    return _dtypes.finfo(dtype)


# The scalar types (float32, bfloat16, float8_e4m3fn, int4, ... and the aliases bool_, int_, single, ...): each
# stands for its dtype wherever a dtype is expected, and calling it makes an Array, as in jax.numpy.
globals().update(_SCALAR_TYPES)
generic, character, flexible = _np.generic, _np.character, _np.flexible
dtype = _np.dtype
integer, floating, inexact, number, signedinteger, unsignedinteger, complexfloating = (
    _np.integer, _np.floating, _np.inexact, _np.number, _np.signedinteger, _np.unsignedinteger, _np.complexfloating)
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None

# What `from meshax.numpy import *` gives: the API, not the helpers meshax._src.numpy imports for itself (its `P`, the
# primitives module, would otherwise replace a user's `P = PartitionSpec`).
_NOT_API = {"annotations", "Any", "Sequence", "Array", "Tracer", "Device", "Sharding", "ArrayLike", "device_put",
            "host_value", "aval_of", "P", "np", "math", "builtins", "string", "operator", "dtypes"}
for _name in _NOT_API:
    if _name in globals() and getattr(_api, _name, None) is globals()[_name]:
        del globals()[_name]
__all__ = sorted(_name for _name, _value in list(globals().items())
                 if not _name.startswith("_") and not isinstance(_value, _types.ModuleType))

from meshax.numpy import fft, linalg  # noqa: E402  (jnp.linalg.inv, jnp.fft.fft)


def __getattr__(name: str):
    """Names of jax.numpy that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.numpy", name)
