"""A convolution's windows as one copy (im2col) and its transpose, the windows summed back (col2im).

`windows(x)` of x with leading dimensions, spatial dimensions `first`.. and one feature dimension last gives,
at every output position, the window's elements: (leading..., out..., K, C), K the window's positions in
row-major order, each window `dilation` apart within and `strides` apart between positions. It is one NumPy
copy of a strided view of x, written in the output's order (three times faster than concatenating the K
shifted slices on a 2-core host: 11 against 33 ms for a 3x3 window of 64x34x34x32). `windows_sum` adds each
window position's values back to where they came from, the transpose a gradient needs; it gives the unpadded
input's gradient, each block's padded sums cropped as they are made (a slice of the whole would leave a strided
view that the next elementwise pass reads 7 times slower: 3.5 against 0.5 ms).
Each of them works on blocks of leading indices (images) that it spreads over the threads the machine gives now
(compute_pool.spread; a CNN's training step on 2 quiet cores: 80-88 -> 60-67 ms; on a busy machine one thread).
In a program, the products of windows with a kernel or a gradient, and the sum of a product's windows, run as one
primitive each that never makes the whole windows (window_products.py).
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any, Sequence

import numpy as np

from ..core.core import ShapedArray, define_primitive
from ..runtime import compute_pool as device_pool
from ..sharding import placement_rules as rules


SUM_BLOCK_BYTES = 1 << 20  # measured on 2 cores: 27 ms against 37 summing a 3x3 window of 64x32x32x32 whole


def out_sizes(sizes: Sequence[int], window: Sequence[int], strides: Sequence[int],
              dilation: Sequence[int]) -> tuple[int, ...]:
    """How many windows fit along each dimension of `sizes` (a window of size 0 spans nothing)."""
    return tuple(max((n - (k and (k - 1) * d + 1)) // s + 1, 0)
                 for n, k, s, d in zip(sizes, window, strides, dilation))


def windows_out_sizes(shape: Sequence[int], first: int, window: Sequence[int], strides: Sequence[int],
                      dilation: Sequence[int], pads: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """How many windows fit along each window dimension (`first`..) of an array of `shape` padded by `pads`."""
    return out_sizes(padded_sizes(shape[first:first + len(window)], pads), window, strides, dilation)


def _windows_impl(x: np.ndarray, *, first: int, window: tuple[int, ...], strides: tuple[int, ...],
                  dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]) -> np.ndarray:
    last = first + len(window)
    out = windows_out_sizes(x.shape, first, window, strides, dilation, pads)
    copy = np.empty(x.shape[:first] + out + tuple(window) + x.shape[last:], x.dtype)
    padded = any(lo or hi for lo, hi in pads)

    def fill(part: slice) -> None:
        source = zero_padded(x[part], first, pads) if padded else x[part]  # a block padded in the cache
        np.copyto(copy[part], strided_windows(source, first, window, strides, dilation, out))

    device_pool.spread([functools.partial(fill, part) for part in _blocks(x, first)], device_pool.call_threads())
    return copy.reshape(x.shape[:first] + out + (math.prod(window),) + x.shape[last:])


def padded_sizes(sizes: Sequence[int], pads: Sequence[tuple[int, int]]) -> tuple[int, ...]:
    """The window dimensions' sizes once padded by `pads`."""
    return tuple(n + lo + hi for n, (lo, hi) in zip(sizes, pads))


def strided_windows(x: np.ndarray, first: int, window: tuple[int, ...], strides: tuple[int, ...],
                    dilation: tuple[int, ...], out: tuple[int, ...]) -> np.ndarray:
    """The windows of `x` as a read-only strided view (leading..., out..., window..., rest...)."""
    last = first + len(window)
    spatial = x.strides[first:last]
    return np.lib.stride_tricks.as_strided(
        x, x.shape[:first] + out + tuple(window) + x.shape[last:],
        x.strides[:first] + tuple(t * s for t, s in zip(spatial, strides)) +
        tuple(t * d for t, d in zip(spatial, dilation)) + x.strides[last:], writeable=False)


def zero_padded(x: np.ndarray, first: int, pads: Sequence[tuple[int, int]]) -> np.ndarray:
    """`x` with zeros around its window dimensions (`pads`' (low, high) each), made as one copy."""
    sizes = padded_sizes(x.shape[first:first + len(pads)], pads)
    out = np.empty(x.shape[:first] + sizes + x.shape[first + len(pads):], x.dtype)
    lead = (slice(None),) * first
    for d, (lo, hi) in enumerate(pads):
        before = (slice(None),) * d
        out[lead + before + (slice(0, lo),)] = 0
        out[lead + before + (slice(lo + x.shape[first + d], None),)] = 0
    out[_interior(x.shape, first, pads)] = x
    return out


def _interior(shape: Sequence[int], first: int, pads: Sequence[tuple[int, int]]) -> tuple[slice, ...]:
    """Where an array of `shape` lies in itself padded by `pads`."""
    return (slice(None),) * first + tuple(slice(lo, lo + shape[first + d]) for d, (lo, _) in enumerate(pads))


