"""Operators and NumPy-style methods of meshax.Array and of traced values (the same for both)."""
from __future__ import annotations

from typing import Any

from .. import numpy as jnp
from ..arrays.array import Array
from ..core.core import Tracer


def _swap(function):
    return lambda self, other: function(other, self)


def _shape_args(args: tuple[Any, ...]) -> Any:
    return args[0] if len(args) == 1 and not isinstance(args[0], int) else args


_OPERATORS = {
    "__add__": jnp.add, "__radd__": _swap(jnp.add), "__sub__": jnp.subtract, "__rsub__": _swap(jnp.subtract),
    "__mul__": jnp.multiply, "__rmul__": _swap(jnp.multiply), "__truediv__": jnp.divide,
    "__rtruediv__": _swap(jnp.divide), "__floordiv__": jnp.floor_divide, "__rfloordiv__": _swap(jnp.floor_divide),
    "__mod__": jnp.remainder, "__rmod__": _swap(jnp.remainder), "__pow__": jnp.power, "__rpow__": _swap(jnp.power),
    "__matmul__": jnp.matmul, "__rmatmul__": _swap(jnp.matmul), "__and__": jnp.bitwise_and,
    "__rand__": _swap(jnp.bitwise_and), "__or__": jnp.bitwise_or, "__ror__": _swap(jnp.bitwise_or),
    "__xor__": jnp.bitwise_xor, "__rxor__": _swap(jnp.bitwise_xor), "__lshift__": jnp.left_shift,
    "__rlshift__": _swap(jnp.left_shift), "__rshift__": jnp.right_shift, "__rrshift__": _swap(jnp.right_shift),
    "__eq__": jnp.equal, "__ne__": jnp.not_equal, "__lt__": jnp.less, "__le__": jnp.less_equal,
    "__gt__": jnp.greater, "__ge__": jnp.greater_equal, "__neg__": jnp.negative, "__pos__": jnp.positive,
    "__abs__": jnp.absolute, "__invert__": jnp.invert, "__getitem__": jnp.getitem,
    "__divmod__": jnp.divmod, "__rdivmod__": _swap(jnp.divmod),
    "__round__": lambda x, ndigits=None: (jnp.round(x, ndigits or 0) if ndigits is not None  # round(x) is an int,
                                          else jnp.astype(jnp.round(x), int)),  # as for a Python float
    "__contains__": lambda x, value: jnp.any(jnp.equal(x, value)),
    "__copy__": lambda x: x, "__deepcopy__": lambda x, memo: x,  # arrays are immutable
}

_METHODS = {
    "sum": jnp.sum, "prod": jnp.prod, "max": jnp.max, "min": jnp.min, "mean": jnp.mean, "var": jnp.var,
    "std": jnp.std, "any": jnp.any, "all": jnp.all, "argmax": jnp.argmax, "argmin": jnp.argmin,
    "cumsum": jnp.cumsum, "cumprod": jnp.cumprod, "astype": jnp.astype, "ravel": jnp.ravel, "flatten": jnp.ravel,
    "squeeze": jnp.squeeze, "clip": jnp.clip, "round": jnp.round, "conj": jnp.conjugate,
    "conjugate": jnp.conjugate, "dot": jnp.dot, "swapaxes": jnp.swapaxes, "take": jnp.take, "sort": jnp.sort,
    "argsort": jnp.argsort, "repeat": jnp.repeat, "diagonal": jnp.diagonal, "trace": jnp.trace,
    "nonzero": jnp.nonzero, "ptp": jnp.ptp, "searchsorted": jnp.searchsorted, "copy": jnp.copy,
    "compress": lambda x, condition, axis=None: jnp.compress(condition, x, axis),
}


def _reshape(self, *shape: Any, order: str = "C") -> Any:
    return jnp.reshape(self, _shape_args(shape), order=order)


def _transpose(self, *axes: Any) -> Any:
    return jnp.transpose(self, None if not axes else _shape_args(axes))


def _view(self, dtype: Any = None, type: Any = None) -> Any:  # noqa: A002  (NumPy's parameter names)
    """The array's bits read as `dtype`, as NumPy's view: a narrower type multiplies the last dimension, a wider one
    divides it."""
    import numpy as np

    from ..lax.special import bitcast_convert_type

    if type is not None:
        raise NotImplementedError("view(type=...) is not supported: meshax arrays have one array type.")
    if dtype is None:
        return self
    new, old = np.dtype(dtype), np.dtype(self.dtype)
    if new.itemsize == old.itemsize:
        return bitcast_convert_type(self, new)
    if not self.ndim:
        raise ValueError(f"view of a 0-d {old} array as {new} (another item size) needs at least one dimension.")
    if new.itemsize < old.itemsize:
        words = bitcast_convert_type(self, new)
        return jnp.reshape(words, self.shape[:-1] + (self.shape[-1] * (old.itemsize // new.itemsize),))
    ratio = new.itemsize // old.itemsize
    if self.shape[-1] % ratio:
        raise ValueError(f"view of a {old} array of shape {self.shape} as {new}: the last dimension must be a "
                         f"multiple of {ratio}.")
    return bitcast_convert_type(jnp.reshape(self, self.shape[:-1] + (self.shape[-1] // ratio, ratio)), new)


def _iter(self):
    if not self.shape:
        raise TypeError("iteration over a 0-d array")
    return (jnp.getitem(self, i) for i in range(self.shape[0]))


def install(cls: type) -> None:
    for name, function in {**_OPERATORS, **_METHODS}.items():
        setattr(cls, name, function)
    cls.__hash__ = None
    cls.reshape = _reshape
    cls.transpose = _transpose
    cls.view = _view
    cls.__iter__ = _iter
    cls.T = property(lambda self: jnp.transpose(self))
    cls.mT = property(lambda self: jnp.matrix_transpose(self))
    cls.real = property(lambda self: jnp.real(self))
    cls.imag = property(lambda self: jnp.imag(self))
    cls.at = property(lambda self: jnp._IndexUpdateHelper(self))
    cls.__array_namespace__ = lambda self, api_version=None: __import__("meshax.numpy").numpy
    cls.is_ready = lambda self: True
    if not hasattr(cls, "is_deleted"):  # Array has its own; tracers are never deleted
        cls.is_deleted = lambda self: False
    cls.tobytes = lambda self, order="C": self.__array__().tobytes(order)


install(Array)
install(Tracer)
