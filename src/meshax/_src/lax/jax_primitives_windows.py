"""jax.lax's `*_p` names of windowed reductions, convolution, scatters and collectives, as `JaxParamsPrimitive`s
(see jax_primitives_base.py): binding one with JAX 0.12's parameters calls meshax's lax function."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.jaxpr import ClosedJaxpr, eval_jaxpr
from . import control_flow, conv, gather_scatter as G, lax_more_parallel, lax_ops as L, parallel
from .jax_primitives_base import JaxParamsPrimitive as J
from .slicing import reshape as slicing_reshape

_WINDOW = ("window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation")
_SCATTER = ("update_jaxpr", "update_consts", "dimension_numbers", "indices_are_sorted", "unique_indices", "mode")


def _identity(kind: str, dtype: Any) -> Any:
    """The init value of a max/min/sum window reduction over `dtype`."""
    dtype = np.dtype(dtype)
    if kind == "sum":
        return np.zeros((), dtype)
    sign = -1 if kind == "max" else 1
    if dtype == np.bool_:
        return np.array(kind == "min")
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.array(info.min if sign < 0 else info.max, dtype)
    return np.array(sign * np.inf, dtype)


def _window_reduction(kind: str) -> Callable[..., Any]:
    """reduce_window_{kind}_p: `operand` reduced by max/min/add over windows, padded with the identity."""
    combine = {"max": L.max, "min": L.min, "sum": L.add}[kind]

    def fn(x: Any, *, window_dimensions: Sequence[int], window_strides: Sequence[int], padding: Any,
           base_dilation: Sequence[int], window_dilation: Sequence[int]) -> Any:
        return conv.reduce_window(x, _identity(kind, x.dtype), combine, window_dimensions, window_strides,
                                  tuple(map(tuple, padding)), base_dilation, window_dilation)
    return fn


def _jaxpr_fn(jaxpr: Any, consts: Sequence[Any]) -> Callable[..., list[Any]]:
    """The function a meshax jaxpr (open, with `consts`, or closed) computes on flat arguments."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr, consts = jaxpr.jaxpr, list(jaxpr.consts) + list(consts)
    return lambda *xs: eval_jaxpr(jaxpr, list(consts), xs)


def _reduce_window(*args: Any, jaxpr: Any, consts: Sequence[Any], window_dimensions: Sequence[int],
                   window_strides: Sequence[int], padding: Any, base_dilation: Sequence[int],
                   window_dilation: Sequence[int]) -> list[Any]:
    """reduce_window_p: operands then init values, reduced over windows by a meshax jaxpr of the computation."""
    n = len(args) // 2
    body = _jaxpr_fn(jaxpr, consts)
    if n == 1:
        comp = lambda a, b: body(a, b)[0]  # noqa: E731
        return [conv.reduce_window(args[0], args[1], comp, window_dimensions, window_strides,
                                   tuple(map(tuple, padding)), base_dilation, window_dilation)]
    comp = lambda a, b: tuple(body(*a, *b))  # noqa: E731
    return list(conv.reduce_window(tuple(args[:n]), tuple(args[n:]), comp, window_dimensions, window_strides,
                                   tuple(map(tuple, padding)), base_dilation, window_dilation))


def _select_kind(select_prim: Any) -> str:
    """'max' for JAX's `ge_p` (select the largest), 'min' for `le_p`."""
    name = getattr(select_prim, "name", None)
    if name not in ("ge", "le"):
        raise ValueError(f"select_prim must be lax.ge_p or lax.le_p, got {select_prim!r}; pass one of those.")
    return "max" if name == "ge" else "min"


def _select_and_scatter_add(source: Any, operand: Any, *, select_prim: Any, window_dimensions: Sequence[int],
                            window_strides: Sequence[int], padding: Any) -> Any:
    """select_and_scatter_add_p: each window's `source` value added at the operand's selected (max or min)
    element, found as the flat index carried along a windowed max/min."""
    flat = slicing_reshape(L.iota(np.int32, operand.size), operand.shape)
    ones = (1,) * operand.ndim
    chosen = _select_and_gather_add(flat, operand, select_prim=select_prim, window_dimensions=window_dimensions,
                                    window_strides=window_strides, padding=padding, base_dilation=ones,
                                    window_dilation=ones, pad_index=operand.size)
    dims = G.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    zeros = L.full((operand.size,), 0, source.dtype)
    out = G.scatter_add(zeros, slicing_reshape(chosen, (chosen.size, 1)), slicing_reshape(source, (source.size,)), dims,
                        mode=G.GatherScatterMode.FILL_OR_DROP)
    return slicing_reshape(out, operand.shape)