def _blocks(x: np.ndarray, first: int) -> list[slice]:
    """Blocks of leading indices of `x` of at most SUM_BLOCK_BYTES (so that a block, padded or summed into, stays in
    the cache), at least one per thread the machine gives; the whole array where there are no leading dimensions."""
    if not first or x.shape[0] < 2:
        return [slice(None)]
    step = max(1, min(-(-x.shape[0] // device_pool.call_threads()), SUM_BLOCK_BYTES // max(x[:1].nbytes, 1)))
    return [slice(start, start + step) for start in range(0, x.shape[0], step)]


def _windows_aval(x: ShapedArray, *, first: int, window: tuple[int, ...], strides: tuple[int, ...],
                  dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]) -> ShapedArray:
    last = first + len(window)
    out = windows_out_sizes(x.shape, first, window, strides, dilation, pads)
    return ShapedArray(x.shape[:first] + out + (math.prod(window),) + x.shape[last:], x.dtype, x.weak_type)


def _windows_sum_impl(y: np.ndarray, *, first: int, window: tuple[int, ...], strides: tuple[int, ...],
                      dilation: tuple[int, ...], sizes: tuple[int, ...], pads: tuple[tuple[int, int], ...]
                      ) -> np.ndarray:
    out = y.shape[first:first + len(window)]
    regions = regions_of(first, window, strides, dilation, out)

    def add(part: np.ndarray, values: np.ndarray) -> None:
        for k, where in regions:
            region = part[where]
            np.add(region, values[(slice(None),) * (first + len(window)) + (k,)], out=region)

    return summed(y.shape[:first] + tuple(sizes) + y.shape[first + len(window) + 1:], y.dtype, y, first, pads, add,
                  blas=False)


def summed(shape: tuple[int, ...], dtype: Any, values: np.ndarray, first: int, pads: Sequence[tuple[int, int]],
           add: Any, blas: bool) -> np.ndarray:
    """The total of `shape` (the unpadded input's) that `add(part, values_part)` sums window by window into zeros
    of the padded input's shape, a few leading indices at a time (so that a block's sums stay in the cache while
    each window position adds to them) spread over the threads the machine gives; each block's padded sums cropped."""
    if not any(lo or hi for lo, hi in pads):
        total = np.zeros(shape, dtype)
        calls = [functools.partial(add, total[part], values[part]) for part in _blocks(total, first)]
    else:
        total = np.empty(shape, dtype)
        padded = padded_sizes(shape[first:first + len(pads)], pads)
        inside = _interior(shape, first, pads)

        def add_cropped(part: slice) -> None:
            block = total[part]
            sums = np.zeros(block.shape[:first] + padded + block.shape[first + len(pads):], dtype)
            add(sums, values[part])
            block[...] = sums[inside]

        calls = [functools.partial(add_cropped, part) for part in _blocks(total, first)]
    device_pool.spread(calls, device_pool.call_threads(), blas=blas)
    return total


def regions_of(first: int, window: Sequence[int], strides: Sequence[int], dilation: Sequence[int],
               out: Sequence[int]) -> list[tuple[int, tuple[slice, ...]]]:
    """Each window position (its index K, in row-major order) with the region of the input its values come from."""
    return [(k, (slice(None),) * first + tuple(slice(o * d, o * d + (m - 1) * s + 1, s)
                                               for o, d, m, s in zip(offset, dilation, out, strides)))
            for k, offset in enumerate(itertools.product(*[range(w) for w in window]))]


def _windows_sum_aval(y: ShapedArray, *, first: int, window: tuple[int, ...], sizes: tuple[int, ...],
                      **_: Any) -> ShapedArray:
    return ShapedArray(y.shape[:first] + tuple(sizes) + y.shape[first + len(window) + 1:], y.dtype, y.weak_type)


def leading_kept(rank_change: int):
    """The sharding rule: the first input's leading dimensions keep their splits, its others and every other input
    (a kernel) are whole on each device (a window spans them); the output has `rank_change` more dimensions than
    the first input, and its window dimensions are split afterwards as the first input's are (JAX's placement of a
    convolution of an input split along a spatial dimension)."""

    def rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, first: int, window: tuple[int, ...],
             **_: Any) -> rules.Layout:
        lead = tuple(specs[0][:first])
        whole = ((),) * (avals[0].ndim + rank_change - first)
        used = {axis for entry in lead for axis in entry}
        split = tuple(rules.unused_prefix(entry, used) for entry in specs[0][first:first + len(window)])
        return rules.Layout([lead + ((),) * (avals[0].ndim - first)] + [((),) * a.ndim for a in avals[1:]],
                            [lead + whole], result_specs=[lead + split + whole[len(window):]] if any(split) else None)

    return rule


windows = define_primitive("conv_windows", _windows_impl, _windows_aval, leading_kept(1))
windows_sum = define_primitive("conv_windows_sum", _windows_sum_impl, _windows_sum_aval, leading_kept(-1))
