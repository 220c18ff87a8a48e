"""Convolutions and windowed reductions (as jax.lax): conv_general_dilated and its variants, reduce_window and
padtype_to_pads. They are compositions of primitives (padding, the input's windows as one copy, one
dot_general), so jit, grad, vmap and partitioning come from those primitives' rules."""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..arrays.out_sharding import reshard
from ..core.core import aval_of
from ..tree.tree_util import tree_flatten, tree_unflatten
from ..primitives import window_products  # noqa: F401 - installs its rewrite of the products made here
from ..primitives import windows as W
from . import lax_ops as L
from . import slicing as S

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "conv", "conv_dimension_numbers",
           "conv_general_dilated", "conv_general_dilated_patches", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose", "conv_with_general_padding",
           "padtype_to_pads", "reduce_window", "reduce_window_shape_tuple"]


class ConvDimensionNumbers(NamedTuple):
    """Where the batch/feature and spatial dimensions are in lhs, rhs and out: (batch or out-feature dim, feature
    or in-feature dim, spatial dims...)."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


ConvGeneralDilatedDimensionNumbers = Any  # None, a (lhs, rhs, out) tuple of strings, or ConvDimensionNumbers


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """ConvDimensionNumbers from None (NC..., OI..., NC...), from strings such as ('NHWC', 'HWIO', 'NHWC'), or as
    given; spatial dimensions are ordered as the rhs string orders them."""
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise TypeError(f"convolution requires lhs and rhs of one rank; got shapes {tuple(lhs_shape)} and "
                        f"{tuple(rhs_shape)}.")
    if dimension_numbers is None:
        canonical = tuple(range(nd))
        return ConvDimensionNumbers(canonical, canonical, canonical)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    lhs, rhs, out = dimension_numbers
    if not all(isinstance(s, str) and len(s) == nd for s in (lhs, rhs, out)):
        raise TypeError(f"convolution dimension_numbers must be three strings of length {nd} (one letter per "
                        f"dimension) or a ConvDimensionNumbers; got {dimension_numbers!r}.")
    spatial = [c for c in rhs if c not in "OI"]

    def spec(string: str, first: str, second: str) -> tuple[int, ...]:
        if sorted(string) != sorted(first + second + "".join(spatial)):
            raise ValueError(f"convolution dimension string {string!r} must name {first}, {second} and the rhs's "
                             f"spatial dimensions {''.join(spatial)!r}; got {dimension_numbers!r}.")
        return (string.index(first), string.index(second)) + tuple(string.index(c) for c in spatial)

    return ConvDimensionNumbers(spec(lhs, "N", "C"), spec(rhs, "O", "I"), spec(out, "N", "C"))


def conv_general_permutations(dimension_numbers: tuple[str, str, str]) -> tuple[tuple[int, ...], ...]:
    """The (lhs, rhs, out) permutations into the NC.../OI.../NC... layouts, from dimension strings."""
    lhs, rhs, out = dimension_numbers
    return tuple(conv_dimension_numbers((0,) * len(lhs), (0,) * len(rhs), dimension_numbers))


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape (NC... layout) of a convolution of NC... `lhs_shape` with OI... `rhs_shape`."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    spatial = tuple(max((n + lo + hi - k) // s + 1, 0)
                    for n, k, s, (lo, hi) in zip(lhs_shape[2:], rhs_shape[2:], strides, pads))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + spatial


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of conv_general_dilated (without dilation) in the layout `dimension_numbers` gives."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    canonical = conv_shape_tuple([lhs_shape[d] for d in dn.lhs_spec], [rhs_shape[d] for d in dn.rhs_spec],
                                 window_strides, padding)
    return tuple(canonical[int(j)] for j in np.argsort(dn.out_spec))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of reduce_window with explicit (low, high) padding."""
    base = base_dilation or (1,) * len(operand_shape)
    dilation = window_dilation or (1,) * len(operand_shape)
    return tuple(max((_dilated(n, b) + lo + hi - _dilated(w, d)) // s + 1, 0) for n, w, s, (lo, hi), b, d in
                 zip(operand_shape, window_dimensions, window_strides, padding, base, dilation))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list[tuple[int, int]]:
    """(low, high) padding per spatial dimension for 'SAME' (outputs ceil(in / stride) long, any odd padding on
    the high side), 'SAME_LOWER' (on the low side) or 'VALID' (none)."""
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence of (low, high) pairs; got "
                         f"{padding!r}.")
    pads = []
    for size, window, stride in zip(in_shape, window_shape, window_strides):
        total = max((math.ceil(size / stride) - 1) * stride + window - size, 0)
        small, large = total // 2, total - total // 2
        pads.append((small, large) if kind == "SAME" else (large, small))
    return pads


