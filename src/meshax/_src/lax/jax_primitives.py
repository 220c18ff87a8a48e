"""jax.lax's `*_p` names of operations meshax composes from its own primitives (or binds as one primitive with
parameters of its own). Each is a `JaxParamsPrimitive`: binding it with JAX 0.12's operands and parameters calls
meshax's lax function, whose own equations then go through whatever trace is current (eager, jit, grad, vmap,
shard_map), so no trace ever sees the object itself."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arrays.placement import device_put
from ..numpy import creation
from . import composite_ops as C, control_flow, fft, lax_more_elementwise, lax_more_ops, lax_ops as L, slicing, special
from .jax_primitives_base import JaxParamsPrimitive
from .jax_primitives_windows import window_primitives


def _unary(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    """`fn(x)` taking (and ignoring) JAX's `accuracy` parameter of transcendental functions."""
    return lambda x, accuracy=None: fn(x)


def _dynamic_slice(operand: Any, *starts: Any, slice_sizes: Sequence[int]) -> Any:
    """dynamic_slice_p: start indices as separate scalar operands, clamped (never wrapped) into range."""
    return slicing.dynamic_slice(operand, starts, slice_sizes, allow_negative_indices=False)


def _dynamic_update_slice(operand: Any, update: Any, *starts: Any) -> Any:
    """dynamic_update_slice_p: start indices as separate scalar operands, clamped (never wrapped) into range."""
    return slicing.dynamic_update_slice(operand, update, starts, allow_negative_indices=False)


def _approx_top_k(operand: Any, *, k: int, reduction_dimension: int, recall_target: float, is_max_k: bool,
                  reduction_input_size_override: int, aggregate_to_topk: bool) -> list[Any]:
    """approx_top_k_p: approx_max_k or approx_min_k by `is_max_k`."""
    fn = C.approx_max_k if is_max_k else C.approx_min_k
    return fn(operand, k, reduction_dimension, recall_target, reduction_input_size_override, aggregate_to_topk)


def _top_k(operand: Any, *, k: int, axis: int, is_stable: bool) -> list[Any]:
    """top_k_p (meshax's top_k is always stable, a valid answer for either `is_stable`)."""
    return C.top_k(operand, k, axis=axis)


def _unstack(operand: Any, *, axis: int) -> list[Any]:
    """unstack_p: the slices of `operand` along `axis`."""
    return [slicing.index_in_dim(operand, i, axis, keepdims=False) for i in range(operand.shape[axis])]


def _device_put(*xs: Any, devices: Sequence[Any], srcs: Sequence[Any], copy_semantics: Sequence[Any]) -> list[Any]:
    """device_put_p: each operand on its device or sharding (None: where it is)."""
    if not len(devices) == len(srcs) == len(copy_semantics) == len(xs):
        raise ValueError(f"device_put_p.bind() got {len(xs)} operands but {len(devices)} devices, {len(srcs)} srcs "
                         f"and {len(copy_semantics)} copy_semantics; pass one of each per operand.")
    return [x if d is None else device_put(x, d) for x, d in zip(xs, devices)]


