"""jax.custom_batching: functions whose vmap the user defines (custom_vmap) and sequential_vmap.

A call outside any transformation runs the function. Otherwise it binds `custom_vmap_call`, a call
primitive built as custom_jvp's (staged with the traced function, run in place by interpreters that
evaluate at once). vmap calls the user's rule `rule(axis_size, in_batched, *args) -> (out, out_batched)`
on the arguments with their batch dimension first; forward mode differentiates through a custom_vmap
of the jvp (so vmap of jvp still uses the rule); reverse mode raises ValueError, as in JAX.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ..core.core import aval_of
from ..interpreters.batching import batching_rules
from ..interpreters.ad import jvp_rules
from ..interpreters.staging import partial_eval_rules
from ..primitives.batch_dims import move_to_front
from ..tree.tree_util import tree_flatten, tree_map, tree_unflatten
from .custom_derivatives import _Call, _Rule, _call_primitive, _eval_call, _resolve, _untransformed, instantiate_typed

custom_vmap_call_p = _call_primitive("custom_vmap_call")


class custom_vmap:  # noqa: N801 - JAX's name
    """A function with a user-defined vmap rule: `f.def_vmap(lambda axis_size, in_batched, *args: (out, out_batched))`.

    `in_batched` is a list with one tree of booleans per argument; `out_batched` must have `out`'s structure."""

    def __init__(self, fun: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.vmap_rule: Callable[..., Any] | None = None

    def def_vmap(self, vmap_rule: Callable[..., Any]) -> Callable[..., Any]:
        """Set the vmap rule; returns it (usable as a decorator)."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = _resolve(self.fun, args, kwargs)
        if _untransformed():
            return self.fun(*args)
        call = _Call(self.fun, args, ())
        outs = custom_vmap_call_p.bind(*call.leaves, jaxpr=None, num_consts=0, call=call,
                                       rule=_Rule(self._missing_rule if self.vmap_rule is None else self.vmap_rule))
        return tree_unflatten(call.out_tree[0], outs)

    def _missing_rule(self, *args: Any) -> Any:
        raise AttributeError(f"No batching rule defined for custom_vmap function {self.__name__} using def_vmap.")


def _rule_outputs(rule: _Rule, call: _Call, size: int, batched: list[bool], leaves: list[Any]) -> tuple[list, list]:
    """The user's rule on the argument leaves (batch dimension first where `batched`): flat outputs and flags."""
    in_batched = list(tree_unflatten(call.tree, batched))
    out, out_batched = rule(size, in_batched, *call.args(leaves))
    out_leaves, out_tree = tree_flatten(out)
    flags, flags_tree = tree_flatten(out_batched)
    if flags_tree != out_tree:
        raise ValueError(f"structure of output value and output batching specification returned by custom vmap rule "
                         f"({rule}) do not match.\nOutput values: {out_tree}\nBatching spec: {flags_tree}")
    if not call.out_tree:
        call.out_tree.append(out_tree)
    return out_leaves, [bool(f) for f in flags]


def _batch_custom_vmap(values: list[Any], dims: list[Any], *, jaxpr: Any, num_consts: int, call: _Call,
                       rule: _Rule) -> tuple[list[Any], list[int | None]]:
    """vmap of a custom_vmap call: the user's rule on the whole batch."""
    if any(d is not None for d in dims[:num_consts]):
        raise NotImplementedError(f"custom_vmap function {call} closes over a value batched by an enclosing vmap; "
                                  "pass that value as an argument instead.")
    size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
    leaves = [v if d is None else move_to_front(v, d, size) for v, d in zip(values[num_consts:], dims[num_consts:])]
    out, flags = _rule_outputs(rule, call, size, [d is not None for d in dims[num_consts:]], leaves)
    return out, [0 if f else None for f in flags]


def _custom_vmap_jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Any, num_consts: int, call: _Call,
                     rule: _Rule) -> tuple[list[Any], list[Any]]:
    """Forward mode: a custom_vmap of the function's jvp, whose vmap rule is the jvp of the user's rule."""
    from .autodiff import jvp

    consts, leaves = primals[:num_consts], primals[num_consts:]
    tangent_leaves = [instantiate_typed(t) for t in tangents[num_consts:]]
    count = len(leaves)

    def jvp_of_fun(*primals_and_tangents: Any) -> list[Any]:
        ps, ts = primals_and_tangents[:count], primals_and_tangents[count:]
        out, out_t = jvp(lambda *xs: _eval_call(*consts, *xs, jaxpr=jaxpr, num_consts=num_consts, call=call), ps, ts)
        return list(out) + list(out_t)

    def jvp_of_rule(size: int, in_batched: list[bool], *primals_and_tangents: Any) -> tuple[list, list]:
        batched = [p or t for p, t in zip(in_batched[:count], in_batched[count:])]
        xs = [move_to_front(x, None, size) if want and not b else x
              for x, b, want in zip(primals_and_tangents, in_batched, batched * 2)]
        flags: list[list[bool]] = []

        def primal_rule(*ps: Any) -> list[Any]:
            out, out_flags = _rule_outputs(rule, call, size, batched, list(ps))
            flags.append(out_flags)
            return out

        out, out_t = jvp(primal_rule, tuple(xs[:count]), tuple(xs[count:]))
        return list(out) + list(out_t), flags[0] * 2

    jvp_of_fun.__name__ = f"jvp({call})"
    jvp_function = custom_vmap(jvp_of_fun)
    jvp_function.def_vmap(jvp_of_rule)
    outs = jvp_function(*leaves, *tangent_leaves)
    half = len(outs) // 2
    return outs[:half], outs[half:]


def _not_linearizable(trace: Any, *args: Any, call: _Call, **params: Any) -> Any:
    raise ValueError(f"custom_vmap function {call} cannot be differentiated in reverse mode (grad, vjp, linearize): "
                     "JAX defines only its forward mode (jvp); differentiate the function it wraps instead.")


def sequential_vmap(f: Callable[..., Any]) -> custom_vmap:
    """`f` as a custom_vmap whose vmap runs `f` once per batch element in a loop (lax.map) and stacks the results."""
    from ..lax.control_flow import map as lax_map

    function = custom_vmap(f)

    def rule(axis_size: int, in_batched: list, *args: Any) -> tuple[Any, Any]:
        leaves, tree = tree_flatten(args)
        flags = tree_flatten(in_batched)[0]
        mapped = [x for x, b in zip(leaves, flags) if b]

        def one(xs: list[Any]) -> Any:
            it = iter(xs)
            return f(*tree_unflatten(tree, [next(it) if b else x for x, b in zip(leaves, flags)]))

        out = lax_map(one, mapped)
        return out, tree_map(lambda _: True, out)

    function.def_vmap(rule)
    return function


batching_rules[custom_vmap_call_p] = _batch_custom_vmap
jvp_rules[custom_vmap_call_p] = _custom_vmap_jvp
partial_eval_rules[custom_vmap_call_p] = _not_linearizable
