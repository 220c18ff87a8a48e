"""meshax.numpy's input and output: save/savez (NumPy's, which read an array through __array__), load (NumPy's,
giving an Array for an .npy file), fromfile (refused, as JAX's), from_dlpack, array_repr, einsum_path, and the
NumPy names jax.numpy re-exports (ComplexWarning, object_)."""
from __future__ import annotations

import os
from typing import IO, Any

import ml_dtypes
import numpy as np

from ..arrays.placement import device_put
from .creation import asarray

__all__ = ["ComplexWarning", "array_repr", "einsum_path", "from_dlpack", "fromfile", "load", "object_", "save",
           "savez"]

ComplexWarning = np.exceptions.ComplexWarning
object_ = np.object_
save = np.save
savez = np.savez
array_repr = np.array_repr


def load(file: IO[bytes] | str | os.PathLike[Any], *args: Any, **kwargs: Any) -> Any:
    """numpy.load, with an .npy file's array returned as an Array (bfloat16 data, which NumPy stores as 2-byte
    void, restored); .npz archives and arrays of non-numeric types stay NumPy's."""
    out = np.load(file, *args, **kwargs)
    if not isinstance(out, np.ndarray):
        return out
    if out.dtype == np.dtype("V2"):
        out = out.view(ml_dtypes.bfloat16)
    try:
        return asarray(out)
    except (TypeError, ValueError):
        return out


def fromfile(*args: Any, **kwargs: Any) -> Any:
    """Refused, as in JAX: reading a file is a side effect that jit would run only once."""
    raise NotImplementedError("jnp.fromfile() is not implemented because it may be non-pure and thus unsafe for use "
                              "with jit; use jnp.asarray(np.fromfile(...)) instead.")


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """An Array of the data of any DLPack-exporting object (a NumPy array, a tensor, ...), on `device` if given."""
    result = asarray(np.from_dlpack(x, copy=copy))
    return result if device is None else device_put(result, device)


def einsum_path(subscripts: str, /, *operands: Any, optimize: bool | str | list = "auto") -> tuple[list, Any]:
    """The order in which einsum would contract `operands` (a list of index pairs) and a report of its cost, as
    opt_einsum's contract_path (NumPy's einsum_path where opt_einsum is not installed)."""
    strategy = ("optimal" if optimize else False) if isinstance(optimize, bool) else optimize
    shapes = [np.shape(x) for x in operands]
    try:
        import opt_einsum
    except ImportError:
        strategy = "greedy" if strategy in ("auto", "auto-hq", "dp", "branch-all", "branch-2") else strategy
        path, report = np.einsum_path(subscripts, *(np.empty(s, np.float32) for s in shapes), optimize=strategy)
        return [tuple(step) for step in path[1:]], report
    if strategy is False:  # left to right, as JAX's
        strategy = [(0, 1)] * max(len(shapes) - 1, 1) if len(shapes) > 1 else [(0,)]
    return opt_einsum.contract_path(subscripts, *shapes, shapes=True, optimize=strategy)