def _dilated(size: int, dilation: int) -> int:
    return 0 if size == 0 else 1 + dilation * (size - 1)


def _pads(padding: Any, in_shape: Sequence[int], window_shape: Sequence[int],
          strides: Sequence[int]) -> list[tuple[int, int]]:
    if isinstance(padding, str):
        return padtype_to_pads(in_shape, window_shape, strides, padding)
    pads = [(int(lo), int(hi)) for lo, hi in padding]
    if len(pads) != len(in_shape):
        raise ValueError(f"padding needs one (low, high) pair per spatial dimension ({len(in_shape)}); got {padding!r}.")
    return pads


def _windows(x: Any, first: int, window: Sequence[int], strides: Sequence[int], dilation: Sequence[int]
             ) -> tuple[list[Any], tuple[int, ...]]:
    """Every window offset's strided slice of `x` over its dimensions `first`.. (one per window dimension; those
    after them are taken whole), and the output sizes."""
    shape = aval_of(x).shape
    last = first + len(window)
    spatial = shape[first:last]
    out = W.out_sizes(spatial, window, strides, dilation)
    slices = []
    for offset in itertools.product(*[range(k) for k in window]):
        starts = (0,) * first + tuple(o * d for o, d in zip(offset, dilation)) + (0,) * (len(shape) - last)
        limits = shape[:first] + tuple(a + (m - 1) * s + 1 if m else a
                                       for a, m, s in zip(starts[first:last], out, strides)) + shape[last:]
        slices.append(S.slice(x, starts, limits, (1,) * first + tuple(strides) + (1,) * (len(shape) - last)))
    return slices, out


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision: Any = None, preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """The general convolution of jax.lax: strided, padded ('SAME'/'VALID'/pairs), dilated input and kernel,
    any dimension layout, feature groups; `out_sharding` places the result."""
    lhs, rhs = L._same_dtype("conv_general_dilated", lhs, rhs)
    dn = conv_dimension_numbers(aval_of(lhs).shape, aval_of(rhs).shape, dimension_numbers)
    if int(batch_group_count) != 1:
        raise NotImplementedError(f"conv_general_dilated: batch_group_count={batch_group_count} is not implemented in "
                                  "meshax; group the batch by hand (its gradients do not need it here).")
    nsp = aval_of(lhs).ndim - 2
    # channels last, as the product wants them: x (N, spatial..., C), k (window..., I, O)
    x = S.transpose(lhs, (dn.lhs_spec[0],) + dn.lhs_spec[2:] + (dn.lhs_spec[1],))
    k = S.transpose(rhs, dn.rhs_spec[2:] + (dn.rhs_spec[1], dn.rhs_spec[0]))
    n, c = aval_of(x).shape[0], aval_of(x).shape[-1]
    i, o = aval_of(k).shape[-2:]
    groups = int(feature_group_count)
    if c != i * groups or o % groups:
        raise TypeError(f"conv_general_dilated: lhs has {c} features and rhs {i} input features per group, which "
                        f"needs {c} == {i} * feature_group_count ({groups}) and {o} output features divisible by it.")
    strides = tuple(int(s) for s in window_strides)
    lhs_dil = tuple(int(d) for d in lhs_dilation) if lhs_dilation else (1,) * nsp
    rhs_dil = tuple(int(d) for d in rhs_dilation) if rhs_dilation else (1,) * nsp
    window = aval_of(k).shape[:nsp]
    in_shape = [_dilated(m, d) for m, d in zip(aval_of(x).shape[1:-1], lhs_dil)]
    pads = _pads(padding, in_shape, [_dilated(w, d) for w, d in zip(window, rhs_dil)], strides)
    # zeros around x are the windows' copy's to make (in the cache), unless x is dilated or cropped
    in_copy = all(d == 1 for d in lhs_dil) and all(lo >= 0 and hi >= 0 for lo, hi in pads)
    inner = tuple((lo, hi) for lo, hi in pads) if in_copy else ((0, 0),) * nsp
    if not in_copy and any(lo or hi for lo, hi in pads) or any(d != 1 for d in lhs_dil):
        x = S.pad(x, np.zeros((), aval_of(x).dtype),
                  [(0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d in zip(pads, lhs_dil)] + [(0, 0, 0)])
    # the patches (N, out..., K, G, I): each output position's window of the input, one copy, then one product
    count = math.prod(window)
    patches = W.windows.bind(x, first=1, window=tuple(window), strides=strides, dilation=rhs_dil, pads=inner)
    out = aval_of(patches).shape[1:1 + nsp]
    patches = S.reshape(patches, (n,) + out + (count, groups, i))
    kernel = S.reshape(k, (count, i, groups, o // groups))  # (K, I, G, O/G)
    if groups == 1:
        product = L.dot_general(S.reshape(patches, (n,) + out + (count, i)), S.reshape(kernel, (count, i, o)),
                                (((nsp + 1, nsp + 2), (0, 1)), ((), ())), precision, preferred_element_type)
    else:
        product = L.dot_general(patches, kernel, (((nsp + 1, nsp + 3), (0, 1)), ((nsp + 2,), (2,))),
                                precision, preferred_element_type)  # (G, N, out..., O/G)
        product = S.reshape(S.transpose(product, tuple(range(1, nsp + 2)) + (0, nsp + 2)), (n,) + out + (o,))
    # (N, out..., O) -> the output layout
    order = (dn.out_spec[0],) + dn.out_spec[2:] + (dn.out_spec[1],)
    result = S.transpose(product, tuple(int(j) for j in np.argsort(order)))
    return result if out_sharding is None else reshard(result, out_sharding)


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any, precision: Any = None,
         preferred_element_type: Any = None) -> Any:
    """conv_general_dilated in the NC.../OI... layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
                              precision: Any = None, preferred_element_type: Any = None) -> Any:
    """conv_general_dilated in the NC.../OI... layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _transpose_padding(window: int, stride: int, padding: str) -> tuple[int, int]:
    """The padding of the dilated input that makes a transposed convolution the gradient of the forward one."""
    if padding == "SAME":
        total = window + stride - 2
        low = window - 1 if stride > window - 1 else math.ceil(total / 2)
    elif padding == "VALID":
        total = window + stride - 2 + max(window - stride, 0)
        low = window - 1
    else:
        raise ValueError(f"conv_transpose padding must be 'SAME', 'VALID' or (low, high) pairs; got {padding!r}.")
    return low, total - low


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Any:
    """The transposed convolution (fractionally strided: the input dilated by `strides`), channels last by
    default as in JAX; with `transpose_kernel`, the kernel is flipped and its in/out features swapped, as the
    gradient of a conv; with `use_consistent_padding`, (low, high) pairs are the forward conv's padding."""
    lhs, rhs = L._lift(lhs), L._lift(rhs)
    if dimension_numbers is None:  # NHWC / HWIO / NHWC, TensorFlow's convention, as JAX's conv_transpose
        spatial = "HWDEFGIJKLMN"[:aval_of(lhs).ndim - 2]
        dimension_numbers = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
    dn = conv_dimension_numbers(aval_of(lhs).shape, aval_of(rhs).shape, dimension_numbers)
    window = [aval_of(rhs).shape[d] for d in dn.rhs_spec[2:]]
    rhs_dil = tuple(rhs_dilation) if rhs_dilation else (1,) * len(window)
    effective = [_dilated(w, d) for w, d in zip(window, rhs_dil)]
    if isinstance(padding, str):
        pads = [_transpose_padding(w, s, padding.upper()) for w, s in zip(effective, strides)]
    elif use_consistent_padding:
        pads = [(w - 1 - lo, w - 1 - hi) for w, (lo, hi) in zip(effective, padding)]
    else:
        pads = padding
    if transpose_kernel:
        rhs = S.rev(rhs, dn.rhs_spec[2:])
        perm = list(range(aval_of(rhs).ndim))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = S.transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * len(window), pads, strides, rhs_dil, dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int], window_strides: Sequence[int], padding: Any,
                                 lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers: Any = None, precision: Any = None,
                                 preferred_element_type: Any = None) -> Any:
    """The patches a convolution with a kernel of spatial shape `filter_shape` multiplies: output features are
    the input features times the window positions (feature-major), as JAX's."""
    lhs = L._lift(lhs)
    nd = aval_of(lhs).ndim
    dn = conv_dimension_numbers(aval_of(lhs).shape, (1,) * nd, dimension_numbers)
    c = aval_of(lhs).shape[dn.lhs_spec[1]]
    size = int(np.prod(filter_shape))
    one_hot = np.eye(size, dtype=aval_of(lhs).dtype).reshape((size, 1) + tuple(filter_shape))
    kernel = np.transpose(np.tile(one_hot, (c,) + (1,) * (nd - 1)), np.argsort(dn.rhs_spec))
    return conv_general_dilated(lhs, kernel, window_strides, padding, lhs_dilation, rhs_dilation, dn,
                                feature_group_count=c, precision=precision,
                                preferred_element_type=preferred_element_type)


