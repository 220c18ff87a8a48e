"""A convolution's products with its windows (windows.py), made a few images at a time, never the whole windows.

A convolution is windows(x) (windows.py: every output position's window, one copy) and one product of them with
the kernel; its kernel's gradient is the product of the same windows with the output's gradient. For a 3x3 window
of 64x32x32x32 float32 the windows are 75 MB, and BLAS multiplying them by 32 output features is bound by reading
them from memory. In a program (simplify.py's rewrites) where the windows would take BLOCKED_FROM_BYTES or more,
each such product reads x instead, and copies one block of images' windows at a time into a buffer that stays in
the cache, multiplied at once:
- `conv_windows_product(x, kernel)`: windows(x) @ kernel, kernel (K, C, O) -> (leading..., out..., O);
- `conv_windows_gradient(x, g)`: windows(x) contracted with g (leading..., out..., O) over every leading and output
  position -> (K, C, O); each block's product summed in block order;
- `conv_windows_product_sum(g, kernel)`: windows_sum(g @ kernel^T), the input's gradient. With unit strides it is
  the convolution of g, padded by the window's span less the forward pads, with the kernel flipped: one
  conv_windows_product. Otherwise each window position's product is added to its region at once (a block of
  images at a time), never making the whole product.
Measured (2-core AMD EPYC, OpenBLAS's SkylakeX kernels, the 3x3 window above, 2 threads): 2.3 ms for the windows'
copy, then 6.2 ms for the product, 6.6 ms for the gradient and 6.6 ms for the input's gradient by window positions,
against 4.7, 5.0 and 4.8 ms made by blocks (XLA: 3.6, 5.1 and 3.5 ms).
A block has a fixed number of images (at most WINDOW_BLOCK_BYTES of windows, whatever the threads) and runs on one
BLAS thread, the blocks spread over the threads the machine gives now: the bits are the same alone or spread, on a
quiet machine or a busy one.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import ShapedArray, define_primitive
from ..core.jaxpr import Equation, Var
from ..interpreters import simplify
from ..runtime import compute_pool as device_pool
from ..sharding import placement_rules as rules
from . import cpu_kernels
from . import windows as W

# 64 images of 32x32x32 float32, 3x3 windows, 2 cores (OpenBLAS's SkylakeX kernels): the forward product 4.6-5.0 ms by
# blocks of 4 images, 5.0-5.4 by 2, 5.9-6.2 by 1, 6.7 by 8
WINDOW_BLOCK_BYTES = 5 << 20
# at least this many blocks where the images allow: even shares for 2, 4 or 8 threads (64 images of 32x32x3, 2
# cores: forward 0.98 ms and kernel gradient 1.23 ms by 8 blocks, 0.93 and 1.15 by 2; of 32x32x32: 4.6 and 5.0 ms by 16)
MIN_BLOCKS = 8
# but blocks of at least this many bytes of windows: smaller ones cost more to spread than to compute (a 1-D
# convolution's training step over 8x32x16, 3-wide windows: 795 us in 8 blocks, 339 us by the windows' copy whole)
MIN_BLOCK_BYTES = 256 << 10
# a program's products read the input instead of its windows where the windows would take at least this many bytes
# (on the 2-core AMD EPYC a training step's three products took, against the windows' copy and its products, 0.56-0.89
# the time over windows of 7-75 MB; 1.11-1.13 over 5.2 MB, 1.0-1.2 over 1-3 MB)
BLOCKED_FROM_BYTES = 6 << 20
# the input's gradient is the flipped kernel's convolution where the input has at least this many features: the
# windows of the output's gradient then cost less than each window position's product with a few columns (16 images
# of 16x16, 32 features in and 16 out: 0.33 against 0.52 ms; 32 of 28x28, 1 in and 32 out: 0.86 against 0.48 ms)
FLIPPED_MIN_FEATURES = 8


def _blocks_windows(x: np.ndarray, first: int, window: tuple[int, ...], strides: tuple[int, ...],
                    dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]
                    ) -> tuple[np.ndarray, tuple[int, ...], list[slice], Callable[[slice], np.ndarray]]:
    """x's leading dimensions as one, the output's sizes, the blocks of leading indices, and a function giving one
    block's windows as a (rows, K * C) matrix (a fresh buffer, written by one copy)."""
    images = x.reshape((math.prod(x.shape[:first]),) + x.shape[first:])
    last = 1 + len(window)
    out = W.windows_out_sizes(images.shape, 1, window, strides, dilation, pads)
    per_image = math.prod(out) * math.prod(window) * math.prod(images.shape[last:]) * images.itemsize
    total = images.shape[0] * per_image
    wanted = max(MIN_BLOCKS, -(-total // max(WINDOW_BLOCK_BYTES, 1)))  # blocks in the cache, enough of them
    count = max(1, min(images.shape[0], wanted, total // max(MIN_BLOCK_BYTES, 1)))  # each worth spreading
    step = -(-images.shape[0] // count) if images.shape[0] else 1
    blocks = [slice(start, start + step) for start in range(0, images.shape[0], step)]
    padded = any(lo or hi for lo, hi in pads)

    def block_windows(part: slice) -> np.ndarray:
        source = W.zero_padded(images[part], 1, pads) if padded else images[part]
        view = W.strided_windows(source, 1, window, strides, dilation, out)
        copy = np.empty(view.shape, images.dtype)
        np.copyto(copy, view)
        return copy.reshape(-1, math.prod(window) * math.prod(images.shape[last:]))

    return images, out, blocks, block_windows


def _windows_product_impl(x: np.ndarray, kernel: np.ndarray, *, first: int, window: tuple[int, ...],
                          strides: tuple[int, ...], dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]
                          ) -> np.ndarray:
    images, out, blocks, block_windows = _blocks_windows(x, first, window, strides, dilation, pads)
    features = kernel.shape[-1]
    result = np.empty((images.shape[0],) + out + (features,), np.result_type(x, kernel))
    matrix = np.ascontiguousarray(kernel).reshape(-1, features)

    def multiply(part: slice) -> None:
        np.matmul(block_windows(part), matrix, out=result[part].reshape(-1, features))

    _spread([functools.partial(multiply, part) for part in blocks])
    return result.reshape(x.shape[:first] + out + (features,))


def _windows_gradient_impl(x: np.ndarray, g: np.ndarray, *, first: int, window: tuple[int, ...],
                           strides: tuple[int, ...], dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]
                           ) -> np.ndarray:
    images, out, blocks, block_windows = _blocks_windows(x, first, window, strides, dilation, pads)
    features = g.shape[-1]
    rows = g.reshape(-1, features)
    per_image = math.prod(out)
    partials = np.empty((len(blocks), math.prod(window) * images.shape[-1], features), np.result_type(x, g))

    def multiply(index: int, part: slice) -> None:
        start, stop, _ = part.indices(images.shape[0])
        np.matmul(block_windows(part).T, rows[start * per_image:stop * per_image], out=partials[index])

    _spread([functools.partial(multiply, index, part) for index, part in enumerate(blocks)])
    return np.add.reduce(partials, axis=0).reshape((math.prod(window), images.shape[-1], features))


def _spread(calls: Sequence[Any]) -> None:
    """Run the blocks' calls over the threads the machine gives now, BLAS one thread each."""
    device_pool.product_blas(0, 1)
    device_pool.spread(calls, device_pool.call_threads(), blas=True)


def _product_sum_impl(g: np.ndarray, kernel: np.ndarray, *, first: int, window: tuple[int, ...],
                      strides: tuple[int, ...], dilation: tuple[int, ...], sizes: tuple[int, ...],
                      pads: tuple[tuple[int, int], ...]) -> np.ndarray:
    """windows_sum(g @ kernel^T) for g (leading..., out..., O) and kernel (K, C, O), without the (leading..., out...,
    K, C) product: with unit strides and FLIPPED_MIN_FEATURES input features the flipped kernel's convolution of g;
    else each window position's product (one BLAS call per block of leading indices) added to its region at once, in
    the order windows_sum adds them."""
    span = [d * (k - 1) for k, d in zip(window, dilation)]
    if all(s == 1 for s in strides) and all(lo <= reach and hi <= reach for (lo, hi), reach in zip(pads, span)) and \
            kernel.shape[1] >= FLIPPED_MIN_FEATURES:
        flipped = kernel.reshape(window + kernel.shape[1:])[(slice(None, None, -1),) * len(window)]
        return _windows_product_impl(g, np.swapaxes(flipped, -1, -2).reshape(kernel.shape[0], -1, kernel.shape[1]),
                                     first=first, window=window, strides=strides, dilation=dilation,
                                     pads=tuple((reach - lo, reach - hi) for (lo, hi), reach in zip(pads, span)))
    out = g.shape[first:g.ndim - 1]
    regions = W.regions_of(first, window, strides, dilation, out)

    def add(part: np.ndarray, rows: np.ndarray) -> None:
        matrix = rows.reshape(-1, g.shape[-1])
        for k, where in regions:
            region = part[where]
            product = cpu_kernels.dot_general(matrix, kernel[k].T, dimension_numbers=cpu_kernels.MATRIX_PRODUCT)
            np.add(region, product.reshape(region.shape), out=region)

    return W.summed(g.shape[:first] + tuple(sizes) + (kernel.shape[1],), np.result_type(g, kernel), g, first, pads,
                     add, blas=True)


def _windows_product_aval(x: ShapedArray, kernel: ShapedArray, *, first: int, window: tuple[int, ...],
                          strides: tuple[int, ...], dilation: tuple[int, ...], pads: tuple[tuple[int, int], ...]
                          ) -> ShapedArray:
    out = W.windows_out_sizes(x.shape, first, window, strides, dilation, pads)
    return ShapedArray(x.shape[:first] + out + (kernel.shape[-1],), x.dtype, x.weak_type)


def _windows_gradient_aval(x: ShapedArray, g: ShapedArray, *, window: tuple[int, ...], **_: Any) -> ShapedArray:
    return ShapedArray((math.prod(window), x.shape[-1], g.shape[-1]), x.dtype, x.weak_type)


def _product_rule(kernel_features: int):
    """The sharding rule of a product of windows with a kernel (K, C, O) whose result has the first input's rank: the
    first input keeps the splits of its leading dimensions (the rest whole: a window spans them), the kernel those
    of its dimension `kernel_features` (O forward, C for the input's gradient) on axes the leading ones leave, and
    the result (leading..., spatial..., features) both, as the product of the windows with the kernel splits; a
    spatial dimension split in the first input is split alike in the result afterwards, as JAX places it."""

    def rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, first: int, **_: Any) -> rules.Layout:
        lead = tuple(specs[0][:first])
        used = {axis for entry in lead for axis in entry}
        features = rules.unused_prefix(specs[1][kernel_features], used)
        whole = ((),) * (avals[0].ndim - first - 1)
        split = tuple(rules.unused_prefix(entry, used | set(features)) for entry in specs[0][first:avals[0].ndim - 1])
        kernel = tuple(features if d == kernel_features else () for d in range(3))
        return rules.Layout([lead + whole + ((),), kernel], [lead + whole + (features,)],
                            result_specs=[lead + split + (features,)] if any(split) else None)

    return rule


def _gradient_rule(specs: Sequence[rules.Spec], avals: Sequence[ShapedArray], *, first: int, **_: Any) -> rules.Layout:
    """x and g split alike along their leading dimensions (x's other dimensions whole: a window spans them), g's
    output features as they are on axes the leading ones leave; each device's (K, C, O) sums its images' and is
    summed over the leading axes afterwards, its features split as g's."""
    lead = tuple(rules.agreed_entry((a, b)) for a, b in zip(specs[0][:first], specs[1][:first]))
    features = rules.unused_prefix(specs[1][-1], {axis for entry in lead for axis in entry})
    return rules.Layout([lead + ((),) * (avals[0].ndim - first), lead + ((),) * (avals[1].ndim - first - 1) +
                         (features,)], [((), (), features)], tuple(axis for entry in lead for axis in entry), "sum")


def _product_sum_aval(g: ShapedArray, kernel: ShapedArray, *, first: int, sizes: tuple[int, ...],
                      **_: Any) -> ShapedArray:
    return ShapedArray(g.shape[:first] + tuple(sizes) + (kernel.shape[1],), g.dtype, g.weak_type)


windows_product = define_primitive("conv_windows_product", _windows_product_impl, _windows_product_aval,
                                   _product_rule(2))
windows_gradient = define_primitive("conv_windows_gradient", _windows_gradient_impl, _windows_gradient_aval,
                                    _gradient_rule)
windows_product_sum = define_primitive("conv_windows_product_sum", _product_sum_impl, _product_sum_aval,
                                       _product_rule(1))


def _windows_read(x: Any, producers: dict[int, Equation]) -> Equation | None:
    """The conv_windows equation whose result `x` is, read through reshapes; None if it is not one."""
    while isinstance(x, Var) and (eq := producers.get(x.id)) is not None:
        if eq.primitive is W.windows:
            return eq
        if eq.primitive.name != "reshape":
            return None
        x = eq.inputs[0]
    return None


def _as_windows_product(eq: Equation, producers: dict[int, Equation], uses: dict[int, int]) -> Equation | None:
    """A product of windows(x) (leading..., out..., K, C) read in that shape, with a kernel (K, C, O) over (K, C) or
    with g (leading..., out..., O) over every leading and output position, as one primitive reading x."""
    lhs, rhs = eq.inputs
    if not isinstance(lhs, Var) or not isinstance(rhs, Var) or eq.params.get("out_sharding") is not None:
        return None
    source = _windows_read(lhs, producers)
    dtype = lhs.aval.dtype
    if source is None or lhs.aval.shape != source.outputs[0].aval.shape or dtype not in cpu_kernels.BLAS_FLOATS or \
            lhs.aval.size * dtype.itemsize < BLOCKED_FROM_BYTES or \
            rhs.aval.dtype != dtype or np.dtype(eq.params.get("preferred_element_type") or dtype) != dtype:
        return None
    ndim = lhs.aval.ndim
    positions = tuple(range(ndim - 2))
    if eq.params["dimension_numbers"] == (((ndim - 2, ndim - 1), (0, 1)), ((), ())) and rhs.aval.ndim == 3:
        primitive = windows_product
    elif eq.params["dimension_numbers"] == ((positions, positions), ((), ())) and rhs.aval.ndim == ndim - 1:
        primitive = windows_gradient
    else:
        return None
    return Equation(primitive, [source.inputs[0], rhs], eq.outputs, dict(source.params))


def _as_product_sum(eq: Equation, producers: dict[int, Equation], uses: dict[int, int]) -> Equation | None:
    """windows_sum(y), y a product g @ kernel^T of g (leading..., out..., O) and kernel (K, C, O) read by nothing
    else (maybe through reshapes back to its shape), as one windows_product_sum(g, kernel)."""
    y = eq.inputs[0]
    while isinstance(y, Var) and uses.get(y.id) == 1 and (reshape := producers.get(y.id)) is not None and \
            reshape.primitive.name == "reshape":
        y = reshape.inputs[0]
    product = producers.get(y.id) if isinstance(y, Var) and uses.get(y.id) == 1 else None
    if product is None or product.primitive.name != "dot_general" or product.params.get("out_sharding") is not None:
        return None
    g, kernel = product.inputs
    if not isinstance(g, Var) or not isinstance(kernel, Var) or g.aval.dtype != kernel.aval.dtype or \
            np.dtype(product.params.get("preferred_element_type") or g.aval.dtype) != g.aval.dtype:
        return None
    first, window = eq.params["first"], eq.params["window"]
    sums = eq.inputs[0].aval.shape
    if kernel.aval.ndim != 3 or g.aval.ndim != first + len(window) + 1 or y.aval.shape != sums or \
            product.params["dimension_numbers"] != (((g.aval.ndim - 1,), (2,)), ((), ())) or \
            kernel.aval.shape[:2] != (math.prod(window), sums[-1]):
        return None
    return Equation(windows_product_sum, [g, kernel], eq.outputs, dict(eq.params))


simplify.rewrites["dot_general"] = _as_windows_product
simplify.rewrites["conv_windows_sum"] = _as_product_sum
