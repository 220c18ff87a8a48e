"""Control flow as primitives with traced bodies: scan, while_loop, cond/switch (and fori_loop, map on top).

Bodies are traced once into closure-converted jaxprs. A staging trace records one equation;
every other trace expands it in place: eagerly and per device the loop runs in Python, each
step's equations going through that trace's rules, so forward and reverse mode of scan (and of
cond on a concrete predicate) need no rules of their own. while_loop and cond also have jvp
rules, for predicates that are not concrete (under jit); reverse mode of while_loop is refused
as JAX refuses it.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..sharding.explicit_rules import format_spec
from ..core.core import Primitive, Tracer, abstract_eval_rules, aval_of, keeps_own_vma, vma_rules
from ..interpreters.ad import Zero, instantiate, jvp_flat, jvp_rules, tangent_aval
from ..interpreters.codegen_loops import scan_function, while_function
from ..interpreters.eager import plain_eager_call
from ..interpreters.eager_programs import run_eagerly
from ..interpreters.numpy_eval import structured_rules
from ..interpreters.shard_map import device_rules
from ..interpreters.staging import consts_as_inputs, inline_rules, partial_eval_rules, trace_to_jaxpr
from ..core.jaxpr import Jaxpr, eval_jaxpr
from ..tree.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten
from ..core.dtypes import issubdtype
from ..numpy import promotion as U
from . import joined_scan, loop_steps


def _traced(fun: Callable[..., Any], avals: Sequence[Any], in_tree: Any) -> tuple[Jaxpr, list[Any], Any]:
    """`fun` traced on avals of the flattened arguments: (jaxpr with consts as leading inputs, consts, out tree)."""
    out_tree = []

    def flat(*xs: Any) -> list[Any]:
        leaves, tree = tree_flatten(fun(*tree_unflatten(in_tree, list(xs))))
        out_tree.append(tree)
        return leaves

    jaxpr, _ = trace_to_jaxpr(flat, list(avals))
    return consts_as_inputs(jaxpr), list(jaxpr.consts), out_tree[0]


def _closed(fun: Callable[..., list[Any]], avals: Sequence[Any]) -> tuple[Jaxpr, list[Any]]:
    """A flat function traced into a jaxpr taking its captured values first, and those values."""
    jaxpr, _ = trace_to_jaxpr(fun, list(avals))
    return consts_as_inputs(jaxpr), list(jaxpr.consts)


def _call_primitive(name: str, out_avals: Callable[..., list[Any]], expand: Callable[..., list[Any]]) -> Primitive:
    primitive = Primitive(name, multiple_results=True)
    abstract_eval_rules[primitive] = out_avals
    inline_rules[primitive] = expand
    vma_rules[primitive] = keeps_own_vma
    return primitive


def _types(avals: Sequence[Any]) -> list[tuple]:
    return [(tuple(a.shape), np.dtype(a.dtype)) for a in avals]


def _strengthened(carry_avals: list[Any], carry_out: Sequence[Any]) -> list[Any] | None:
    """A loop carry stays weakly typed (as JAX's) unless the body returns it strongly typed: then the carry avals
    to trace the body again with, else None."""
    strong = [a.weak_type and not getattr(b, "weak_type", False) for a, b in zip(carry_avals, carry_out)]
    return [a.update(weak_type=False) if s else a for a, s in zip(carry_avals, strong)] if any(strong) else None


# ---- scan --------------------------------------------------------------------------------------------------------


def _index(x: Any, i: int) -> Any:
    return P.static_slice.bind(x, index=(i,))


def _stack(values: Sequence[Any], aval: Any, length: int) -> Any:
    if not values:
        return np.zeros((0,) + tuple(aval.shape), aval.dtype)
    rows = [P.reshape.bind(v, new_sizes=(1,) + tuple(aval.shape)) for v in values]
    return rows[0] if len(rows) == 1 else P.concatenate.bind(*rows, axis=0)


def _scan_expand(*args: Any, jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int, reverse: bool,
                 unroll: int = 1) -> list[Any]:
    consts, carry, xs = list(args[:num_consts]), list(args[num_consts:num_consts + num_carry]), \
        list(args[num_consts + num_carry:])
    steps: list[list[Any]] = []
    as_calls = plain_eager_call() and not any(isinstance(a, Tracer) for a in args)  # loop_steps.py
    joined = joined_scan.run(_scan_numpy, args, jaxpr=jaxpr, num_consts=num_consts, num_carry=num_carry,
                             length=length, reverse=reverse) if as_calls and length else None
    if joined is not None:
        return joined
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        out = loop_steps.step(jaxpr, consts + carry, xs, i) if as_calls else \
            eval_jaxpr(jaxpr, (), consts + carry + [_index(x, i) for x in xs])
        carry, ys = out[:num_carry], out[num_carry:]
        steps.append(ys)
    if reverse:
        steps.reverse()
    y_avals = [v.aval for v in jaxpr.outvars[num_carry:]]
    return carry + [_stack([s[k] for s in steps], a, length) for k, a in enumerate(y_avals)]


def _scan_avals(*avals: Any, jaxpr: Jaxpr, num_carry: int, length: int, **_: Any) -> list[Any]:
    outs = [v.aval for v in jaxpr.outvars]
    return outs[:num_carry] + [_stacked(a, length) for a in outs[num_carry:]]


def _stacked(aval: Any, length: int) -> Any:
    """The type of `length` values of type `aval` stacked (the new leading dimension is not split)."""
    explicit = ((),) + tuple(aval.explicit) if aval.explicit else ()
    return aval.update(shape=(length,) + tuple(aval.shape), explicit=explicit)


def _row(aval: Any) -> Any:
    """The type of one row of a value of type `aval`; its leading dimension must not be split over Explicit axes."""
    if aval.explicit and aval.explicit[0]:
        raise ValueError(f"0th dimension of all xs should be replicated. Got P{format_spec(aval.explicit)!r}")
    explicit = tuple(aval.explicit[1:]) if any(aval.explicit[1:]) else ()
    return aval.update(shape=tuple(aval.shape[1:]), explicit=explicit)


scan_p = _call_primitive("scan", _scan_avals, _scan_expand)


def scan(f: Callable[..., Any], init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1, _split_transpose: bool = False) -> tuple[Any, Any]:
    """Loop `f(carry, x) -> (carry, y)` over the leading axis of `xs`; returns (final carry, stacked ys)."""
    init_leaves, init_tree = tree_flatten(init)
    xs_leaves, xs_tree = tree_flatten(xs)
    lengths = {aval_of(x).shape[0] for x in xs_leaves if aval_of(x).ndim}
    if any(aval_of(x).ndim == 0 for x in xs_leaves):
        raise ValueError("scan got value with no leading axis to scan over: every leaf of xs needs one.")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ValueError(f"scan got values with different leading axis sizes or a length that disagrees: "
                         f"{sorted(lengths)}." if lengths else "scan got no values to scan over and no length=.")
    n = lengths.pop()
    carry_avals = [aval_of(c) for c in init_leaves]
    x_avals = [_row(aval_of(x)) for x in xs_leaves]

    def body(carry: Any, x: Any) -> Any:
        result = f(carry, x)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError("scan body output must be a pair (carry, y); got "
                            f"{type(result).__name__}.")
        return tuple(result)

    in_tree = tree_structure_of((init, xs))
    jaxpr, consts, out_tree = _traced(lambda c, x: body(c, x), carry_avals + x_avals, in_tree)
    strong = _strengthened(carry_avals, [v.aval for v in jaxpr.outvars[:len(init_leaves)]])
    if strong is not None:
        carry_avals = strong
        jaxpr, consts, out_tree = _traced(lambda c, x: body(c, x), carry_avals + x_avals, in_tree)
    carry_out_tree = out_tree.children()[0] if hasattr(out_tree, "children") else None
    carry_out = [v.aval for v in jaxpr.outvars[:len(init_leaves)]]
    if carry_out_tree is not None and carry_out_tree != init_tree or \
            _types(carry_out) != _types(carry_avals):
        raise TypeError(f"scan body function carry input and carry output must have equal types (shapes and "
                        f"dtypes), but the input carry is {[str(a) for a in carry_avals]} and the output carry "
                        f"is {[str(a) for a in carry_out]}.")
    _check_carry_vma("scan", carry_avals, carry_out)
    _check_carry_sharding("scan", carry_avals, carry_out, f, init)
    outs = scan_p.bind(*consts, *init_leaves, *xs_leaves, jaxpr=jaxpr, num_consts=len(consts),
                       num_carry=len(init_leaves), length=n, reverse=bool(reverse), unroll=int(unroll))
    return tree_unflatten(out_tree, outs)


def _check_carry_vma(name: str, carry_in: Sequence[Any], carry_out: Sequence[Any]) -> None:
    """Inside shard_map a loop's carry must keep its varying manual axes (JAX's check_vma)."""
    for index, (a, b) in enumerate(zip(carry_in, carry_out)):
        if a.vma != b.vma:
            extra = tuple(sorted(b.vma - a.vma))
            raise TypeError(
                f"{name} body function carry input and carry output must have equal types, but they differ: the "
                f"input carry component {index} has type {a.str_short()} but the corresponding output carry component "
                f"has type {b.str_short()}, so the manual axis types do not match. This might be fixed by applying "
                f"`jax.lax.pcast(..., {extra}, to='varying')` to the initial carry value.")


def _check_carry_sharding(name: str, carry_in: Sequence[Any], carry_out: Sequence[Any], body: Callable[..., Any],
                          init: Any) -> None:
    """A loop's carry must keep its Explicit-axes sharding (part of its type, as in JAX, whose message names the
    carry by the body's parameter and the path in it)."""
    for (path, _), a, b in zip(tree_flatten_with_path(init)[0], carry_in, carry_out):
        if a.explicit != b.explicit:
            try:
                parameter = next(iter(inspect.signature(body).parameters))
            except (StopIteration, TypeError, ValueError):
                parameter = "carry"
            raise TypeError(
                f"{name} body function carry input and carry output must have equal types, but they differ:\n\nThe "
                f"input carry {parameter}{keystr(path)} has type {a} but the corresponding output carry component has "
                f"type {b}.\n\nRevise the function so that all output types match the corresponding input types.")


