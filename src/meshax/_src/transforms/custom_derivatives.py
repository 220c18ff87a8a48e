"""custom_jvp and custom_vjp: functions whose derivative the user defines (JAX's API and semantics).

Outside any transformation a call runs the function itself. Otherwise it binds a primitive
carrying the Python function and the user's rules: forward mode calls the user's jvp rule
(for custom_vjp, runs `fwd` and leaves a `custom_lin` equation that transposes by calling
`bwd`); interpreters that evaluate at once (vmap, shard_map, partial evaluation) run the
function in place; staging traces it to a jaxpr (closure-converted) and stages the call with
it, which later evaluations run as any jaxpr.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

from ..core.core import Primitive, abstract_eval_rules, aval_of, current_trace, eager_trace, keeps_own_vma, vma_rules
from ..interpreters.ad import Zero, instantiate, jvp_rules, tangent_aval, transpose_rules
from ..interpreters.batching import batching_rules
from ..interpreters.eager import eager_rules
from ..interpreters.numpy_eval import structured_rules
from ..interpreters.staging import consts_as_inputs, inline_rules, staging_rules, trace_to_jaxpr
from ..core.dtypes import dtype_of, float0
from ..core.jaxpr import eval_jaxpr
from ..primitives import array_primitives as P
from ..tree.tree_util import tree_flatten, tree_unflatten


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

    def __str__(self) -> str:  # as a jaxpr prints the call: the function's name
        return getattr(self.fun, "__name__", type(self.fun).__name__)

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


class _Rule:
    """A user's rule (jvp, fwd, bwd), printed in jaxprs by its name."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self.function = function
        self.symbolic_zeros = getattr(function, "symbolic_zeros", False)  # defvjp(symbolic_zeros=True)'s fwd

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __str__(self) -> str:
        return getattr(self.function, "__name__", type(self.function).__name__)


def _untransformed() -> bool:
    """No transformation is active (eager evaluation): the function runs as it is, once, as in JAX."""
    return current_trace() is eager_trace()


# A call binds with jaxpr=None (the Python function, not traced yet); staging binds it with the traced jaxpr.


def _eval_call(*args: Any, jaxpr: Any, num_consts: int, call: _Call, **_: Any) -> list[Any]:
    if jaxpr is None:  # an interpreter that evaluates at once: the function runs in it
        return call.flat(call.fun)(*args)
    return eval_jaxpr(jaxpr, (), args)


def _call_avals(*avals: Any, jaxpr: Any, call: _Call, **_: Any) -> list[Any]:
    if jaxpr is None:
        jaxpr, _ = call.jaxpr()
    return [v.aval for v in jaxpr.outvars]


def _structured(run: Callable[..., Any], *args: Any, jaxpr: Any, call: _Call, **_: Any) -> list[Any]:
    if jaxpr is None:
        from ..interpreters.numpy_eval import host

        jaxpr, consts = call.jaxpr()
        return run(jaxpr, (), [host(c) for c in consts] + list(args))
    return run(jaxpr, (), args)


def _call_primitive(name: str) -> Primitive:
    primitive = Primitive(name, multiple_results=True)
    abstract_eval_rules[primitive] = _call_avals
    inline_rules[primitive] = _eval_call
    structured_rules[primitive] = _structured
    vma_rules[primitive] = keeps_own_vma

    def stage(trace: Any, *args: Any, jaxpr: Any, num_consts: int, call: _Call, **params: Any) -> Any:
        """Staged with the function traced to a jaxpr (its captured values become leading inputs)."""
        if jaxpr is None:
            jaxpr, consts = call.jaxpr()
            args, num_consts = (*consts, *args), len(consts)
        return trace.stage(primitive, args, dict(jaxpr=jaxpr, num_consts=num_consts, call=call, **params))

    staging_rules[primitive] = stage
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
        if _untransformed():
            return self.fun(*args)
        call = _Call(self.fun, args, self.nondiff_argnums)
        outs = custom_jvp_call_p.bind(*call.leaves, jaxpr=None, num_consts=0, call=call, rule=_Rule(self.jvp))
        return tree_unflatten(call.out_tree[0], outs)


def instantiate_typed(t: Any) -> Any:
    """A tangent or cotangent as the value a user's rule sees: a symbolic zero becomes zeros of its type, weakly
    typed where the type is (the zero tangent of a Python scalar is, in JAX)."""
    if not isinstance(t, Zero):
        return t
    zeros = instantiate(t)
    if t.aval.weak_type and t.aval.dtype != float0:
        scalar = zeros.dtype.type(0).item()  # a Python 0 of the kind: weakly typed itself, and no staged equation
        if t.aval.shape == () and dtype_of(scalar) == (t.aval.dtype, True):
            return scalar
        return P.convert_element_type.bind(zeros, new_dtype=t.aval.dtype, weak_type=True)
    return zeros


