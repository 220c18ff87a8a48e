"""Interpolation on a regular grid (as jax.scipy.interpolate): RegularGridInterpolator, linear or nearest."""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .. import numpy as jnp
from ..core import dtypes
from ..numpy import _promote_inexact
from ..tree.registry import register_pytree_node

_METHODS = ("linear", "nearest")


def _check_method(method: str) -> None:
    if method not in _METHODS:
        raise ValueError(f"method {method!r} is not defined; pass 'linear' or 'nearest'.")


def _points_array(xi: Any, ndim: int) -> Any:
    """Sample points as one (..., ndim) array: a tuple of coordinate arrays is stacked along a new last axis."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        parts = jnp.broadcast_arrays(*[jnp.asarray(p) for p in xi])
        return jnp.stack([p.astype(dtypes.default_float_dtype()) for p in parts], axis=-1)
    xi = jnp.asarray(xi)
    return jnp.reshape(xi, (-1, ndim)) if xi.ndim == 1 else xi


class RegularGridInterpolator:
    """Interpolation of `values` on the rectangular grid whose axes are `points` (each strictly increasing):
    calling it on sample points returns the interpolated values, `fill_value` (NaN by default; None
    extrapolates) outside the grid."""

    def __init__(self, points: Any, values: Any, method: str = "linear", bounds_error: bool = False,
                 fill_value: Any = np.nan) -> None:
        _check_method(method)
        self.method = method
        self.bounds_error = bounds_error
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT; pass bounds_error=False.")
        values = jnp.asarray(values)
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has {values.ndim} dimensions")
        (values,) = _promote_inexact(values)
        if fill_value is not None:
            fill_value = jnp.asarray(fill_value)
            if not np.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError(f"fill_value must be either 'None' or of a type compatible with values, got dtype "
                                 f"{fill_value.dtype} for values of dtype {values.dtype}.")
        self.fill_value = fill_value
        self.grid = tuple(jnp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi: Any, method: str | None = None) -> Any:
        """The interpolated values at the sample points xi (shape (..., ndim), or a tuple of coordinate arrays)."""
        method = self.method if method is None else method
        _check_method(method)
        ndim = len(self.grid)
        xi = _points_array(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, but this "
                             f"RegularGridInterpolator has dimension {ndim}")
        lead = xi.shape[:-1]
        xi = jnp.reshape(xi, (-1, ndim))
        indices, fractions, outside = self._locate(xi)
        result = self._linear(indices, fractions) if method == "linear" else self._nearest(indices, fractions)
        if self.fill_value is not None:
            mask = jnp.reshape(outside, outside.shape + (1,) * (result.ndim - 1))
            result = jnp.where(mask, self.fill_value, result)
        return jnp.reshape(result, lead + self.values.shape[ndim:])

    def _locate(self, xi: Any) -> tuple[list[Any], list[Any], Any]:
        """Per axis, the cell index below each point and the point's fraction of the way across the cell; and
        whether each point lies outside the grid."""
        indices, fractions = [], []
        outside = jnp.zeros((xi.shape[0],), dtype=bool)
        for x, g in zip(jnp.moveaxis(xi, -1, 0), self.grid):
            i = jnp.clip(jnp.searchsorted(g, x) - 1, 0, g.size - 2)
            indices.append(i)
            fractions.append((x - g[i]) / (g[i + 1] - g[i]))
            outside = outside | (x < g[0]) | (x > g[-1])
        return indices, fractions, outside

    def _linear(self, indices: list[Any], fractions: list[Any]) -> Any:
        """The values' multilinear interpolation: a weighted sum over the 2**ndim corners of each cell."""
        trailing = (slice(None),) + (None,) * (self.values.ndim - len(indices))
        total = jnp.asarray(0.0)
        for upper in itertools.product((False, True), repeat=len(indices)):
            weight = jnp.asarray(1.0)
            for up, f in zip(upper, fractions):
                weight = weight * (f if up else 1 - f)
            corner = tuple(i + 1 if up else i for up, i in zip(upper, indices))
            total = total + self.values[corner] * weight[trailing]
        return total

    def _nearest(self, indices: list[Any], fractions: list[Any]) -> Any:
        """The values at the nearest grid node (a tie goes to the lower node)."""
        return self.values[tuple(jnp.where(f <= 0.5, i, i + 1) for i, f in zip(indices, fractions))]


register_pytree_node(
    RegularGridInterpolator,
    lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
    lambda aux, children: RegularGridInterpolator(children[0], children[1], aux[0], aux[1], children[2]),
)