def tree_structure_of(tree: Any) -> Any:
    return tree_flatten(tree)[1]


def map(f: Callable[..., Any], xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001 - jax.lax.map
    """`f` applied to every slice of `xs` along its leading axis, stacked."""
    return scan(lambda carry, x: (carry, f(x)), (), xs)[1]


# ---- while_loop and fori_loop ---------------------------------------------------------------------------------------


def _while_expand(*args: Any, cond_jaxpr: Jaxpr, body_jaxpr: Jaxpr, cond_nconsts: int, body_nconsts: int
                  ) -> list[Any]:
    cond_consts, body_consts = list(args[:cond_nconsts]), list(args[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(args[cond_nconsts + body_nconsts:])
    fused = plain_eager_call() and not any(isinstance(a, Tracer) for a in args)  # eagerly over a mesh: as jit's

    def evaluate(jaxpr: Jaxpr, values: list[Any]) -> list[Any]:
        return run_eagerly(jaxpr, values) if fused else eval_jaxpr(jaxpr, (), values)

    while bool(evaluate(cond_jaxpr, cond_consts + carry)[0]):
        carry = evaluate(body_jaxpr, body_consts + carry)
    return carry


while_p = _call_primitive("while", lambda *avals, body_jaxpr, **_: [v.aval for v in body_jaxpr.outvars],
                          _while_expand)


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """Repeat `body_fun` on the carry while `cond_fun(carry)` is true."""
    leaves, tree = tree_flatten(init_val)
    avals = [aval_of(x) for x in leaves]
    arg_tree = tree_flatten((init_val,))[1]  # the functions take the carry as their one argument
    body_jaxpr, body_consts, body_tree = _traced(body_fun, avals, arg_tree)
    strong = _strengthened(avals, [v.aval for v in body_jaxpr.outvars])
    if strong is not None:
        avals = strong
        body_jaxpr, body_consts, body_tree = _traced(body_fun, avals, arg_tree)
    cond_jaxpr, cond_consts, cond_tree = _traced(cond_fun, avals, arg_tree)
    out = [v.aval for v in cond_jaxpr.outvars]
    if len(out) != 1 or out[0].shape != () or out[0].dtype != np.bool_:
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) {[str(a) for a in out]}.")
    body_out = [v.aval for v in body_jaxpr.outvars]
    if body_tree != tree or _types(body_out) != _types(avals):
        raise TypeError(f"body_fun output and input must have identical types: input {[str(a) for a in avals]}, "
                        f"output {[str(a) for a in body_out]}.")
    _check_carry_vma("while_loop", avals, body_out)
    _check_carry_sharding("while_loop", avals, body_out, body_fun, init_val)
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr,
                        cond_nconsts=len(cond_consts), body_nconsts=len(body_consts))
    return tree_unflatten(tree, outs)


def _while_jvp(primals: list[Any], tangents: list[Any], *, cond_jaxpr: Jaxpr, body_jaxpr: Jaxpr,
               cond_nconsts: int, body_nconsts: int) -> tuple[list[Any], list[Any]]:
    """A while loop over (carry, carry tangents): the body's jvp, the same condition."""
    n_fixed = cond_nconsts + body_nconsts
    carry_avals = [v.aval for v in body_jaxpr.invars[body_nconsts:]]
    diff = [issubdtype(a.dtype, np.inexact) for a in carry_avals]
    body_const_tangents = [instantiate(t) for t in tangents[cond_nconsts:n_fixed]]
    carry_tangents = [instantiate(t) for t, d in zip(tangents[n_fixed:], diff) if d]
    n_carry = len(carry_avals)

    def body(*xs: Any) -> list[Any]:
        consts, const_t = list(xs[:body_nconsts]), list(xs[body_nconsts:2 * body_nconsts])
        carry, carry_t = list(xs[2 * body_nconsts:2 * body_nconsts + n_carry]), iter(xs[2 * body_nconsts + n_carry:])
        full_t = const_t + [next(carry_t) if d else Zero(tangent_aval(a)) for d, a in zip(diff, carry_avals)]
        outs, touts = jvp_flat(lambda *v: eval_jaxpr(body_jaxpr, (), v), consts + carry, full_t)
        return outs + [instantiate(t) for t, d in zip(touts, diff) if d]

    def cond(*xs: Any) -> list[Any]:
        return eval_jaxpr(cond_jaxpr, (), list(xs[:cond_nconsts + n_carry]))

    const_avals = [v.aval for v in body_jaxpr.invars[:body_nconsts]]
    t_avals = [a for a, d in zip(carry_avals, diff) if d]
    new_body, new_body_consts = _closed(body, const_avals + const_avals + carry_avals + t_avals)
    new_cond, new_cond_consts = _closed(cond, [v.aval for v in cond_jaxpr.invars] + t_avals)
    outs = while_p.bind(*new_cond_consts, *primals[:cond_nconsts], *new_body_consts, *primals[cond_nconsts:n_fixed],
                        *body_const_tangents, *primals[n_fixed:], *carry_tangents, cond_jaxpr=new_cond,
                        body_jaxpr=new_body, cond_nconsts=len(new_cond_consts) + cond_nconsts,
                        body_nconsts=len(new_body_consts) + 2 * body_nconsts)
    out_iter = iter(outs[n_carry:])
    return outs[:n_carry], [next(out_iter) if d else Zero(tangent_aval(a)) for d, a in zip(diff, carry_avals)]


def _no_reverse_mode(trace: Any, *args: Any, **params: Any) -> Any:
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic "
                     "start/stop values. Try using lax.scan, or using fori_loop with static start/stop.")


