"""jax.checkpoint (remat): differentiate a function keeping only the residuals a policy saves.

Calling a checkpointed function binds `remat_p` with its body as a jaxpr. Forward mode
maps the jvp of the body; partial evaluation (linearize) runs the primal part at once and
stages one `remat_p` equation holding the tangent part plus the recomputation of every
value the policy did not save, which the backward pass recomputes before transposing.
"""
from __future__ import annotations

import functools
import weakref
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from ..primitives import array_primitives as P
from ..core.dtypes import issubdtype
from .residual_origins import SourceLines, eval_jaxpr_keeping_origins, recall
from ..core.core import (Primitive, Tracer, abstract_eval_rules, aval_of, define_primitive, keeps_own_vma,
                         set_current_trace, vma_rules)
from ..interpreters.batching import batching_rules
from ..sharding.placement_rules import elementwise
from ..interpreters.ad import Zero, backward_pass, instantiate, is_undefined, jvp_flat, jvp_rules, tangent_aval, \
    transpose_rules
from ..interpreters.numpy_eval import structured_rules
from .debugging import debug_callback_p
from ..interpreters.staging import consts_as_inputs, inline_rules, partial_eval_rules, stage_observers, trace_to_jaxpr
from ..sharding.mesh import current_mesh
from ..core.jaxpr import Equation, Jaxpr, Literal, Var, eval_jaxpr
from ..tree.tree_util import tree_flatten, tree_map, tree_unflatten


# ---- policies: policy(primitive, *avals, **params) -> whether its output may be saved ---------------------------


name_p = define_primitive("name", lambda x, *, name: x, lambda x, *, name: x, elementwise)
vma_rules[name_p] = keeps_own_vma
jvp_rules[name_p] = lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name), tangents[0])
transpose_rules[name_p] = lambda ct, x, *, name: [ct]
batching_rules[name_p] = lambda values, dims, *, name: (name_p.bind(values[0], name=name), dims[0])


def checkpoint_name(x: Any, name: str) -> Any:
    """`x` (any pytree of arrays), named `name` for remat policies such as `save_only_these_names`."""
    return tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


def everything_saveable(*_: Any, **__: Any) -> bool:
    return True


def nothing_saveable(*_: Any, **__: Any) -> bool:
    return False


def dots_saveable(primitive: Primitive, *_: Any, **__: Any) -> bool:
    return primitive is P.dot_general


def dots_with_no_batch_dims_saveable(primitive: Primitive, *_: Any, dimension_numbers: Any = None,
                                     **__: Any) -> bool:
    return primitive is P.dot_general and not dimension_numbers[1][0]


def _is_named(primitive: Primitive, params: dict[str, Any], names: frozenset[str]) -> bool:
    return primitive is name_p and params["name"] in names


def save_only_these_names(*names: str) -> Callable[..., bool]:
    """Save the values named (with checkpoint_name) one of `names`, and nothing else."""
    chosen = frozenset(names)
    return lambda primitive, *_, **params: _is_named(primitive, params, chosen)


def save_any_names_but_these(*names: str) -> Callable[..., bool]:
    """Save every named value except those named one of `names`; nothing unnamed."""
    excluded = frozenset(names)
    return lambda primitive, *_, **params: primitive is name_p and params["name"] not in excluded


def save_anything_except_these_names(*names: str) -> Callable[..., bool]:
    """Save every value: JAX 0.10's policy of this name consults no names (it is everything_saveable)."""
    return everything_saveable


def save_from_both_policies(first: Callable[..., bool], second: Callable[..., bool]) -> Callable[..., bool]:
    """Save what either policy saves."""
    return lambda *args, **params: first(*args, **params) or second(*args, **params)


def save_and_offload_only_these_names(*, names_which_can_be_saved: Sequence[str],
                                      names_which_can_be_offloaded: Sequence[str], offload_src: str = "device",
                                      offload_dst: str = "pinned_host") -> Callable[..., bool]:
    """Save the values of both name lists (meshax has one memory: an offloaded value is a saved one)."""
    return save_only_these_names(*names_which_can_be_saved, *names_which_can_be_offloaded)


