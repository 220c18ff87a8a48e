"""Shapes without data: ``ShapeDtypeStruct`` and ``eval_shape`` (as in JAX).

A ``ShapeDtypeStruct`` has ``shape``, ``dtype`` and ``weak_type`` like an array, so the
tracing machinery (``core.aval_of``) takes it as an abstract argument: ``eval_shape`` and
``make_jaxpr`` trace functions on such values without any array data.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.core import HasShape, aval_of
from ..interpreters.staging import trace_to_jaxpr
from ..tree.tree_util import tree_flatten, tree_unflatten

__all__ = ["ShapeDtypeStruct", "eval_shape"]


class ShapeDtypeStruct(HasShape):
    """The shape, dtype (and optionally sharding and weak type) of an array, without its data."""

    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape: Any, dtype: Any, *, sharding: Any = None, weak_type: bool = False,
                 **_ignored: Any) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.dtype = None if dtype is None else np.dtype(dtype)
        self.sharding = sharding
        self.weak_type = bool(weak_type)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        dtype = self.dtype.name if self.dtype is not None else None
        sharding = f", sharding={self.sharding!r}" if self.sharding is not None else ""
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={dtype}{sharding}{weak})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShapeDtypeStruct):
            return False
        return (self.shape, self.dtype, self.sharding, self.weak_type) == \
            (other.shape, other.dtype, other.sharding, other.weak_type)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.sharding, self.weak_type))

    @classmethod
    def like(cls, x: Any) -> "ShapeDtypeStruct":
        """The shape, dtype, weak type (and, for a committed Array, sharding) of `x`."""
        from ..arrays.array import Array
        from ..core.dtypes import canonicalize_dtype

        if isinstance(x, ShapeDtypeStruct):
            return cls(x.shape, x.dtype, sharding=x.sharding, weak_type=x.weak_type)
        aval = aval_of(x)
        sharding = x.sharding if isinstance(x, Array) and x.committed else None
        return cls(aval.shape, canonicalize_dtype(aval.dtype), sharding=sharding, weak_type=aval.weak_type)

    def update(self, **changes: Any) -> "ShapeDtypeStruct":
        """A copy with some of shape, dtype, sharding, weak_type replaced."""
        fields = {"shape": self.shape, "dtype": self.dtype, "sharding": self.sharding, "weak_type": self.weak_type}
        fields.update(changes)
        return ShapeDtypeStruct(fields.pop("shape"), fields.pop("dtype"), **fields)


def _abstract_arg(x: Any) -> Any:
    """The aval of one argument leaf (an array, a tracer, a ShapeDtypeStruct or a host value)."""
    from ..core.dtypes import canonicalize_dtype

    aval = aval_of(x)
    dtype = canonicalize_dtype(aval.dtype)
    return aval if dtype == aval.dtype else aval.update(dtype=dtype)


def eval_shape(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The ShapeDtypeStructs of ``fun(*args, **kwargs)``'s outputs, found by tracing ``fun`` on the abstract
    values of its arguments (nothing is computed)."""
    leaves, structure = tree_flatten((args, kwargs))
    out_tree: list[Any] = []

    def flat(*xs: Any) -> list[Any]:
        call_args, call_kwargs = tree_unflatten(structure, list(xs))
        out_leaves, tree = tree_flatten(fun(*call_args, **call_kwargs))
        out_tree.append(tree)
        return out_leaves

    jaxpr, _ = trace_to_jaxpr(flat, [_abstract_arg(x) for x in leaves])
    outs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in (v.aval for v in jaxpr.outvars)]
    return tree_unflatten(out_tree[0], outs)
