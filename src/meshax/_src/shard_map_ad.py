"""Differentiating shard_map: its jvp, partial evaluation and transpose, each a new shard_map.

The jvp maps the jvp of the body over the same mesh. Partial evaluation splits the body
into a known shard_map (primal outputs and residuals) and an unknown one (tangents from
residuals); residuals that vary across devices leave the known map stacked along a new
leading dimension split over the axes they vary over. The transpose maps the body's
backward pass. With check_vma=False, JAX's older convention applies: cotangents of
outputs replicated over an axis are divided by its size and cotangents of inputs
replicated over an axis are summed over it.
"""
from __future__ import annotations

import math

import numpy as np
from typing import Any, Sequence

from . import primitives as P
from .core import AxisFrame, aval_of, extend_axis_env, set_current_trace
from .interpreters.ad import (Zero, backward_pass, instantiate, is_undefined, jvp_flat, jvp_rules, tangent_aval,
                              transpose_rules)
from .interpreters.staging import consts_as_inputs, partial_eval_rules, trace_to_jaxpr
from .jaxpr import Jaxpr, Literal, eval_jaxpr
from .lax.parallel import preduce_p
from .shard_map import _global_aval, shard_map_p, spec_axes
from .sharding import PartitionSpec


def _traced_body(fun: Any, mesh: Any, avals: Sequence[Any], check_vma: bool) -> tuple[Jaxpr, list[Any]]:
    with extend_axis_env(AxisFrame(mesh, mesh.axis_names, check_vma)):
        jaxpr, _ = trace_to_jaxpr(fun, avals)
    return consts_as_inputs(jaxpr), list(jaxpr.consts)


def _bind(consts: list[Any], args: Sequence[Any], jaxpr: Jaxpr, mesh: Any, in_specs: Sequence[Any],
          out_specs: Sequence[Any], check_vma: bool) -> list[Any]:
    out_avals = tuple(_global_aval(v.aval, mesh, s) for v, s in zip(jaxpr.outvars, out_specs))
    specs = tuple(PartitionSpec() for _ in consts) + tuple(in_specs)
    return shard_map_p.bind(*consts, *args, jaxpr=jaxpr, mesh=mesh, in_specs=specs, out_specs=tuple(out_specs),
                            out_avals=out_avals, check_vma=check_vma)


# ---- jvp -------------------------------------------------------------------------------------------------------


def _jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Jaxpr, mesh: Any, in_specs: tuple, out_specs: tuple,
         out_avals: tuple, check_vma: bool) -> tuple[list[Any], list[Any]]:
    nonzero = [not isinstance(t, Zero) for t in tangents]
    local_in = [v.aval for v in jaxpr.invars]
    differentiable = [a.dtype.kind in "fc" for a in (v.aval for v in jaxpr.outvars)]

    def body(*args: Any) -> list[Any]:
        xs, rest = list(args[:len(primals)]), iter(args[len(primals):])
        ts = [next(rest) if nz else Zero(tangent_aval(a)) for nz, a in zip(nonzero, local_in)]
        outs, touts = jvp_flat(lambda *v: eval_jaxpr(jaxpr, (), v), xs, ts)
        return outs + [instantiate(t) for t, d in zip(touts, differentiable) if d]

    avals = local_in + [tangent_aval(a) for a, nz in zip(local_in, nonzero) if nz]
    new, consts = _traced_body(body, mesh, avals, check_vma)
    t_specs = [s for s, nz in zip(in_specs, nonzero) if nz]
    o_specs = list(out_specs) + [s for s, d in zip(out_specs, differentiable) if d]
    outs = _bind(consts, primals + [t for t in tangents if not isinstance(t, Zero)], new, mesh,
                 list(in_specs) + t_specs, o_specs, check_vma)
    primal_out, tangent_iter = outs[:len(out_specs)], iter(outs[len(out_specs):])
    tangent_out = [next(tangent_iter) if d else Zero(tangent_aval(aval_of(p))) for p, d in zip(primal_out, differentiable)]
    return primal_out, tangent_out


