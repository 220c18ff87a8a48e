"""jax.lax's remaining collectives, composed from meshax's own (inside shard_map): pshuffle (ppermute by sources),
pbroadcast (one device's value to all), psum_scatter_start (psum_scatter, completed at once) and ragged_all_to_all
(slices of ragged rows sent to the devices along an axis, written at the offsets their senders chose)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import numpy as jnp
from ..core.dtypes import issubdtype
from ..core.core import aval_of, axis_size
from ..tree.tree_util import tree_map
from .parallel import _names, all_gather, axis_index, ppermute, psum_scatter

__all__ = ["pbroadcast", "pshuffle", "psum_scatter_start", "ragged_all_to_all"]


def pshuffle(x: Any, axis_name: Any, perm: Sequence[int]) -> Any:
    """The value of device perm[i] along `axis_name` at device i (as jax.lax.pshuffle): ppermute with the
    permutation given by its sources."""
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, [(source, target) for target, source in enumerate(perm)])


def pbroadcast(x: Any, axis_name: Any, source: Any) -> Any:
    """Every device along `axis_name` gets the value of device `source` (a Python int or an int32 scalar), as
    jax.lax.pbroadcast."""
    if not isinstance(source, int):
        source = jnp.asarray(source)
        if aval_of(source).dtype != np.int32:
            raise TypeError(f"pbroadcast dynamic source must be an i32 array, got {aval_of(source).dtype}")
        if aval_of(source).shape != ():
            raise ValueError(f"pbroadcast dynamic source must be a scalar, got shape {aval_of(source).shape}")
    return tree_map(lambda leaf: jnp.take(all_gather(leaf, axis_name), source, axis=0), x)


def psum_scatter_start(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                       tiled: bool = False) -> Any:
    """psum_scatter begun asynchronously in JAX; meshax's collectives complete when called, so this returns the
    reduced and scattered values themselves."""
    return psum_scatter(x, axis_name, scatter_dimension=scatter_dimension, axis_index_groups=axis_index_groups,
                        tiled=tiled)


def _check_ragged(operand: Any, output: Any, counts: Sequence[Any], n: int) -> int:
    """The number of slices each device sends to each other device (JAX's checks on the arguments)."""
    if aval_of(operand).ndim < 1 or aval_of(operand).ndim != aval_of(output).ndim or \
            tuple(aval_of(operand).shape[1:]) != tuple(aval_of(output).shape[1:]):
        raise ValueError(f"ragged_all_to_all operand and output must have the same rank >= 1 and the same "
                         f"trailing dimensions; got {tuple(aval_of(operand).shape)} and "
                         f"{tuple(aval_of(output).shape)}.")
    if aval_of(operand).dtype != aval_of(output).dtype:
        raise ValueError(f"ragged_all_to_all operand and output dtypes must match; got {aval_of(operand).dtype} and "
                         f"{aval_of(output).dtype}.")
    shapes = {tuple(aval_of(c).shape) for c in counts}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"ragged_all_to_all input_offsets, send_sizes, output_offsets and recv_sizes must be 1-D "
                         f"arrays of one length; got shapes {sorted(shapes)}.")
    for c in counts:
        if not issubdtype(aval_of(c).dtype, np.integer):
            raise ValueError(f"ragged_all_to_all offsets and sizes must be integers; got {aval_of(c).dtype}.")
    length = next(iter(shapes))[0]
    if length % n:
        raise ValueError(f"ragged_all_to_all needs the offsets' length ({length}) to be a multiple of the axis "
                         f"size ({n}).")
    return length // n


def ragged_all_to_all(operand: Any, output: Any, input_offsets: Any, send_sizes: Any, output_offsets: Any,
                      recv_sizes: Any, *, axis_name: Any, axis_index_groups: Any = None) -> Any:
    """Slices of `operand`'s rows (input_offsets[i], send_sizes[i]) sent to device i // (K / axis size) and written
    into its `output` at output_offsets[i]; rows nobody writes keep `output`'s values (as jax.lax.ragged_all_to_all,
    inside shard_map)."""
    if axis_index_groups is not None:
        raise NotImplementedError("ragged_all_to_all with axis_index_groups is not supported; split the mesh axis.")
    operand, output = jnp.asarray(operand), jnp.asarray(output)
    counts = [jnp.asarray(c) for c in (input_offsets, send_sizes, output_offsets, recv_sizes)]
    n = axis_size(_names(axis_name), "ragged_all_to_all")
    per_device = _check_ragged(operand, output, counts, n)
    rows = all_gather(operand, axis_name)  # (n, N, ...): every sender's rows
    first = axis_index(axis_name) * per_device
    mine = [jnp.take(all_gather(c, axis_name), first + jnp.arange(per_device), axis=1) for c in counts[:3]]
    starts, sizes, targets = (jnp.reshape(m, (-1,)) for m in mine)  # (n * per_device,): slices sent to me
    r = jnp.arange(aval_of(output).shape[0])[:, None]
    hit = (r >= targets[None, :]) & (r < targets[None, :] + sizes[None, :])  # (M, slices)
    which = jnp.argmax(hit, axis=1)
    sender = which // per_device
    source_row = jnp.take(starts, which) + jnp.arange(aval_of(output).shape[0]) - jnp.take(targets, which)
    received = rows[sender, jnp.clip(source_row, 0, aval_of(operand).shape[0] - 1)]
    written = jnp.reshape(jnp.any(hit, axis=1), (-1,) + (1,) * (aval_of(output).ndim - 1))
    return jnp.where(written, received, output)
