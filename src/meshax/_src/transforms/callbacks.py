"""Host callbacks: jax.pure_callback and jax.experimental.io_callback, a host function called on NumPy values
eagerly or each time a jitted program runs (in program order: meshax evaluates programs in order, so io_callback's
`ordered=True` holds either way)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.core import ShapedArray, define_primitive
from ..interpreters.ad import jvp_rules
from ..sharding.placement_rules import replicate_all
from ..tree.tree_util import tree_flatten, tree_unflatten


def _callback_impl(*args: np.ndarray, callback: Callable[..., Any], out_avals: tuple, **_: Any) -> list[np.ndarray]:
    results = callback(*args)
    return [np.asarray(r, dtype=a.dtype).reshape(a.shape) for r, a in zip(results, out_avals)]


def _callback_jvp(*_: Any, **__: Any) -> Any:
    raise ValueError("Pure callbacks do not support JVP. Please use `jax.custom_jvp` to use callbacks while taking "
                     "gradients.")


pure_callback_p = define_primitive("pure_callback", _callback_impl,
                                   lambda *avals, out_avals, **_: list(out_avals),
                                   lambda specs, avals, **params: replicate_all(specs, avals, params["out_ndims"]),
                                   multiple_results=True)
jvp_rules[pure_callback_p] = _callback_jvp


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call the host function `callback` on NumPy values of `args` (eagerly, or when a jitted program runs), its
    results typed as `result_shape_dtypes` says (a pytree of ShapeDtypeStructs or arrays). Under vmap it runs
    once per batch element. It must be pure: it may run once per process, and never under a JVP."""
    flat_args, in_tree = tree_flatten(args)
    shapes, out_tree = tree_flatten(result_shape_dtypes)
    out_avals = tuple(ShapedArray(tuple(s.shape), np.dtype(s.dtype)) for s in shapes)

    def flat_callback(*values: np.ndarray) -> list[Any]:
        result = callback(*tree_unflatten(in_tree, list(values)), **kwargs)
        leaves, tree = tree_flatten(result)
        if tree != out_tree:
            raise TypeError(f"pure_callback: the callback returned {tree}, but result_shape_dtypes is {out_tree}.")
        return leaves

    outs = pure_callback_p.bind(*flat_args, callback=flat_callback, out_avals=out_avals)
    return tree_unflatten(out_tree, list(outs))


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """Call `callback` on NumPy values of `args`; its results are typed as `result_shape_dtypes` (a pytree of
    ShapeDtypeStructs or arrays). It runs on every process, once per evaluation."""
    return pure_callback(callback, result_shape_dtypes, *args, sharding=sharding, **kwargs)