def _while_per_device(trace: Any, *args: Any, cond_jaxpr: Jaxpr, body_jaxpr: Jaxpr, cond_nconsts: int,
                      body_nconsts: int) -> list[Any]:
    """Inside shard_map each device loops while its own condition holds: the body runs while any device's does,
    and devices that are done keep their carry."""
    cond_consts, body_consts = list(args[:cond_nconsts]), list(args[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(args[cond_nconsts + body_nconsts:])
    while True:
        pred = trace.lift(eval_jaxpr(cond_jaxpr, (), cond_consts + carry)[0])
        flags = [bool(pred.payload[d]) for d in trace.devices]
        if not any(flags):
            return carry
        new = eval_jaxpr(body_jaxpr, (), body_consts + carry)
        carry = new if all(flags) else [P.select.bind(pred, n, c) for n, c in zip(new, carry)]


jvp_rules[while_p] = _while_jvp
device_rules[while_p] = _while_per_device
partial_eval_rules[while_p] = _no_reverse_mode


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any, *,
              unroll: int | bool | None = None) -> Any:
    """`body_fun(i, val)` for i from lower to upper: a scan when both bounds are concrete (differentiable), else a
    while_loop."""
    try:
        low, high = operator.index(lower), operator.index(upper)
    except TypeError:
        low = high = None
    from .. import numpy as jnp

    if low is not None:
        def step(carry: Any, _: Any) -> tuple[Any, None]:
            i, val = carry
            return (i + 1, body_fun(i, val)), None

        weak = type(lower) is int and type(upper) is int  # the index is weakly typed, as JAX's, for Python bounds
        first = jnp.asarray(low) if weak else np.int32(low)
        (_, result), _ = scan(step, (first, init_val), None, length=max(high - low, 0))
        return result

    def cond(carry: Any) -> Any:
        return carry[0] < upper

    def body(carry: Any) -> Any:
        i, val = carry
        return i + 1, body_fun(i, val)

    start = jnp.asarray(lower)
    return while_loop(cond, body, (start, init_val))[1]


# ---- cond and switch ---------------------------------------------------------------------------------------------


def _cond_expand(index: Any, *args: Any, branches: tuple, num_consts: tuple) -> list[Any]:
    """The chosen branch when the index is concrete; otherwise every branch, and a selection of their results."""
    consts, operands = _split_consts(args, num_consts)
    value = index.to_concrete_value() if isinstance(index, Tracer) else index
    if value is not None:
        chosen = int(np.clip(int(np.asarray(value)), 0, len(branches) - 1))
        return eval_jaxpr(branches[chosen], (), consts[chosen] + operands)
    results = [eval_jaxpr(b, (), c + operands) for b, c in zip(branches, consts)]
    out = results[-1]
    for k in range(len(branches) - 2, -1, -1):
        pick = P.BINARY["le"].bind(index, np.asarray(k, aval_of(index).dtype))
        out = [P.select.bind(pick, a, b) for a, b in zip(results[k], out)]
    return out


def _split_consts(args: Sequence[Any], num_consts: tuple) -> tuple[list[list[Any]], list[Any]]:
    consts, at = [], 0
    for n in num_consts:
        consts.append(list(args[at:at + n]))
        at += n
    return consts, list(args[at:])


cond_p = _call_primitive("cond", lambda *avals, branches, **_: [v.aval for v in branches[0].outvars], _cond_expand)


_NO_OPERAND = object()  # the default of cond's and switch's legacy `operand=` keyword: none given


def _operands(operands: tuple, operand: Any) -> tuple:
    """The branches' operands: the positional ones, or the single legacy `operand=` keyword's value."""
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(f"if 'operand' keyword is passed then no positional operands can be passed, got "
                        f"operand={operand!r} and positional operands {operands!r}")
    return (operand,)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any, operand: Any = _NO_OPERAND) -> Any:
    """`branches[index](*operands)`, the index clamped to the valid range (`operand=x` is the legacy spelling of
    one operand x, as in JAX)."""
    return _switch(index, branches, _operands(operands, operand), "switch")


