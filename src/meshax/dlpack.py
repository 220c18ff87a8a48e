"""Arrays from other libraries through the DLPack protocol (as jax.dlpack): `from_dlpack`, `is_supported_dtype`."""
from __future__ import annotations

from typing import Any

import numpy as np

from meshax._src.compat import array_methods as _methods  # noqa: F401  (installs Array operators and methods)
from meshax.errors import JaxRuntimeError

__all__ = ["from_dlpack", "is_supported_dtype"]

_SUPPORTED_KINDS = "biufc"  # booleans, integers, floats and complex numbers of NumPy's DLPack


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of `dtype` pass through DLPack (bool, integer, float and complex dtypes NumPy or ml_dtypes'
    bfloat16 name; not 8-bit or 4-bit floats nor sub-byte integers)."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        return True
    largest = 16 if dtype.kind == "c" else 8  # no long double
    return dtype.kind in _SUPPORTED_KINDS and dtype.type.__module__ == "numpy" and dtype.itemsize <= largest


def _compact(host: np.ndarray) -> bool:
    """Whether the buffer is dense: its strides are a permutation of a C-contiguous layout's (no gaps, no
    broadcasting), the only layouts XLA takes over DLPack."""
    big = [d for d in range(host.ndim) if host.shape[d] > 1]
    order = sorted(big, key=lambda d: -host.strides[d])
    expected = host.itemsize
    for d in reversed(order):
        if host.strides[d] != expected:
            return False
        expected *= host.shape[d]
    return True


def from_dlpack(external_array: Any, device: Any = None, copy: bool | None = None) -> Any:
    """A meshax Array holding a copy of `external_array`, an object with `__dlpack__` and `__dlpack_device__` (a
    NumPy array, a torch tensor...), on `device` (a Device or Sharding; default: the default device)."""
    from meshax._src.arrays.placement import device_put
    from meshax._src.numpy.creation import asarray

    if not (hasattr(external_array, "__dlpack__") and hasattr(external_array, "__dlpack_device__")):
        raise TypeError("The array passed to from_dlpack must have __dlpack__ and __dlpack_device__ methods.")
    host = np.from_dlpack(external_array)
    if not _compact(host):
        raise JaxRuntimeError(f"UNIMPLEMENTED: Only DLPack tensors with trivial (compact) striding are supported; "
                              f"got dimensions {list(host.shape)} with strides {[s // host.itemsize for s in host.strides]}.")
    value = asarray(np.array(host, copy=True))
    return value if device is None else device_put(value, device)
