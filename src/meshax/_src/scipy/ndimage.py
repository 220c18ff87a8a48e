"""Image interpolation (as jax.scipy.ndimage): map_coordinates of order 0 (nearest) or 1 (linear)."""
from __future__ import annotations

import functools
import itertools
import operator
from typing import Any, Callable, Sequence

import numpy as np

from .. import numpy as jnp
from ..lax import lax_ops as _lax


def _mirror(index: Any, size: int) -> Any:
    """Indices reflected about the end points (…, 2, 1, 0, 1, 2, …), as a triangular wave of period 2(size-1)."""
    half = size - 1
    return jnp.abs((index + half) % (2 * half) - half) if half > 0 else jnp.zeros_like(index)


def _reflect(index: Any, size: int) -> Any:
    """Indices reflected about the array's edges (…, 1, 0, 0, 1, …): the mirror wave on a doubled grid."""
    return jnp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_MODES: dict[str, Callable[[Any, int], Any]] = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round(x: Any) -> Any:
    """x rounded half away from zero (integers unchanged)."""
    return x if jnp.issubdtype(x.dtype, np.integer) else _lax.round(x)


def _nodes(coordinate: Any, order: int) -> list[tuple[Any, Any]]:
    """The (index, weight) pairs interpolating at `coordinate` along one axis."""
    if order == 0:
        return [(_round(coordinate).astype(np.int32), coordinate.dtype.type(1))]
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input: Any, coordinates: Sequence[Any], order: int, mode: str = "constant",  # noqa: A002
                    cval: Any = 0.0) -> Any:
    """`input` interpolated (order 0: nearest, 1: linear) at the points whose i-th coordinates are
    coordinates[i]; points outside follow `mode` ('constant' reads `cval`)."""
    values = jnp.asarray(input)
    coords = [jnp.asarray(c) for c in coordinates]
    cval = jnp.asarray(cval, values.dtype)
    if len(coords) != values.ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but {len(coords)} != "
                         f"{values.ndim}.")
    fix = _MODES.get(mode)
    if fix is None:
        raise NotImplementedError(f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
                                  f"Currently supported modes are {set(_MODES)}.")
    if order not in (0, 1):
        raise NotImplementedError(f"jax.scipy.ndimage.map_coordinates currently requires order<=1, got "
                                  f"order={order}.")
    per_axis = []
    for coordinate, size in zip(coords, values.shape):
        per_axis.append([(fix(index, size), (0 <= index) & (index < size) if mode == "constant" else None, weight)
                         for index, weight in _nodes(coordinate, order)])
    terms = []
    for corner in itertools.product(*per_axis):
        indices, valid, weights = zip(*corner)
        picked = values[tuple(indices)]
        if mode == "constant":
            picked = jnp.where(functools.reduce(operator.and_, valid), picked, cval)
        terms.append(functools.reduce(operator.mul, weights) * picked)
    result = functools.reduce(operator.add, terms)
    if jnp.issubdtype(values.dtype, np.integer):
        result = _round(result)
    return result.astype(values.dtype)