def _switch(index: Any, branches: Sequence[Callable[..., Any]], operands: tuple, what: str) -> Any:
    if not branches:
        raise ValueError("Empty branch sequence")
    leaves, tree = tree_flatten(operands)
    avals = [aval_of(x) for x in leaves]
    traced = [_traced(lambda *ops, b=b: b(*ops), avals, tree) for b in branches]
    first = traced[0]
    for k, (jaxpr, _, out_tree) in enumerate(traced[1:], 1):
        if out_tree != first[2] or _types(v.aval for v in jaxpr.outvars) != _types(v.aval for v in first[0].outvars):
            raise TypeError(f"branch 0 and {k} outputs must have same type structure, got {first[2]} and {out_tree} "
                            f"with types {[str(v.aval) for v in first[0].outvars]} and "
                            f"{[str(v.aval) for v in jaxpr.outvars]}.")
        _check_branch_sharding(what, first[0], jaxpr, k)
    from .. import numpy as jnp

    index = jnp.astype(index, np.int32) if isinstance(index, Tracer) or hasattr(index, "shape") else np.int32(index)
    consts = [c for _, cs, _ in traced for c in cs]
    outs = cond_p.bind(index, *consts, *leaves, branches=tuple(j for j, _, _ in traced),
                       num_consts=tuple(len(cs) for _, cs, _ in traced))
    return tree_unflatten(first[2], outs)


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any,
         operand: Any = _NO_OPERAND) -> Any:
    """`true_fun(*operands)` if pred else `false_fun(*operands)` (`operand=x` is the legacy spelling of one
    operand x, as in JAX)."""
    operands = _operands(operands, operand)
    if aval_of(pred).shape != ():
        raise TypeError(f"Pred must be a scalar, got {pred!r} of shape {aval_of(pred).shape}.")
    from .. import numpy as jnp

    index = jnp.astype(jnp.asarray(pred) != 0, np.int32) if isinstance(pred, Tracer) or hasattr(pred, "shape") \
        else np.int32(bool(pred))
    return _switch(index, (false_fun, true_fun), operands, "cond")


