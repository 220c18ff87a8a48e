"""Batch dimensions moved, made and stacked with the structural primitives, and the batching rule of a primitive
without one (run once per batch element, results stacked), installed into the batching interpreter."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..core.core import Primitive, aval_of
from ..interpreters.batching import set_fallback_rule
from . import array_primitives as P


def move_to_front(x: Any, dim: int | None, size: int) -> Any:
    """`x` with its batch dimension first (broadcast to `size` if it has none)."""
    aval = aval_of(x)
    if dim is None:
        return P.broadcast_in_dim.bind(x, shape=(size,) + tuple(aval.shape),
                                       broadcast_dimensions=tuple(range(1, aval.ndim + 1)))
    if dim == 0:
        return x
    permutation = (dim,) + tuple(d for d in range(aval.ndim) if d != dim)
    return P.transpose.bind(x, permutation=permutation)


def move_to(x: Any, dim: int, target: int) -> Any:
    """`x` with its batch dimension moved from `dim` to `target`."""
    if dim == target:
        return x
    order = [d for d in range(aval_of(x).ndim) if d != dim]
    order.insert(target, dim)
    return P.transpose.bind(x, permutation=tuple(order))


def per_element(primitive: Primitive) -> Callable[..., Any]:
    """The fallback rule: the primitive once per batch element, results stacked along a new first dimension."""
    def rule(values: list[Any], dims: list[Any], **params: Any) -> tuple[Any, Any]:
        size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
        rows = []
        for b in range(size):
            sliced = [v if d is None else P.static_slice.bind(v, index=(slice(None),) * d + (b,))
                      for v, d in zip(values, dims)]
            out = primitive.bind(*sliced, **params)
            rows.append(out if primitive.multiple_results else [out])
        stacked = [_stack([row[k] for row in rows]) for k in range(len(rows[0]))]
        if primitive.multiple_results:
            return stacked, [0] * len(stacked)
        return stacked[0], 0

    return rule


def _stack(values: Sequence[Any]) -> Any:
    rows = [P.reshape.bind(v, new_sizes=(1,) + tuple(aval_of(v).shape)) for v in values]
    return rows[0] if len(rows) == 1 else P.concatenate.bind(*rows, axis=0)


set_fallback_rule(per_element)