def _reduce(*args: Any, computation: Callable[..., Any], jaxpr: Any, dimensions: Sequence[int]) -> list[Any]:
    """reduce_p: the operands then as many init values, reduced by `computation` over `dimensions`."""
    n = len(args) // 2
    if len(args) != 2 * n:
        raise ValueError(f"reduce_p.bind() got {len(args)} operands; pass the operands then one init value each.")
    out = C.reduce(tuple(args[:n]), tuple(args[n:]), computation, dimensions)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _simple() -> dict[str, JaxParamsPrimitive]:
    """The elementwise, shape and selection names."""
    J = JaxParamsPrimitive
    prims = [
        J("after_all", lax_more_ops.after_all),
        J("create_token", lambda *a: lax_more_ops.create_token()),
        J("clamp", L.clamp), J("complex", C.complex),
        J("copy", lambda x: creation.copy(x)),
        J("cumlogsumexp", lambda x, *, axis, reverse: C.cumlogsumexp(x, axis, reverse), ("axis", "reverse")),
        J("dynamic_slice", _dynamic_slice, ("slice_sizes",)),
        J("dynamic_update_slice", _dynamic_update_slice),
        J("eq_to", L.eq), J("le_to", L.le), J("lt_to", L.lt),
        J("optimization_barrier", lambda *xs: C.optimization_barrier(xs), multiple_results=True),
        J("pad", lambda x, v, *, padding_config: slicing.pad(x, v, padding_config), ("padding_config",)),
        J("reduce", _reduce, ("computation", "jaxpr", "dimensions"), multiple_results=True),
        J("reduce_xor", lambda x, *, axes: C.reduce_xor(x, axes), ("axes",)),
        J("rsqrt", _unary(L.rsqrt), (), {"accuracy": None}),
        J("select_n", control_flow.select_n),
        J("shift_right_logical", L.shift_right_logical),
        J("split", lambda x, *, sizes, axis: C.split(x, sizes, axis), ("sizes", "axis"), multiple_results=True),
        J("squeeze", lambda x, *, dimensions: slicing.squeeze(x, dimensions), ("dimensions",)),
        J("stack", lambda *xs, axis: C.stack(xs, axis), ("axis",)),
        J("stage", lax_more_elementwise.stage),
        J("tile", lambda x, *, reps: C.tile(x, reps), ("reps",)),
        J("top_k", _top_k, ("k", "axis", "is_stable"), multiple_results=True),
        J("approx_top_k", _approx_top_k, ("k", "reduction_dimension", "recall_target", "is_max_k",
                                          "reduction_input_size_override", "aggregate_to_topk"),
          multiple_results=True),
        J("unstack", _unstack, ("axis",), multiple_results=True),
        J("device_put", _device_put, ("devices", "srcs", "copy_semantics"), multiple_results=True),
    ]
    return {f"{p.name}_p": p for p in prims}


def _shift_right_arithmetic(x: Any, y: Any) -> Any:
    """shift_right_arithmetic_p: the sign bit of unsigned operands is shifted in too (their bits read as signed)."""
    dtype = np.result_type(x, y)
    if not np.issubdtype(dtype, np.unsignedinteger):
        return L.shift_right_arithmetic(x, y)
    signed = np.dtype(f"int{dtype.itemsize * 8}")
    as_signed = [special.bitcast_convert_type(L.convert_element_type(v, dtype), signed) for v in (x, y)]
    return special.bitcast_convert_type(L.shift_right_arithmetic(*as_signed), dtype)


def _reparametrized() -> dict[str, JaxParamsPrimitive]:
    """Names whose meshax primitive takes parameters of its own that it would silently misread (rounding_method,
    an FftType, a real operand of conj, an unsigned operand of shift_right_arithmetic, rem's sign: meshax's `rem`
    primitive is NumPy's remainder, lax.rem its `fmod`)."""
    J = JaxParamsPrimitive
    prims = [
        J("round", lambda x, *, rounding_method: L.round(x, rounding_method), ("rounding_method",)),
        J("conj", lambda x, *, input_dtype: L.conj(x), (), {"input_dtype": None}),
        J("shift_right_arithmetic", _shift_right_arithmetic),
        J("rem", L.rem),
        J("fft", lambda x, *, fft_type, fft_lengths: fft.fft(x, fft_type, tuple(fft_lengths)),
          ("fft_type", "fft_lengths")),
    ]
    return {f"{p.name}_p": p for p in prims}


def jax_primitives() -> dict[str, JaxParamsPrimitive]:
    """JAX's `*_p` name -> its delegating primitive, for every name meshax has no primitive of its own for (or
    whose own primitive would misread JAX's parameters)."""
    return {**_simple(), **window_primitives(), **_reparametrized()}