def reduce_window(operand: Any, init_value: Any, computation: Callable[..., Any], window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: Any = "VALID",
                  base_dilation: Sequence[int] | None = None, window_dilation: Sequence[int] | None = None) -> Any:
    """Each window of `operand` (an array or a pytree of same-shaped arrays) reduced with the binary `computation`
    from `init_value`; padding ('SAME'/'VALID'/pairs) is filled with the init value. Strides default to 1."""
    flat, tree = tree_flatten(operand)
    inits, init_tree = tree_flatten(init_value)
    if tree != init_tree:
        raise TypeError(f"lax.reduce_window: operand {tree} and init_value {init_tree} must have the same structure.")
    flat = [L._lift(x) for x in flat]
    shape = aval_of(flat[0]).shape
    nd = len(shape)
    window = tuple(int(w) for w in window_dimensions)
    strides = tuple(int(s) for s in window_strides) if window_strides is not None else (1,) * nd
    base = tuple(int(d) for d in base_dilation) if base_dilation else (1,) * nd
    dilation = tuple(int(d) for d in window_dilation) if window_dilation else (1,) * nd
    pads = _pads(padding, [_dilated(n, b) for n, b in zip(shape, base)],
                 [_dilated(w, d) for w, d in zip(window, dilation)], strides)
    fills = [np.asarray(i, aval_of(x).dtype) if not hasattr(i, "shape") else i for i, x in zip(inits, flat)]
    padded = [S.pad(x, f, [(lo, hi, b - 1) for (lo, hi), b in zip(pads, base)]) for x, f in zip(flat, fills)]
    per_operand = [_windows(x, 0, window, strides, dilation) for x in padded]
    out = per_operand[0][1]
    accumulated = [S.broadcast_in_dim(L.convert_element_type(f, aval_of(x).dtype), out, ()) for f, x in
                   zip(fills, flat)]
    for parts in zip(*[slices for slices, _ in per_operand]):
        combined = computation(tree_unflatten(tree, accumulated), tree_unflatten(tree, list(parts)))
        accumulated = tree_flatten(combined)[0]
    return tree_unflatten(tree, accumulated)
