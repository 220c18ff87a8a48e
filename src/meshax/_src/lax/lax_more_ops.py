"""jax.lax's remaining contractions and helpers: conv_general_dilated_local (a convolution whose kernel differs at
each output position), conv_transpose_shape_tuple, scaled_dot (block-scaled operands, as XLA's CPU decomposition
computes it: in bfloat16) and the ordering tokens create_token and after_all."""
from __future__ import annotations

from typing import Any, Sequence

import ml_dtypes
import numpy as np

from ..core.core import aval_of
from ..tree.registry import register_pytree_node
from .conv import _transpose_padding, conv_dimension_numbers, conv_general_dilated_patches, \
    conv_general_permutations
from .lax_ops import _jnp, _lift, dot_general

__all__ = ["after_all", "conv_general_dilated_local", "conv_transpose_shape_tuple", "create_token",
           "scaled_dot"]


# ---- tokens ----------------------------------------------------------------------------------------------------------


class Token:
    """An ordering token (as jax.lax's): meshax runs effects in program order, so a token carries nothing; it is a
    pytree without leaves, so functions under jit may take and return it."""

    def __repr__(self) -> str:
        return "Token()"


register_pytree_node(Token, lambda token: ((), None), lambda _, children: Token())


def create_token(_: Any = None) -> Token:
    """A new ordering token (the argument is ignored, as in JAX)."""
    return Token()


def after_all(*operands: Any) -> Token:
    """A token ordered after all of `operands`, which must be tokens."""
    if not all(isinstance(token, Token) for token in operands):
        raise TypeError("Arguments to after_all must be tokens")
    return Token()


# ---- convolutions ------------------------------------------------------------------------------------------------


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of conv_transpose of `lhs_shape` by `rhs_shape` in the layout of `dimension_numbers`."""
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs = [int(lhs_shape[d]) for d in lhs_perm]
    rhs = [int(rhs_shape[d]) for d in rhs_perm]
    if isinstance(padding, str):
        padding = [_transpose_padding(k, s, padding) for k, s in zip(rhs[2:], window_strides)]
    totals = [int(np.sum(p)) for p in padding]
    spatial = [(i - 1) * s - k + 2 + p for i, k, s, p in zip(lhs[2:], rhs[2:], window_strides, totals)]
    canonical = (lhs[0], rhs[0], *spatial)
    return tuple(canonical[int(j)] for j in np.argsort(out_perm))


def conv_general_dilated_local(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                               filter_shape: Sequence[int], lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                               precision: Any = None) -> Any:
    """The unshared (locally connected) convolution, as jax.lax.conv_general_dilated_local: `rhs`'s spatial
    dimensions are the output positions and its I dimension the input features times the window positions
    (feature-major), each output position contracting its own patch with its own kernel."""
    jnp = _jnp()
    lhs, rhs = _lift(lhs), _lift(rhs)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
                                           dimension_numbers, precision=precision)
    nd = aval_of(lhs).ndim
    _, rhs_spec, out_spec = conv_dimension_numbers(aval_of(lhs).shape, (1, 1, *filter_shape), dimension_numbers)
    out_spatial, rhs_spatial = list(out_spec[2:]), list(rhs_spec[2:])
    order = sorted(range(len(out_spatial)), key=lambda k: out_spatial[k])
    numbers = (((out_spec[1],), (rhs_spec[1],)), (tuple(out_spatial[k] for k in order),
                                                  tuple(rhs_spatial[k] for k in order)))
    out = dot_general(patches, rhs, numbers, precision=precision)  # (spatial sorted..., N, O)
    return jnp.moveaxis(out, (nd - 2, nd - 1), (out_spec[0], out_spec[1]))


# ---- scaled_dot ------------------------------------------------------------------------------------------------------


def _scaled(x: Any, scale: Any, contracting: Sequence[int]) -> Any:
    """`x` in bfloat16 times its block scale (each scale entry repeated over its block of the contracting
    dimensions), rounded to bfloat16, as XLA's CPU decomposition of scaled_dot computes it."""
    jnp = _jnp()
    x = jnp.asarray(x, ml_dtypes.bfloat16)
    if scale is None:
        return x
    scale = jnp.asarray(scale, ml_dtypes.bfloat16)
    x_shape, s_shape = aval_of(x).shape, aval_of(scale).shape
    if len(x_shape) != len(s_shape):
        raise TypeError(f"scaled_dot scale must have the operand's rank; got shapes {tuple(s_shape)} and "
                        f"{tuple(x_shape)}.")
    for d, (n, m) in enumerate(zip(x_shape, s_shape)):
        if d in contracting:
            if m == 0 or n % m:
                raise TypeError(f"scaled_dot: the operand's contracting dimension {d} (size {n}) must be a multiple "
                                f"of the scale's (size {m}).")
            scale = jnp.repeat(scale, n // m, axis=d)
        elif n != m:
            raise TypeError(f"scaled_dot: the scale's dimension {d} must match the operand's ({n}); got {m}.")
    return jnp.multiply(x, scale)


def scaled_dot(lhs: Any, rhs: Any, *, lhs_scale: Any = None, rhs_scale: Any = None,
               dimension_numbers: Any = None, preferred_element_type: Any = None) -> Any:
    """(lhs * lhs_scale) @ (rhs * rhs_scale) with block scales along the contracting dimensions (as
    jax.lax.scaled_dot), in bfloat16 operands and a `preferred_element_type` (bfloat16 by default) result."""
    lhs, rhs = _lift(lhs), _lift(rhs)
    if dimension_numbers is None:
        if aval_of(lhs).ndim == 3:
            dimension_numbers = (((2,), (1,)), ((0,), (0,)))
        else:
            dimension_numbers = (((1,), (0,)), ((), ()))
    (lc, rc), _ = dimension_numbers
    out_type = ml_dtypes.bfloat16 if preferred_element_type is None else preferred_element_type
    return dot_general(_scaled(lhs, lhs_scale, lc), _scaled(rhs, rhs_scale, rc), dimension_numbers,
                       preferred_element_type=out_type)