def _select_and_gather_add(tangents: Any, operand: Any, *, select_prim: Any, window_dimensions: Sequence[int],
                           window_strides: Sequence[int], padding: Any, base_dilation: Sequence[int],
                           window_dilation: Sequence[int], pad_index: Any = 0) -> Any:
    """select_and_gather_add_p: per window, the tangent at the operand's selected (max or min) element (the
    first one on ties; padding selects `pad_index`)."""
    kind = _select_kind(select_prim)
    better = L.ge if kind == "max" else L.le

    def comp(a: tuple, b: tuple) -> tuple:
        keep = better(a[0], b[0])
        return control_flow.select(keep, a[0], b[0]), control_flow.select(keep, a[1], b[1])

    out = conv.reduce_window((operand, tangents), (_identity(kind, operand.dtype), np.array(pad_index, tangents.dtype)),
                             comp, window_dimensions, window_strides, tuple(map(tuple, padding)), base_dilation,
                             window_dilation)
    return out[1]


def _select_and_scatter(operand: Any, source: Any, init_value: Any, *, select_jaxpr: Any, select_consts: Any,
                        scatter_jaxpr: Any, scatter_consts: Any, window_dimensions: Sequence[int],
                        window_strides: Sequence[int], padding: Any) -> Any:
    """select_and_scatter_p, for the selections and scatter JAX emits (ge/le selecting, add scattering) given
    as meshax jaxprs: init_value plus select_and_scatter_add."""
    prims = [eq.primitive.name for eq in _open(select_jaxpr).equations]
    adds = [eq.primitive.name for eq in _open(scatter_jaxpr).equations]
    if len(prims) != 1 or prims[0] not in ("ge", "le") or adds != ["add"]:
        raise NotImplementedError(f"select_and_scatter_p supports a `ge`/`le` select_jaxpr and an `add` "
                                  f"scatter_jaxpr, got {prims} and {adds}; use lax.reduce_window's gradient.")
    select_prim = _open(select_jaxpr).equations[0].primitive
    added = _select_and_scatter_add(source, operand, select_prim=select_prim, window_dimensions=window_dimensions,
                                    window_strides=window_strides, padding=padding)
    return L.add(added, L.convert_element_type(init_value, added.dtype))


def _open(jaxpr: Any) -> Any:
    """The open jaxpr of a (closed or open) meshax jaxpr."""
    return jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr


def _scatter(fn: Callable[..., Any]) -> Callable[..., Any]:
    """scatter-{op}_p: meshax's scatter function with JAX's parameters (`update_jaxpr` is the op itself)."""
    def bound(operand: Any, indices: Any, updates: Any, *, update_jaxpr: Any, update_consts: Any,
              dimension_numbers: Any, indices_are_sorted: bool, unique_indices: bool, mode: Any) -> Any:
        return fn(operand, indices, updates, dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    return bound


def _preduce(fn: Callable[..., Any]) -> Callable[..., Any]:
    """psum_p/pmax_p/pmin_p: the operand reduced over the named `axes`."""
    def bound(x: Any, *, axes: Sequence[Any], axis_index_groups: Any) -> Any:
        return fn(x, tuple(axes), axis_index_groups=axis_index_groups)
    return bound


def _all_to_all(x: Any, *, split_axis: int, concat_axis: int, axis_name: Any, axis_index_groups: Any,
                tiled: bool) -> Any:
    """all_to_all_p: the operand's `split_axis` split across `axis_name`, the pieces concatenated along
    `concat_axis` (the primitive always splits in place, as the tiled function does)."""
    return parallel.all_to_all(x, axis_name, split_axis, concat_axis, tiled=True, axis_index_groups=axis_index_groups)


def window_primitives() -> dict[str, J]:
    """The windowed, convolution, scatter and collective names."""
    conv_params = ("window_strides", "padding", "lhs_dilation", "rhs_dilation", "dimension_numbers",
                   "feature_group_count", "batch_group_count", "precision", "preferred_element_type")
    prims = [
        J("conv_general_dilated", conv.conv_general_dilated, (*conv_params, "out_sharding")),
        J("reduce_window", _reduce_window, ("jaxpr", "consts", *_WINDOW), multiple_results=True),
        J("select_and_scatter_add", _select_and_scatter_add,
          ("select_prim", "window_dimensions", "window_strides", "padding")),
        J("select_and_gather_add", _select_and_gather_add, ("select_prim", *_WINDOW)),
        J("select_and_scatter", _select_and_scatter, ("select_jaxpr", "select_consts", "scatter_jaxpr",
                                                      "scatter_consts", "window_dimensions", "window_strides",
                                                      "padding")),
        J("psum", _preduce(parallel.psum), ("axes", "axis_index_groups")),
        J("pmax", _preduce(parallel.pmax), ("axes", "axis_index_groups")),
        J("pmin", _preduce(parallel.pmin), ("axes", "axis_index_groups")),
        J("all_to_all", _all_to_all, ("split_axis", "concat_axis", "axis_name", "axis_index_groups", "tiled")),
        J("ragged_all_to_all", lax_more_parallel.ragged_all_to_all, ("axis_name", "axis_index_groups")),
    ]
    prims += [J(f"reduce_window_{k}", _window_reduction(k), _WINDOW) for k in ("sum", "max", "min")]
    prims += [J(f"scatter-{k}", _scatter(getattr(G, f"scatter_{k}")), _SCATTER)
              for k in ("add", "sub", "mul", "min", "max")]
    return {f"{p.name.replace('-', '_')}_p": p for p in prims}