def _check_branch_sharding(what: str, first: Jaxpr, other: Jaxpr, k: int) -> None:
    """Branches' outputs must have one Explicit-axes sharding (part of their types, as in JAX)."""
    names = ("false_fun", "true_fun") if what == "cond" else ("branch 0", f"branch {k}")
    for a, b in zip((v.aval for v in first.outvars), (v.aval for v in other.outvars)):
        if a.explicit != b.explicit:
            raise TypeError(f"{what} branches must have equal output types but they differ.\n\nThe output of "
                            f"{names[1]} has type {b} but the corresponding output of {names[0]} has type {a}.\n\n"
                            f"Revise the branches so that all output types match.")


def _cond_jvp(primals: list[Any], tangents: list[Any], *, branches: tuple, num_consts: tuple) -> tuple:
    """A cond over the branches' jvps (for an index that is not concrete)."""
    index, args = primals[0], primals[1:]
    consts, operands = _split_consts(args, num_consts)
    const_t, operand_t = _split_consts(tangents[1:], num_consts)
    n_ops = len(operands)
    op_avals = [aval_of(x) for x in operands]
    new_branches, new_consts = [], []
    for jaxpr, c, ct in zip(branches, consts, const_t):
        def branch(*xs: Any, jaxpr: Jaxpr = jaxpr, nc: int = len(c)) -> list[Any]:
            ins = list(xs[:nc]) + list(xs[2 * nc:2 * nc + n_ops])
            ts = list(xs[nc:2 * nc]) + list(xs[2 * nc + n_ops:])
            outs, touts = jvp_flat(lambda *v: eval_jaxpr(jaxpr, (), v), ins, ts)
            return outs + [instantiate(t) for t in touts]
        c_avals = [aval_of(x) for x in c]
        avals = c_avals + [tangent_aval(a) for a in c_avals] + op_avals + [tangent_aval(a) for a in op_avals]
        closed, captured = _closed(branch, avals)
        new_branches.append(closed)
        new_consts.append(captured + c + [instantiate(t) for t in ct])
    outs = cond_p.bind(index, *[x for cs in new_consts for x in cs], *operands,
                       *[instantiate(t) for t in operand_t], branches=tuple(new_branches),
                       num_consts=tuple(len(cs) for cs in new_consts))
    n_out = len(branches[0].outvars)
    return outs[:n_out], outs[n_out:]