def _custom_jvp_jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Any, num_consts: int, call: _Call,
                    rule: Callable[..., Any]) -> tuple[list[Any], list[Any]]:
    leaves = primals[num_consts:]
    tangent_leaves = [instantiate_typed(t) for t in tangents[num_consts:]]
    nondiff = [call.nondiff[i] for i in sorted(call.nondiff)]
    diff_primals = tuple(tree_unflatten(call.tree, leaves))
    diff_tangents = tuple(tree_unflatten(call.tree, tangent_leaves))
    out, tangent_out = rule(*nondiff, diff_primals, diff_tangents)
    out_leaves, out_tree = tree_flatten(out)
    if not call.out_tree:
        call.out_tree.append(out_tree)
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
        if _untransformed():
            return self.fun(*args)
        call = _Call(self.fun, args, self.nondiff_argnums)
        outs = custom_vjp_call_p.bind(*call.leaves, jaxpr=None, num_consts=0, call=call, fwd=_Rule(self.fwd),
                                      bwd=_Rule(self.bwd))
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
    out_leaves, out_tree = tree_flatten(out)
    if not call.out_tree:
        call.out_tree.append(out_tree)
    res_leaves, res_tree = tree_flatten(residuals)
    out_avals = tuple(tangent_aval(aval_of(o)) for o in out_leaves)
    tangent_in = [instantiate_typed(t) for t in tangents[num_consts:]]
    if all(isinstance(t, Zero) for t in tangents[num_consts:]):
        return out_leaves, [Zero(a) for a in out_avals]
    tangent_out = custom_lin_p.bind(*res_leaves, *tangent_in, num_res=len(res_leaves), res_tree=res_tree,
                                    out_avals=out_avals, call=call, bwd=bwd)
    return out_leaves, tangent_out


def _custom_lin_transpose(cts: list[Any], *args: Any, num_res: int, res_tree: Any, out_avals: tuple, call: _Call,
                          bwd: Callable[..., Any]) -> list[Any]:
    residuals = tree_unflatten(res_tree, list(args[:num_res]))
    cts = [instantiate_typed(c) for c in cts]
    ct_out = tree_unflatten(call.out_tree[0], cts)
    nondiff = [call.nondiff[i] for i in sorted(call.nondiff)]
    in_cts = bwd(*nondiff, residuals, ct_out)
    if not isinstance(in_cts, (tuple, list)):
        raise TypeError(f"Custom VJP bwd rule must produce a tuple of cotangents, one per differentiable argument; "
                        f"got {type(in_cts).__name__}.")
    leaves = tree_flatten(tuple(in_cts), is_leaf=lambda x: x is None)[0]
    linear = args[num_res:]
    for index, (ct, arg) in enumerate(zip(leaves, linear)):
        expected = getattr(arg, "aval", None)
        if ct is not None and expected is not None and tuple(aval_of(ct).shape) != tuple(expected.shape):
            raise ValueError(f"Custom VJP bwd rule must produce an output with the same type as the args tuple of the "
                             f"primal function, but at output[{index}] the bwd rule produced an output of type "
                             f"{aval_of(ct).str_short()} corresponding to an input of type {expected.str_short()}, so "
                             "the shapes do not match")
    return [None] * num_res + list(leaves[:len(linear)])


jvp_rules[custom_vjp_call_p] = _custom_vjp_jvp
transpose_rules[custom_lin_p] = _custom_lin_transpose


# ---- vmap: the function and the user's rules, each vmapped -------------------------------------------------------


def _batched_leading(values: list[Any], dims: list[Any]) -> list[Any]:
    """Every value with the batch dimension first (unbatched ones broadcast along it)."""
    from .. import numpy as jnp

    size = next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)
    return [jnp.moveaxis(v, d, 0) if d is not None else jnp.broadcast_to(v, (size, *aval_of(v).shape))
            for v, d in zip(values, dims)]


def _batch_custom_jvp(values: list[Any], dims: list[Any], **params: Any) -> tuple[list[Any], list[int]]:
    """A custom_jvp function of the whole batch: vmap of the function, whose jvp rule is vmap of the user's."""
    from .vmap import vmap

    batched = custom_jvp(vmap(lambda *xs: _eval_call(*xs, **params)))
    batched.defjvp(lambda primals, tangents: vmap(
        lambda p, t: _custom_jvp_jvp(list(p), list(t), **params))(primals, tangents))
    outs = batched(*_batched_leading(values, dims))
    return list(outs), [0] * len(outs)


def _batch_custom_vjp(values: list[Any], dims: list[Any], *, jaxpr: Any, num_consts: int, call: _Call,
                      fwd: Callable[..., Any], bwd: Callable[..., Any]) -> tuple[list[Any], list[int]]:
    """A custom_vjp function of the whole batch: vmap of the function, of `fwd` and of `bwd`."""
    from .. import numpy as jnp
    from .vmap import vmap

    params = dict(jaxpr=jaxpr, num_consts=num_consts, call=call)
    example_avals = [aval_of(v) for v in values]
    example_avals = [a.update(shape=tuple(n for i, n in enumerate(a.shape) if i != d)) if d is not None else a
                     for a, d in zip(example_avals, dims)]

    def fwd_one(*xs: Any) -> tuple[list[Any], Any]:
        out, residuals = fwd(*call.args(xs[num_consts:]))
        out_leaves, out_tree = tree_flatten(out)
        if not call.out_tree:
            call.out_tree.append(out_tree)
        return out_leaves, residuals

    def bwd_one(residuals: Any, cts: list[Any]) -> list[Any]:
        nondiff = [call.nondiff[i] for i in sorted(call.nondiff)]
        in_cts = bwd(*nondiff, residuals, tree_unflatten(call.out_tree[0], cts))
        leaves = tree_flatten(tuple(in_cts), is_leaf=lambda x: x is None)[0]
        return [jnp.zeros(a.shape, a.dtype) if ct is None else ct
                for a, ct in zip(example_avals, [None] * num_consts + list(leaves))]

    batched = custom_vjp(vmap(lambda *xs: _eval_call(*xs, **params)))
    batched.defvjp(vmap(fwd_one), lambda residuals, cts: tuple(vmap(bwd_one)(residuals, list(cts))))
    outs = batched(*_batched_leading(values, dims))
    return list(outs), [0] * len(outs)


batching_rules[custom_jvp_call_p] = _batch_custom_jvp
batching_rules[custom_vjp_call_p] = _batch_custom_vjp