def offload_dot_with_no_batch_dims(offload_src: str = "device", offload_dst: str = "pinned_host") -> Callable[..., bool]:
    """Save the results of dots without batch dimensions (meshax has one memory: offloading is saving)."""
    return dots_with_no_batch_dims_saveable


checkpoint_policies = SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable, dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable, dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
    save_anything_except_these_names=save_anything_except_these_names,
    save_any_names_but_these=save_any_names_but_these, save_only_these_names=save_only_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names)


# ---- the primitive ---------------------------------------------------------------------------------------------

remat_p = Primitive("checkpoint", multiple_results=True)
abstract_eval_rules[remat_p] = lambda *avals, jaxpr, **_: [v.aval for v in jaxpr.outvars]
inline_rules[remat_p] = lambda *args, jaxpr, **_: eval_jaxpr(jaxpr, (), args)
vma_rules[remat_p] = keeps_own_vma
structured_rules[remat_p] = lambda run, *args, jaxpr, **_: run(jaxpr, (), args)


def checkpoint(fun: Callable[..., Any], *, prevent_cse: bool = True, policy: Callable[..., bool] | None = None,
               static_argnums: int | Sequence[int] = ()) -> Callable[..., Any]:
    """`fun`, whose intermediate values are recomputed in the backward pass unless `policy` saves them."""
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    policy = policy or nothing_saveable

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any) -> Any:
        dynamic = [a for i, a in enumerate(args) if i not in static]
        leaves, tree = tree_flatten(dynamic)
        out_tree = []

        def flat(*xs: Any) -> list[Any]:
            values = iter(tree_unflatten(tree, list(xs)))
            out, structure = tree_flatten(fun(*[a if i in static else next(values) for i, a in enumerate(args)]))
            out_tree.append(structure)
            return out

        jaxpr, structure = _traced(fun, flat, out_tree, leaves, tree, args, static)
        out_tree[:] = [structure]
        outs = remat_p.bind(*jaxpr.consts, *leaves, jaxpr=consts_as_inputs(jaxpr), policy=policy,
                            prevent_cse=prevent_cse)
        return tree_unflatten(out_tree[0], outs)

    wrapped.is_checkpoint = True  # type: ignore[attr-defined]  (print_saved_residuals names its arguments)
    return wrapped


remat = checkpoint

_traces: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()  # per function: its traces


def _traced(fun: Callable[..., Any], flat: Callable[..., list[Any]], out_tree: list, leaves: list, tree: Any,
            args: tuple, static: tuple) -> tuple[Jaxpr, Any]:
    """`fun`'s body traced for these argument types, reused from an earlier checkpoint of the same function (as
    JAX caches it: a global the function reads is read when it is first traced)."""
    avals = tuple(aval_of(x) for x in leaves)
    key = (tree, avals, tuple(a.mesh for a in avals), current_mesh(),
           tuple((i, args[i]) for i in static if i < len(args)))
    try:
        cached = _traces.setdefault(fun, {})
        hit = cached.get(key)
    except TypeError:  # not weakly referable, or unhashable static arguments
        cached, hit = None, None
    if hit is not None:
        recall(hit[2])  # print_saved_residuals names the lines the values were traced at
        return hit[0], hit[1]
    lines = SourceLines()
    stage_observers.append(lines)
    try:
        jaxpr, _ = trace_to_jaxpr(flat, [aval_of(x) for x in leaves])
    finally:
        stage_observers.remove(lines)
    if cached is not None and not any(isinstance(c, Tracer) for c in jaxpr.consts):  # no values of an outer trace
        cached[key] = (jaxpr, out_tree[0], lines.of)
    return jaxpr, out_tree[0]