jvp_rules[cond_p] = _cond_jvp


# ---- selection ---------------------------------------------------------------------------------------------------


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Elementwise `on_true` where pred else `on_false` (as jax.lax.select)."""
    return P.select.bind(pred, on_true, on_false)


def select_n(which: Any, *cases: Any) -> Any:
    """Elementwise `cases[which]`: `which` boolean (two cases) or an integer index."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        pick = P.UNARY["not"].bind(which) if aval_of(which).dtype == np.bool_ else \
            P.BINARY["le"].bind(which, np.asarray(k, aval_of(which).dtype))
        out = P.select.bind(pick, cases[k], out)
    return U._as_array(out)


# ---- associative_scan --------------------------------------------------------------------------------------------


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """Prefix combination of `elems` along `axis` with the associative `fn`, combining pairs level by level (the
    parallel prefix scheme, so results round as JAX's do)."""
    from .. import numpy as jnp

    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan needs at least one array in elems.")
    ndim = aval_of(leaves[0]).ndim
    axis = operator.index(axis) % max(ndim, 1)
    sizes = {aval_of(x).shape[axis] for x in leaves}
    if len(sizes) != 1:
        raise ValueError(f"Array inputs to associative_scan must have the same first dimension. (saw: {sorted(sizes)})")

    def cut(xs: list[Any], start: int, stop: int | None, step: int = 1) -> list[Any]:
        return [jnp.take(x, jnp.arange(aval_of(x).shape[axis])[start:stop:step], axis=axis) for x in xs]

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        out, _ = tree_flatten(fn(tree_unflatten(tree, a), tree_unflatten(tree, b)))
        return out

    def interleave(even: Any, odd: Any) -> Any:
        n_even, n_odd = aval_of(even).shape[axis], aval_of(odd).shape[axis]
        if n_even > n_odd:
            odd = jnp.concatenate([odd, jnp.zeros_like(jnp.take(even, jnp.arange(1), axis=axis))], axis=axis)
        pairs = jnp.stack([even, odd], axis=axis + 1)
        shape = list(aval_of(even).shape)
        shape[axis] = 2 * aval_of(even).shape[axis]
        return jnp.take(jnp.reshape(pairs, shape), jnp.arange(n_even + n_odd), axis=axis)

    def prefix(xs: list[Any]) -> list[Any]:
        n = aval_of(xs[0]).shape[axis]
        if n < 2:
            return xs
        reduced = combine(cut(xs, 0, -1, 2), cut(xs, 1, None, 2))
        odd = prefix(reduced)
        if n % 2 == 0:
            even = combine([jnp.take(o, jnp.arange(aval_of(o).shape[axis] - 1), axis=axis) for o in odd],
                           cut(xs, 2, None, 2))
        else:
            even = combine(odd, cut(xs, 2, None, 2))
        even = [jnp.concatenate([first, e], axis=axis) for first, e in zip(cut(xs, 0, 1), even)]
        return [interleave(e, o) for e, o in zip(even, odd)]

    if reverse:
        leaves = [jnp.flip(x, axis) for x in leaves]
    out = prefix(leaves)
    if reverse:
        out = [jnp.flip(x, axis) for x in out]
    return tree_unflatten(tree, out)