jvp_rules[shard_map_p] = _jvp


# ---- partial evaluation ------------------------------------------------------------------------------------------


def partial_eval_jaxpr(jaxpr: Jaxpr, unknown: Sequence[bool]) -> tuple[Jaxpr, Jaxpr, list[bool], list[Any]]:
    """Split `jaxpr` into a known part (known inputs -> known outputs + residuals) and an unknown part
    (residuals + unknown inputs -> unknown outputs). Returns both, which outputs are unknown, and the residual
    vars."""
    is_unknown = {v.id for v, u in zip(jaxpr.invars, unknown) if u}
    known_eqns, unknown_eqns = [], []
    for eq in jaxpr.equations:
        if any(not isinstance(x, Literal) and x.id in is_unknown for x in eq.inputs):
            unknown_eqns.append(eq)
            is_unknown.update(v.id for v in eq.outputs)
        else:
            known_eqns.append(eq)
    residuals: dict[int, Any] = {}
    for eq in unknown_eqns:
        for x in eq.inputs:
            if not isinstance(x, Literal) and x.id not in is_unknown:
                residuals[x.id] = x
    out_unknown = [not isinstance(v, Literal) and v.id in is_unknown for v in jaxpr.outvars]
    known_outs = [v for v, u in zip(jaxpr.outvars, out_unknown) if not u]
    residual_vars = list(residuals.values())
    known = Jaxpr([], [v for v, u in zip(jaxpr.invars, unknown) if not u], known_eqns,
                  known_outs + residual_vars)
    unknown_jaxpr = Jaxpr([], residual_vars + [v for v, u in zip(jaxpr.invars, unknown) if u], unknown_eqns,
                          [v for v, u in zip(jaxpr.outvars, out_unknown) if u])
    return known, unknown_jaxpr, out_unknown, residual_vars


def _residual_axes(aval: Any, mesh: Any, check_vma: bool) -> tuple[str, ...]:
    varying = aval.vma if check_vma else frozenset(mesh.axis_names)
    return tuple(a for a in mesh.axis_names if a in varying)


def _stacked(x: Any, axes: tuple[str, ...]) -> Any:
    return P.reshape.bind(x, new_sizes=(1,) + tuple(aval_of(x).shape)) if axes else x


def _unstacked(x: Any, axes: tuple[str, ...]) -> Any:
    return P.reshape.bind(x, new_sizes=tuple(aval_of(x).shape[1:])) if axes else x


def _partial_eval(trace: Any, *args: Any, jaxpr: Jaxpr, mesh: Any, in_specs: tuple, out_specs: tuple,
                  out_avals: tuple, check_vma: bool) -> list[Any]:
    unknown = [trace.is_own(a) for a in args]
    known, rest, out_unknown, residuals = partial_eval_jaxpr(jaxpr, unknown)
    res_axes = [_residual_axes(r.aval, mesh, check_vma) for r in residuals]
    n_known_out = len(known.outvars) - len(residuals)

    def known_body(*xs: Any) -> list[Any]:
        outs = eval_jaxpr(known, (), xs)
        return outs[:n_known_out] + [_stacked(r, a) for r, a in zip(outs[n_known_out:], res_axes)]

    def unknown_body(*xs: Any) -> list[Any]:
        res = [_unstacked(r, a) for r, a in zip(xs[:len(residuals)], res_axes)]
        return eval_jaxpr(rest, (), res + list(xs[len(residuals):]))

    res_specs = [PartitionSpec(a) if a else PartitionSpec() for a in res_axes]
    known_specs = [s for s, u in zip(in_specs, unknown) if not u]
    known_out_specs = [s for s, u in zip(out_specs, out_unknown) if not u] + res_specs
    body, consts = _traced_body(known_body, mesh, [v.aval for v in known.invars], check_vma)
    with set_current_trace(trace.parent):
        known_results = _bind(consts, [a for a, u in zip(args, unknown) if not u], body, mesh, known_specs,
                              known_out_specs, check_vma)
    known_outs, res_values = known_results[:n_known_out], known_results[n_known_out:]
    res_local = [r.aval.update(shape=(1,) + r.aval.shape) if a else r.aval for r, a in zip(residuals, res_axes)]
    body, consts = _traced_body(unknown_body, mesh, res_local + [v.aval for v in rest.invars[len(residuals):]],
                                check_vma)
    unknown_out_specs = tuple(s for s, u in zip(out_specs, out_unknown) if u)
    inputs = consts + res_values + [a for a, u in zip(args, unknown) if u]
    specs = tuple(PartitionSpec() for _ in consts) + tuple(res_specs) + tuple(s for s, u in zip(in_specs, unknown) if u)
    unknown_avals = tuple(a for a, u in zip(out_avals, out_unknown) if u)
    staged = trace.stage(shard_map_p, inputs, dict(jaxpr=body, mesh=mesh, in_specs=specs, out_specs=unknown_out_specs,
                                                    out_avals=unknown_avals, check_vma=check_vma), unknown_avals)
    known_iter, staged_iter = iter(known_outs), iter(staged)
    return [next(staged_iter) if u else next(known_iter) for u in out_unknown]


