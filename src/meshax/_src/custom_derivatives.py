"""custom_jvp and custom_vjp: functions whose derivative the user defines (JAX's API and semantics).

A call binds a primitive carrying the function traced to a jaxpr (closure-converted) and
the user's rules. Every interpreter but forward mode evaluates the jaxpr in place; forward
mode calls the user's jvp rule, or, for custom_vjp, runs `fwd` and leaves a `custom_lin`
equation that transposes by calling `bwd`.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

from .core import Primitive, abstract_eval_rules, aval_of, keeps_own_vma, vma_rules
from .interpreters.ad import Zero, instantiate, jvp_rules, tangent_aval, transpose_rules
from .interpreters.eager import eager_rules
from .interpreters.numpy_eval import structured_rules
from .interpreters.staging import consts_as_inputs, inline_rules, trace_to_jaxpr
from .jaxpr import eval_jaxpr
from .tree_util import tree_flatten, tree_unflatten


def _resolve(fun: Callable[..., Any], args: tuple, kwargs: dict) -> tuple:
    """Keyword arguments bound to positions, as JAX does before calling the rules."""
    if not kwargs:
        return args
    bound = inspect.signature(fun).bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args)


class _Call:
    """A call of a custom-derivative function: its differentiable leaves and how to rebuild the arguments."""

    def __init__(self, fun: Callable[..., Any], args: tuple, nondiff_argnums: Sequence[int]) -> None:
        self.count = len(args)
        self.nondiff = {i: args[i] for i in nondiff_argnums}
        diff = tuple(a for i, a in enumerate(args) if i not in self.nondiff)
        self.leaves, self.tree = tree_flatten(diff)
        self.out_tree: list[Any] = []
        self.fun = fun

    def args(self, leaves: Sequence[Any]) -> list[Any]:
        diff = iter(tree_unflatten(self.tree, list(leaves)))
        return [self.nondiff[i] if i in self.nondiff else next(diff) for i in range(self.count)]

    def flat(self, function: Callable[..., Any]) -> Callable[..., list[Any]]:
        def run(*leaves: Any) -> list[Any]:
            out_leaves, tree = tree_flatten(function(*self.args(leaves)))
            self.out_tree.append(tree)
            return out_leaves
        return run

    def jaxpr(self) -> tuple[Any, list[Any]]:
        jaxpr, _ = trace_to_jaxpr(self.flat(self.fun), [aval_of(x) for x in self.leaves])
        return consts_as_inputs(jaxpr), list(jaxpr.consts)


def _eval_call(*args: Any, jaxpr: Any, num_consts: int, **_: Any) -> list[Any]:
    return eval_jaxpr(jaxpr, (), args)


def _call_avals(*avals: Any, jaxpr: Any, **_: Any) -> list[Any]:
    return [v.aval for v in jaxpr.outvars]


def _call_primitive(name: str) -> Primitive:
    primitive = Primitive(name, multiple_results=True)
    abstract_eval_rules[primitive] = _call_avals
    inline_rules[primitive] = _eval_call
    structured_rules[primitive] = lambda run, *args, jaxpr, **_: run(jaxpr, (), args)
    vma_rules[primitive] = keeps_own_vma
    return primitive


custom_jvp_call_p = _call_primitive("custom_jvp_call")
custom_vjp_call_p = _call_primitive("custom_vjp_call")


class custom_jvp:  # noqa: N801 - JAX's name
    """A function with a user-defined jvp rule: `f.defjvp(lambda primals, tangents: (out, tangent_out))`."""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun, updated=())  # not fun.__dict__ (a wrapped Jitted's state)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable[..., Any] | None = None

    def defjvp(self, jvp: Callable[..., Any], symbolic_zeros: bool = False) -> Callable[..., Any]:
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """One tangent function per argument: `jvp_i(g_i, ans, *primals)`; their contributions are summed."""

        def jvp(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
            ans = self.fun(*primals)
            out = None
            for rule, g in zip(jvps, tangents):
                if rule is None:
                    continue
                term = rule(g, ans, *primals)
                out = term if out is None else out + term
            return ans, out

        self.defjvp(jvp)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {self.__name__} using defjvp.")
        args = _resolve(self.fun, args, kwargs)
        call = _Call(self.fun, args, self.nondiff_argnums)
        jaxpr, consts = call.jaxpr()
        outs = custom_jvp_call_p.bind(*consts, *call.leaves, jaxpr=jaxpr, num_consts=len(consts), call=call,
                                      rule=self.jvp)
        return tree_unflatten(call.out_tree[0], outs)


def _custom_jvp_jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Any, num_consts: int, call: _Call,
                    rule: Callable[..., Any]) -> tuple[list[Any], list[Any]]:
    leaves = primals[num_consts:]
    tangent_leaves = [instantiate(t) for t in tangents[num_consts:]]
    nondiff = [call.nondiff[i] for i in sorted(call.nondiff)]
    diff_primals = tuple(tree_unflatten(call.tree, leaves))
    diff_tangents = tuple(tree_unflatten(call.tree, tangent_leaves))
    out, tangent_out = rule(*nondiff, diff_primals, diff_tangents)
    out_leaves = tree_flatten(out)[0]
    tangent_leaves_out = tree_flatten(tangent_out)[0]
    if len(tangent_leaves_out) != len(out_leaves):
        raise TypeError(f"Custom JVP rule must produce primal and tangent outputs with equal container (pytree) "
                        f"structures, but got {tree_flatten(out)[1]} and {tree_flatten(tangent_out)[1]}.")
    return out_leaves, tangent_leaves_out


jvp_rules[custom_jvp_call_p] = _custom_jvp_jvp


class custom_vjp:  # noqa: N801 - JAX's name
    """A function with user-defined forward and backward passes: `f.defvjp(fwd, bwd)`."""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun, updated=())  # not fun.__dict__ (a wrapped Jitted's state)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any], symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        if symbolic_zeros:
            from .symbolic_zeros import wrap_symbolic

            fwd, bwd = wrap_symbolic(fwd, bwd)
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {self.__name__} using defvjp.")
        args = _resolve(self.fun, args, kwargs)
        call = _Call(self.fun, args, self.nondiff_argnums)
        jaxpr, consts = call.jaxpr()
        outs = custom_vjp_call_p.bind(*consts, *call.leaves, jaxpr=jaxpr, num_consts=len(consts), call=call,
                                      fwd=self.fwd, bwd=self.bwd)
        return tree_unflatten(call.out_tree[0], outs)


custom_lin_p = Primitive("custom_lin", multiple_results=True)
abstract_eval_rules[custom_lin_p] = lambda *avals, out_avals, **_: list(out_avals)
vma_rules[custom_lin_p] = keeps_own_vma


def _no_forward_mode(*args: Any, **params: Any) -> Any:
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


eager_rules[custom_lin_p] = _no_forward_mode


def _custom_vjp_jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Any, num_consts: int, call: _Call,
                    fwd: Callable[..., Any], bwd: Callable[..., Any]) -> tuple[list[Any], list[Any]]:
    leaves = primals[num_consts:]
    if getattr(fwd, "symbolic_zeros", False):  # defvjp(symbolic_zeros=True): inputs say whether they are perturbed
        from .symbolic_zeros import CustomVJPPrimal

        leaves = [CustomVJPPrimal(x, not isinstance(t, Zero)) for x, t in zip(leaves, tangents[num_consts:])]
    result = fwd(*call.args(leaves))
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError("Custom VJP fwd rule must produce a pair (list or tuple of length two) representing primal "
                        f"outputs and residuals (values stored from the forward pass for use on the backward pass), "
                        f"got {type(result).__name__}.")
    out, residuals = result
    out_leaves = tree_flatten(out)[0]
    res_leaves, res_tree = tree_flatten(residuals)
    out_avals = tuple(tangent_aval(aval_of(o)) for o in out_leaves)
    tangent_in = [instantiate(t) for t in tangents[num_consts:]]
    if all(isinstance(t, Zero) for t in tangents[num_consts:]):
        return out_leaves, [Zero(a) for a in out_avals]
    tangent_out = custom_lin_p.bind(*res_leaves, *tangent_in, num_res=len(res_leaves), res_tree=res_tree,
                                    out_avals=out_avals, call=call, bwd=bwd)
    return out_leaves, tangent_out


def _custom_lin_transpose(cts: list[Any], *args: Any, num_res: int, res_tree: Any, out_avals: tuple, call: _Call,
                          bwd: Callable[..., Any]) -> list[Any]:
    residuals = tree_unflatten(res_tree, list(args[:num_res]))
    cts = [instantiate(c) for c in cts]
    ct_out = tree_unflatten(call.out_tree[0], cts)
    nondiff = [call.nondiff[i] for i in sorted(call.nondiff)]
    in_cts = bwd(*nondiff, residuals, ct_out)
    if not isinstance(in_cts, (tuple, list)):
        raise TypeError(f"Custom VJP bwd rule must produce a tuple of cotangents, one per differentiable argument; "
                        f"got {type(in_cts).__name__}.")
    leaves = tree_flatten(tuple(in_cts), is_leaf=lambda x: x is None)[0]
    linear = args[num_res:]
    return [None] * num_res + list(leaves[:len(linear)])


jvp_rules[custom_vjp_call_p] = _custom_vjp_jvp
transpose_rules[custom_lin_p] = _custom_lin_transpose