def _jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Jaxpr, policy: Any, prevent_cse: bool) -> tuple:
    nonzero = [not isinstance(t, Zero) for t in tangents]
    in_avals = [v.aval for v in jaxpr.invars]
    out_avals = [v.aval for v in jaxpr.outvars]
    inexact = [issubdtype(a.dtype, np.inexact) for a in out_avals]  # integer outputs' tangents stay Zero

    def body(*args: Any) -> list[Any]:
        xs, rest = list(args[:len(primals)]), iter(args[len(primals):])
        ts = [next(rest) if nz else Zero(tangent_aval(a)) for nz, a in zip(nonzero, in_avals)]
        outs, touts = jvp_flat(lambda *v: eval_jaxpr_keeping_origins(jaxpr, v), xs, ts)
        return outs + [instantiate(t) for t, keep in zip(touts, inexact) if keep]

    new, _ = trace_to_jaxpr(body, in_avals + [tangent_aval(a) for a, nz in zip(in_avals, nonzero) if nz])
    outs = remat_p.bind(*new.consts, *primals, *[t for t in tangents if not isinstance(t, Zero)],
                        jaxpr=consts_as_inputs(new), policy=policy, prevent_cse=prevent_cse)
    n = len(jaxpr.outvars)
    touts = iter(outs[n:])
    return outs[:n], [next(touts) if keep else Zero(tangent_aval(a)) for a, keep in zip(out_avals, inexact)]


def _spliced(jaxpr: Jaxpr, depths: dict[int, int], level: int = 1) -> Jaxpr:
    """`jaxpr` with the bodies of nested checkpoints spliced in (fresh variables for theirs): partial evaluation
    then splits them equation by equation, so a nested call fed a tangent still computes its primal outputs now.
    `depths` receives, for each debug callback (by id of its equation), how many checkpoints enclose it."""
    renamed: dict[int, Any] = {}

    def read(x: Any) -> Any:
        return x if isinstance(x, Literal) else renamed.get(x.id, x)

    equations = []
    for eq in jaxpr.equations:
        inputs = [read(x) for x in eq.inputs]
        if eq.primitive is not remat_p:
            equations.append(Equation(eq.primitive, inputs, eq.outputs, eq.params))
            if eq.primitive is debug_callback_p:
                depths[id(equations[-1])] = level
            continue
        inner = _spliced(eq.params["jaxpr"], depths, level + 1)
        renamed.update((v.id, a) for v, a in zip(inner.invars, inputs))
        for inner_eq in inner.equations:
            outputs = [Var(v.aval) for v in inner_eq.outputs]
            equations.append(Equation(inner_eq.primitive, [read(x) for x in inner_eq.inputs], outputs,
                                      inner_eq.params))
            if id(inner_eq) in depths:
                depths[id(equations[-1])] = depths.pop(id(inner_eq))
            renamed.update((v.id, fresh) for v, fresh in zip(inner_eq.outputs, outputs))
        renamed.update((out.id, read(v)) for out, v in zip(eq.outputs, inner.outvars))
    return Jaxpr(jaxpr.constvars, jaxpr.invars, equations, [read(v) for v in jaxpr.outvars], jaxpr.consts)