partial_eval_rules[shard_map_p] = _partial_eval


# ---- transpose ---------------------------------------------------------------------------------------------------


def _transpose(cts: list[Any], *args: Any, jaxpr: Jaxpr, mesh: Any, in_specs: tuple, out_specs: tuple,
               out_avals: tuple, check_vma: bool) -> list[Any]:
    linear = [is_undefined(a) for a in args]
    nonzero = [not isinstance(c, Zero) for c in cts]
    view = Jaxpr([v for v, lin in zip(jaxpr.invars, linear) if not lin],
                 [v for v, lin in zip(jaxpr.invars, linear) if lin], jaxpr.equations, jaxpr.outvars)
    known_args = [a for a, lin in zip(args, linear) if not lin]
    n_known = len(known_args)

    def body(*xs: Any) -> list[Any]:
        res, rest = list(xs[:n_known]), iter(xs[n_known:])
        local_cts = [next(rest) if nz else Zero(v.aval) for nz, v in zip(nonzero, jaxpr.outvars)]
        if not check_vma:
            local_cts = [_divided(c, mesh, s) for c, s in zip(local_cts, out_specs)]
        in_cts = backward_pass(view, res, local_cts)
        in_cts = [instantiate(c) for c in in_cts]
        if not check_vma:
            lin_specs = [s for s, lin in zip(in_specs, linear) if lin]
            in_cts = [_summed(c, mesh, s) for c, s in zip(in_cts, lin_specs)]
        return in_cts

    avals = [v.aval for v in view.constvars] + [v.aval for v, nz in zip(jaxpr.outvars, nonzero) if nz]
    new, consts = _traced_body(body, mesh, avals, check_vma)
    ct_specs = [s for s, nz in zip(out_specs, nonzero) if nz]
    lin_specs = [s for s, lin in zip(in_specs, linear) if lin]
    outs = iter(_bind(consts, known_args + [c for c in cts if not isinstance(c, Zero)], new, mesh,
                      [s for s, lin in zip(in_specs, linear) if not lin] + ct_specs, lin_specs, check_vma))
    return [next(outs) if lin else None for lin in linear]


def _unmapped(mesh: Any, spec: Any) -> tuple[str, ...]:
    named = set(spec_axes(spec))
    return tuple(a for a in mesh.axis_names if a not in named)


def _divided(ct: Any, mesh: Any, spec: Any) -> Any:
    axes = _unmapped(mesh, spec)
    if isinstance(ct, Zero) or not axes:
        return ct
    size = math.prod(mesh.shape[a] for a in axes)
    return P.BINARY["div"].bind(ct, np.asarray(size, aval_of(ct).dtype))


def _summed(ct: Any, mesh: Any, spec: Any) -> Any:
    axes = _unmapped(mesh, spec)
    return preduce_p.bind(ct, axes=axes, op="sum") if axes else ct


transpose_rules[shard_map_p] = _transpose
