"""jnp.ufunc: the elementwise functions JAX makes ufunc objects (add, maximum, logical_or, ...) with NumPy's
methods (reduce, accumulate, outer, at, reduceat) and attributes (nin, nout, nargs, identity), and frompyfunc,
which makes one of any scalar function. Calling one costs a method call over the plain function."""
from __future__ import annotations

import builtins
import operator
from typing import Any, Callable

import numpy as np

from ..core.core import aval_of
from ..core.dtypes import promote_types
from .promotion import ArrayLike, _cast, _dtype, _lift, _weak
from .ufunc_methods import fold, front, mapped, scatter_each, segments, sequential_scan
from .shape_ops import broadcast_to, expand_dims, moveaxis, reshape
from .creation import asarray, full

__all__ = ["frompyfunc", "ufunc"]

_AT_INPLACE = ("JAX arrays are immutable, so ufunc.at cannot update in place: pass inplace=False and use the "
               "returned array, e.g. arr = jnp.add.at(arr, indices, values, inplace=False).")


class ufunc:
    """A NumPy-style universal function over meshax arrays (as jax.numpy.ufunc)."""

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity: Any = None, call: Callable[..., Any] | None = None,
                 reduce: Callable[..., Any] | None = None, accumulate: Callable[..., Any] | None = None,
                 at: Callable[..., Any] | None = None, reduceat: Callable[..., Any] | None = None) -> None:
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        self._props = (func, operator.index(nin), operator.index(nout), operator.index(nargs or nin), identity,
                       call, reduce, accumulate, at, reduceat)
        self._call = call or (lambda *args: mapped(func, args, self.nout))
        self._reduce, self._accumulate, self._at, self._reduceat = reduce, accumulate, at, reduceat

    nin = property(lambda self: self._props[1])
    nout = property(lambda self: self._props[2])
    nargs = property(lambda self: self._props[3])
    identity = property(lambda self: self._props[4])

    def __hash__(self) -> int:
        return hash((self.__name__,) + tuple(map(id, self._props)))

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, ufunc) and self.__name__ == other.__name__
                and builtins.all(x is y for x, y in zip(self._props, other._props)))

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args: ArrayLike, out: None = None, where: None = None) -> Any:
        if out is not None:
            raise NotImplementedError(f"out argument of {self}: JAX arrays are immutable; use the returned array.")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}: use jnp.where(mask, {self.__name__}(...), other).")
        return self._call(*args)

    def _binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def reduce(self, a: ArrayLike, axis: int | None = 0, dtype: Any = None, out: None = None, keepdims: bool = False,
               initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Any:
        """`a` reduced along `axis` (None: all axes) by this function, starting at `initial` if given; `where`
        picks the elements taken (it needs an identity or `initial`)."""
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if where is not None:
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an identity, so to use a "
                                 "where mask one has to specify 'initial'.")
            if aval_of(asarray(where)).dtype != np.bool_:
                raise ValueError(f"where argument must have dtype=bool; got dtype={aval_of(asarray(where)).dtype}")
        if axis is not None and np.ndim(a) == 0:
            raise ValueError(f"axis {axis} is out of bounds for array of dimension 0")
        reduce = self._reduce or self._reduce_in_order
        return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def _result_dtype(self, kind: np.dtype) -> np.dtype:
        """The type of this function's result on two values of type `kind`."""
        probe = full((), 0, kind)
        return aval_of(self._call(probe, probe)).dtype

    def _scan_typed(self, a: Any, dtype: Any, infer: bool = True) -> tuple[Any, Callable[[Any, Any], Any]]:
        """`a` in the type a scan of this function carries (`dtype`, else with `infer` the function's result type on
        two of `a`'s elements, else `a`'s), and the step that keeps that type; TypeError when the step's result
        does not promote into it, as for JAX's scans."""
        a = asarray(a)
        kind = _dtype(dtype) if dtype is not None else self._result_dtype(aval_of(a).dtype) if infer else \
            aval_of(a).dtype
        result = self._result_dtype(kind)
        if promote_types(kind, result) != kind:
            raise TypeError(f"{self.__name__} of two {kind} values is {result}, so a scan cannot carry it as {kind}; "
                            f"pass dtype={result.name} (or an input of that type).")
        return _cast(a, kind, False), lambda carry, x: _cast(self._call(carry, x), kind, False)

    def _reduce_in_order(self, a: ArrayLike, axis: Any = 0, dtype: Any = None, keepdims: bool = False,
                         initial: Any = None, where: Any = None) -> Any:
        """The left fold of the elements along `axis`, one slice at a time (any binary function), from `initial`
        or else the identity, if there is one."""
        a, step = self._scan_typed(a, dtype)
        x, axis_ = front(a, axis)
        mask = None if where is None else front(broadcast_to(asarray(where), a.shape), axis)[0]
        result = fold(step, x, mask, self.identity if initial is None else initial, self.__name__)
        if keepdims:
            result = reshape(result, (1,) * a.ndim) if axis is None else expand_dims(result, axis_)
        return result

    def accumulate(self, a: ArrayLike, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """The running results of this function along `axis` (the first element first)."""
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self._accumulate or self._accumulate_in_order
        return accumulate(a, axis=axis, dtype=dtype)

    def _accumulate_in_order(self, a: ArrayLike, axis: int = 0, dtype: Any = None) -> Any:
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        a, step = self._scan_typed(a, dtype)
        x, axis = front(a, axis)
        return moveaxis(sequential_scan(step, x), 0, axis)

    def outer(self, A: ArrayLike, B: ArrayLike, /) -> Any:
        """This function of every pair (A[i...], B[j...]), of shape A.shape + B.shape."""
        self._binary("outer")
        A, B = asarray(A), asarray(B)
        return self(reshape(A, A.shape + (1,) * B.ndim), B)

    def at(self, a: ArrayLike, indices: Any, b: ArrayLike | None = None, /, *, inplace: bool = True) -> Any:
        """`a` with each indexed element replaced by this function of it (and of `b`); repeated indices apply
        again. inplace=False is required."""
        if inplace:
            raise NotImplementedError(_AT_INPLACE)
        args = () if b is None else (b,)
        if len(args) != self.nin - 1:
            raise TypeError(f"{self.__name__}.at takes {self.nin - 1} value argument(s) after the indices; got "
                            f"{len(args)}.")
        if self._at is not None:
            return self._at(a, indices, *args)
        return self._at_in_order(a, indices, args)

    def _at_in_order(self, a: ArrayLike, indices: Any, args: tuple) -> Any:
        """at() one index at a time, everything in the type of this function's result on `a` (and `b`)."""
        values = [_lift(x) for x in (a,) + args]
        probes = [_cast(full((), 1, aval_of(x).dtype), aval_of(x).dtype, _weak(x)) for x in values]
        kind = aval_of(self._call(*probes)).dtype
        return scatter_each(self._call, _cast(asarray(a), kind), indices, [_cast(asarray(v), kind) for v in args])

    def reduceat(self, a: ArrayLike, indices: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """Reductions of the slices a[indices[i]:indices[i+1]] along `axis` (a[indices[i]] where that is empty)."""
        self._binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        a, indices = asarray(a), asarray(indices)
        if a.ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got a.shape={a.shape}")
        if indices.ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got indices.shape={indices.shape}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        a, step = self._scan_typed(a, dtype, infer=False)
        x, axis = front(a, axis)
        return moveaxis(segments(step, x, indices), 0, axis)


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A ufunc that applies the scalar function `func` (of `nin` arguments, `nout` results) elementwise."""
    return ufunc(func, nin=nin, nout=nout, identity=identity)