# ---- on one device: the loops in NumPy (interpreters/numpy_eval.py), as generated code (codegen_loops.py) ---------


def _scan_numpy(run: Callable[..., list[Any]], *args: Any, jaxpr: Jaxpr, num_consts: int, num_carry: int,
                length: int, reverse: bool, unroll: int = 1) -> list[Any]:
    loop = scan_function(run, jaxpr, num_consts, num_carry, length, reverse)
    if loop is not None:
        return loop(args)
    consts, carry, xs = list(args[:num_consts]), list(args[num_consts:num_consts + num_carry]), \
        list(args[num_consts + num_carry:])
    ys = [np.empty((length,) + tuple(v.aval.shape), v.aval.dtype) for v in jaxpr.outvars[num_carry:]]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        out = run(jaxpr, (), consts + carry + [np.asarray(x[i]) for x in xs])
        carry = out[:num_carry]
        for y, value in zip(ys, out[num_carry:]):
            y[i] = value
    return carry + ys


def _while_numpy(run: Callable[..., list[Any]], *args: Any, cond_jaxpr: Jaxpr, body_jaxpr: Jaxpr,
                 cond_nconsts: int, body_nconsts: int) -> list[Any]:
    loop = while_function(run, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts)
    if loop is not None:
        return loop(args)
    cond_consts, body_consts = list(args[:cond_nconsts]), list(args[cond_nconsts:cond_nconsts + body_nconsts])
    carry = list(args[cond_nconsts + body_nconsts:])
    while bool(run(cond_jaxpr, (), cond_consts + carry)[0]):
        carry = run(body_jaxpr, (), body_consts + carry)
    return carry


def _cond_numpy(run: Callable[..., list[Any]], index: Any, *args: Any, branches: tuple, num_consts: tuple) -> list:
    consts, operands = _split_consts(args, num_consts)
    chosen = int(np.clip(int(index), 0, len(branches) - 1))
    return run(branches[chosen], (), consts[chosen] + operands)


structured_rules[scan_p] = _scan_numpy
structured_rules[while_p] = _while_numpy
structured_rules[cond_p] = _cond_numpy
