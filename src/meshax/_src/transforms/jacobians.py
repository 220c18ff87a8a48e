"""Jacobians and Hessians (jax.jacfwd, jax.jacrev, jax.hessian) from jvp and vjp, one basis vector at a time.

The result nests like JAX's: the output's tree outside, the differentiated arguments'
tree inside, each leaf shaped output.shape + input.shape.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from .. import numpy as jnp
from .autodiff import _argnums, _check_inputs, jvp, vjp
from ..core.core import aval_of
from ..tree.tree_util import tree_flatten, tree_unflatten


def _diff_args(fun: Callable[..., Any], args: tuple, kwargs: dict, argnums: int | Sequence[int],
               name: str) -> tuple[Callable[..., Any], tuple]:
    nums = _argnums(argnums, len(args), name)

    def partial(*chosen: Any) -> Any:
        full = list(args)
        for i, value in zip(nums, chosen):
            full[i] = value
        return fun(*full, **kwargs)

    return partial, tuple(args[i] for i in nums)


def _basis(avals: Sequence[Any], leaf: int, k: int) -> list[np.ndarray]:
    """The k-th unit vector of leaf `leaf`, zeros elsewhere (host values)."""
    out = [np.zeros(a.shape, a.dtype) for a in avals]
    out[leaf].reshape(-1)[k] = 1
    return out


def _assemble(out_avals: Sequence[Any], in_avals: Sequence[Any], columns: dict, out_first: bool) -> list[list[Any]]:
    """blocks[i][j]: d out_i / d in_j shaped out_i.shape + in_j.shape, from the per-basis-vector results."""
    blocks = []
    for i, oa in enumerate(out_avals):
        row = []
        for j, ia in enumerate(in_avals):
            if out_first:  # reverse mode: one cotangent per output element, each gives an input-shaped block
                parts = [columns[(i, k)][j] for k in range(oa.size)]
            else:  # forward mode: one tangent per input element, each gives an output-shaped block
                parts = [columns[(j, k)][i] for k in range(ia.size)]
            stacked = jnp.stack([jnp.reshape(p, (-1,)) for p in parts], axis=0) if parts else \
                jnp.zeros((0, (ia if out_first else oa).size), (ia if out_first else oa).dtype)
            matrix = stacked if out_first else jnp.transpose(stacked)
            row.append(jnp.reshape(matrix, tuple(oa.shape) + tuple(ia.shape)))
        blocks.append(row)
    return blocks


def _nest(out_tree: Any, in_tree: Any, blocks: list[list[Any]], single: bool) -> Any:
    rows = [tree_unflatten(in_tree, row) for row in blocks]
    rows = [r[0] if single else r for r in rows]
    return tree_unflatten(out_tree, rows)


def jacrev(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """The Jacobian of `fun` by reverse mode: one vjp per output element."""

    @functools.wraps(fun, updated=())
    def jacobian(*args: Any, **kwargs: Any) -> Any:
        partial, diff = _diff_args(fun, args, kwargs, argnums, "jacrev")
        _check_inputs(tree_flatten(diff)[0], "jacrev", holomorphic, allow_int)
        out = vjp(partial, *diff, has_aux=has_aux)
        y, pullback = out[0], out[1]
        y_leaves, y_tree = tree_flatten(y)
        out_avals = [aval_of(leaf) for leaf in y_leaves]
        in_leaves, in_tree = tree_flatten(diff)
        columns = {}
        for i, a in enumerate(out_avals):
            for k in range(a.size):
                cts = pullback(tree_unflatten(y_tree, _basis(out_avals, i, k)))
                columns[(i, k)] = tree_flatten(cts)[0]
        blocks = _assemble(out_avals, [aval_of(x) for x in in_leaves], columns, out_first=True)
        result = _nest(y_tree, in_tree, blocks, isinstance(argnums, int))
        return (result, out[2]) if has_aux else result

    return jacobian


def jacfwd(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """The Jacobian of `fun` by forward mode: one jvp per input element."""

    @functools.wraps(fun, updated=())
    def jacobian(*args: Any, **kwargs: Any) -> Any:
        partial, diff = _diff_args(fun, args, kwargs, argnums, "jacfwd")
        _check_inputs(tree_flatten(diff)[0], "jacfwd", holomorphic, False)
        in_leaves, in_tree = tree_flatten(diff)
        in_avals = [aval_of(x) for x in in_leaves]
        columns, y_tree, out_avals, aux = {}, None, None, None
        for j, a in enumerate(in_avals):
            for k in range(a.size):
                tangents = tree_unflatten(in_tree, _basis(in_avals, j, k))
                result = jvp(partial, diff, tangents, has_aux=has_aux)
                leaves, y_tree = tree_flatten(result[1])
                out_avals = [aval_of(leaf) for leaf in tree_flatten(result[0])[0]]
                columns[(j, k)] = leaves
                aux = result[2] if has_aux else None
        if out_avals is None:  # no input elements: evaluate once for the output's structure
            y = partial(*diff)
            y = y[0] if has_aux else y
            leaves, y_tree = tree_flatten(y)
            out_avals = [aval_of(leaf) for leaf in leaves]
        blocks = _assemble(out_avals, in_avals, columns, out_first=False)
        result = _nest(y_tree, in_tree, blocks, isinstance(argnums, int))
        return (result, aux) if has_aux else result

    return jacobian


def hessian(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable[..., Any]:
    """The Hessian of a scalar `fun`: jacfwd of jacrev."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums, has_aux=has_aux,
                  holomorphic=holomorphic)
