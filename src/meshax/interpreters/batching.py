"""Batching (vmap) rule tables (as jax.interpreters.batching).

`primitive_batchers[p] = rule(batched_args, batch_dims, **params) -> (out, out_dims)` is meshax's own table;
`not_mapped` (None) marks an unbatched operand. Rules registered in `axis_primitive_batchers` get the mapped axis'
size first, as an `AxisData`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from meshax._src.core.core import aval_of
from meshax._src.interpreters.batching import batching_rules, not_mapped
from meshax._src.primitives.batch_dims import move_to, move_to_front

__all__ = ["AxisData", "axis_primitive_batchers", "bdim_at_front", "broadcast", "defbroadcasting", "defvectorized",
           "moveaxis", "not_mapped", "primitive_batchers"]

primitive_batchers = batching_rules


@dataclass(frozen=True)
class AxisData:
    """The mapped axis a rule of `axis_primitive_batchers` batches over."""

    name: Any
    size: int
    spmd_name: Any = None


class _AxisBatchers(dict):
    """Rules `rule(axis_data, args, dims, **params)`, registered into meshax's batching table."""

    def __setitem__(self, primitive: Any, rule: Callable[..., Any]) -> None:
        super().__setitem__(primitive, rule)

        def batched(values: list[Any], dims: list[Any], **params: Any) -> Any:
            size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
            return rule(AxisData(None, size), values, dims, **params)

        batching_rules[primitive] = batched


axis_primitive_batchers = _AxisBatchers()


def bdim_at_front(x: Any, bdim: int | None, size: int) -> Any:
    """`x` with its batch dimension first (broadcast to `size` when it has none)."""
    return move_to_front(x, bdim, size)


def moveaxis(x: Any, src: int, dst: int) -> Any:
    return move_to(x, src, dst)


def broadcast(x: Any, size: int, axis: int) -> Any:
    """`x` with a new dimension of `size` at `axis`."""
    from meshax import numpy as jnp

    return jnp.broadcast_to(jnp.expand_dims(x, axis), (*x.shape[:axis], size, *x.shape[axis:]))


def defvectorized(primitive: Any) -> None:
    """An elementwise primitive of one operand: it applies to the batched value as is."""
    batching_rules[primitive] = lambda values, dims, **params: (primitive.bind(*values, **params), dims[0])


def defbroadcasting(primitive: Any) -> None:
    """An elementwise primitive of several operands of one shape: batch dimensions are moved to the front."""

    def rule(values: list[Any], dims: list[Any], **params: Any) -> Any:
        size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
        return primitive.bind(*[move_to_front(v, d, size) for v, d in zip(values, dims)], **params), 0

    batching_rules[primitive] = rule


def __getattr__(name: str):
    """Names of jax.interpreters.batching that meshax does not have yet raise NotImplementedError (others AttributeError)."""
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.interpreters.batching", name)