def _partial_eval(trace: Any, *args: Any, jaxpr: Jaxpr, policy: Any, prevent_cse: bool) -> list[Any]:
    """Known equations run now; the unknown ones are staged with the recomputation of every unsaved value."""
    depths: dict[int, int] = {}
    jaxpr = _spliced(jaxpr, depths)
    unknown_ids = {v.id for v, a in zip(jaxpr.invars, args) if trace.is_own(a)}
    producer: dict[int, Any] = {}
    unknown_eqns = []
    for eq in jaxpr.equations:
        if any(not isinstance(x, Literal) and x.id in unknown_ids for x in eq.inputs):
            unknown_eqns.append(eq)
            unknown_ids.update(v.id for v in eq.outputs)
        else:
            for v in eq.outputs:
                producer[v.id] = eq
    saved: dict[int, Any] = {v.id: v for v in jaxpr.invars if v.id not in unknown_ids}
    recompute: list[Any] = []

    def need(var: Any) -> None:
        if isinstance(var, Literal) or var.id in unknown_ids or var.id in saved:
            return
        eq = producer[var.id]
        if policy(eq.primitive, *[x.aval for x in eq.inputs], **eq.params):
            saved[var.id] = var
            return
        if eq not in recompute:
            for x in eq.inputs:
                need(x)
            recompute.append(eq)

    for eq in unknown_eqns:
        for x in eq.inputs:
            need(x)
    callbacks = _rerun_callbacks(jaxpr, unknown_eqns, policy, depths)
    for eq in callbacks:
        for x in eq.inputs:
            need(x)
    recompute += callbacks
    order = {id(eq): i for i, eq in enumerate(jaxpr.equations)}
    recompute.sort(key=lambda eq: order[id(eq)])
    residual_vars = list(saved.values())
    known_in = [a for a, v in zip(args, jaxpr.invars) if v.id not in unknown_ids]
    known_vars = [v for v in jaxpr.invars if v.id not in unknown_ids]
    known_jaxpr = Jaxpr([], known_vars, [eq for eq in jaxpr.equations if eq not in unknown_eqns],
                        [v for v in jaxpr.outvars if isinstance(v, Literal) or v.id not in unknown_ids]
                        + residual_vars)
    with set_current_trace(trace.parent):
        known_out = eval_jaxpr_keeping_origins(known_jaxpr, known_in)
    n_known = len(known_jaxpr.outvars) - len(residual_vars)
    residuals = known_out[n_known:]
    out_unknown = [not isinstance(v, Literal) and v.id in unknown_ids for v in jaxpr.outvars]
    staged_jaxpr = Jaxpr([], residual_vars + [v for v in jaxpr.invars if v.id in unknown_ids],
                         recompute + unknown_eqns, [v for v, u in zip(jaxpr.outvars, out_unknown) if u])
    unknown_args = [a for a, v in zip(args, jaxpr.invars) if v.id in unknown_ids]
    staged = trace.stage(remat_p, residuals + unknown_args, dict(jaxpr=staged_jaxpr, policy=policy,
                                                                  prevent_cse=prevent_cse),
                         [v.aval for v in staged_jaxpr.outvars])
    known_iter, staged_iter = iter(known_out[:n_known]), iter(staged)
    return [next(staged_iter) if u else next(known_iter) for u in out_unknown]


def _rerun_callbacks(jaxpr: Jaxpr, unknown_eqns: list[Any], policy: Any, depths: dict[int, int]) -> list[Any]:
    """The debug callbacks the backward pass runs again, as JAX's does: each known one the policy does not save,
    or saves with every input at hand in the recomputation (an input of the checkpoint, or a value recomputed
    because the policy does not save it); once per checkpoint enclosing it."""
    at_hand = {v.id for v in jaxpr.invars}
    staged = set(map(id, unknown_eqns))
    rerun = []
    for eq in jaxpr.equations:
        if id(eq) in staged:
            continue
        avals = [x.aval for x in eq.inputs]
        if eq.primitive is debug_callback_p:
            if not policy(eq.primitive, *avals, **eq.params) or \
                    all(isinstance(x, Literal) or x.id in at_hand for x in eq.inputs):
                rerun += [eq] * depths.get(id(eq), 1)
        elif not policy(eq.primitive, *avals, **eq.params):
            at_hand.update(v.id for v in eq.outputs)
    return rerun


def _transpose(cts: list[Any], *args: Any, jaxpr: Jaxpr, policy: Any, prevent_cse: bool) -> list[Any]:
    linear = [is_undefined(a) for a in args]
    view = Jaxpr([v for v, lin in zip(jaxpr.invars, linear) if not lin],
                 [v for v, lin in zip(jaxpr.invars, linear) if lin], jaxpr.equations, jaxpr.outvars)
    in_cts = iter(backward_pass(view, [a for a, lin in zip(args, linear) if not lin], cts))
    return [next(in_cts) if lin else None for lin in linear]


jvp_rules[remat_p] = _jvp
partial_eval_rules[remat_p] = _partial_eval
transpose_rules[remat_p] = _transpose
