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

from ..primitives import array_primitives as P
from ..core.core import AxisFrame, aval_of, current_trace, extend_axis_env, set_current_trace
from ..interpreters.ad import (Zero, backward_pass, instantiate, is_undefined, jvp_flat, jvp_rules, tangent_aval,
                              transpose_rules)
from ..interpreters.staging import PartialEvalTrace, consts_as_inputs, partial_eval_rules, trace_to_jaxpr
from ..core.jaxpr import Jaxpr, eval_jaxpr
from ..lax.parallel import preduce_p
from ..lax.unreduced_casts import with_partial_sums
from .shard_map import _global_aval, shard_map_p, spec_axes
from ..sharding.shardings import PartitionSpec
from ..core.dtypes import is_inexact


def _traced_body(fun: Any, mesh: Any, manual: tuple, avals: Sequence[Any], check_vma: bool
                 ) -> tuple[Jaxpr, list[Any]]:
    with extend_axis_env(AxisFrame(mesh, manual, check_vma)):
        jaxpr, _ = trace_to_jaxpr(fun, avals)
    return consts_as_inputs(jaxpr), list(jaxpr.consts)


def _bind(consts: list[Any], args: Sequence[Any], jaxpr: Jaxpr, mesh: Any, manual: tuple, in_specs: Sequence[Any],
          out_specs: Sequence[Any], check_vma: bool) -> list[Any]:
    out_avals = tuple(_global_aval(v.aval, mesh, s, manual) for v, s in zip(jaxpr.outvars, out_specs))
    specs = tuple(PartitionSpec() for _ in consts) + tuple(in_specs)
    return shard_map_p.bind(*consts, *args, jaxpr=jaxpr, mesh=mesh, in_specs=specs, out_specs=tuple(out_specs),
                            out_avals=out_avals, check_vma=check_vma, manual_axes=manual)


# ---- jvp -------------------------------------------------------------------------------------------------------


def _jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Jaxpr, mesh: Any, in_specs: tuple, out_specs: tuple,
         out_avals: tuple, check_vma: bool, manual_axes: tuple) -> tuple[list[Any], list[Any]]:
    nonzero = [not isinstance(t, Zero) for t in tangents]
    local_in = [v.aval for v in jaxpr.invars]
    differentiable = [is_inexact(a.dtype) for a in (v.aval for v in jaxpr.outvars)]

    def body(*args: Any) -> list[Any]:
        xs, rest = list(args[:len(primals)]), iter(args[len(primals):])
        ts = [next(rest) if nz else Zero(tangent_aval(a)) for nz, a in zip(nonzero, local_in)]
        outs, touts = jvp_flat(lambda *v: eval_jaxpr(jaxpr, (), v), xs, ts)
        return outs + [instantiate(t) for t, d in zip(touts, differentiable) if d]

    avals = local_in + [tangent_aval(a) for a, nz in zip(local_in, nonzero) if nz]
    new, consts = _traced_body(body, mesh, manual_axes, avals, check_vma)
    t_specs = [s for s, nz in zip(in_specs, nonzero) if nz]
    o_specs = list(out_specs) + [s for s, d in zip(out_specs, differentiable) if d]
    outs = _bind(consts, primals + [t for t in tangents if not isinstance(t, Zero)], new, mesh, manual_axes,
                 list(in_specs) + t_specs, o_specs, check_vma)
    primal_out, tangent_iter = outs[:len(out_specs)], iter(outs[len(out_specs):])
    tangent_out = [next(tangent_iter) if d else Zero(tangent_aval(aval_of(p))) for p, d in zip(primal_out, differentiable)]
    return primal_out, tangent_out


jvp_rules[shard_map_p] = _jvp


# ---- partial evaluation ------------------------------------------------------------------------------------------


def _residual_axes(aval: Any, manual: tuple, check_vma: bool) -> tuple[str, ...]:
    return tuple(a for a in manual if a in aval.vma or not check_vma)


def _stacked(x: Any, axes: tuple[str, ...]) -> Any:
    return P.reshape.bind(x, new_sizes=(1,) + tuple(aval_of(x).shape)) if axes else x


def _unstacked(x: Any, axes: tuple[str, ...]) -> Any:
    return P.reshape.bind(x, new_sizes=tuple(aval_of(x).shape[1:])) if axes else x


def _partial_eval(trace: Any, *args: Any, jaxpr: Jaxpr, mesh: Any, in_specs: tuple, out_specs: tuple,
                  out_avals: tuple, check_vma: bool, manual_axes: tuple) -> list[Any]:
    """Partial evaluation by tracing: the body runs in a PartialEvalTrace whose parent stages the known map, so
    nested maps split recursively; what the unknown part captures from the known one are the residuals."""
    unknown = [trace.is_own(a) for a in args]
    split: dict[str, Any] = {}

    def known_body(*known_xs: Any) -> list[Any]:
        pe = PartialEvalTrace(current_trace())
        unknown_in = [pe.new_arg(v.aval) for v, u in zip(jaxpr.invars, unknown) if u]
        known_iter, unknown_iter = iter(known_xs), iter(unknown_in)
        full = [next(unknown_iter) if u else next(known_iter) for u in unknown]
        with set_current_trace(pe, finish=True):
            outs = eval_jaxpr(jaxpr, (), full)
            split["out_unknown"] = [pe.is_own(o) for o in outs]
            rest = pe.to_jaxpr(unknown_in, [o for o, u in zip(outs, split["out_unknown"]) if u])
        split["rest"] = rest
        split["res_axes"] = [_residual_axes(aval_of(r), manual_axes, check_vma) for r in rest.consts]
        known_outs = [o for o, u in zip(outs, split["out_unknown"]) if not u]
        return known_outs + [_stacked(r, a) for r, a in zip(rest.consts, split["res_axes"])]

    body, consts = _traced_body(known_body, mesh, manual_axes, [v.aval for v, u in zip(jaxpr.invars, unknown)
                                                                 if not u], check_vma)
    rest, res_axes, out_unknown = split["rest"], split["res_axes"], split["out_unknown"]
    res_specs = [PartitionSpec(a if a else None, unreduced=aval_of(r).unreduced, reduced=aval_of(r).reduced)
                 if aval_of(r).unreduced or aval_of(r).reduced else PartitionSpec(a) if a else PartitionSpec()
                 for r, a in zip(rest.consts, res_axes)]
    known_out_specs = [s for s, u in zip(out_specs, out_unknown) if not u] + res_specs
    with set_current_trace(trace.parent):
        known_results = _bind(consts, [a for a, u in zip(args, unknown) if not u], body, mesh, manual_axes,
                              [s for s, u in zip(in_specs, unknown) if not u], known_out_specs, check_vma)
    n_known = len(known_results) - len(res_axes)
    known_outs, res_values = known_results[:n_known], known_results[n_known:]

    def unknown_body(*xs: Any) -> list[Any]:
        res = [_unstacked(r, a) for r, a in zip(xs[:len(res_axes)], res_axes)]
        return eval_jaxpr(rest, res, xs[len(res_axes):])

    res_local = [v.aval.update(shape=(1,) + v.aval.shape) if a else v.aval for v, a in zip(rest.constvars, res_axes)]
    body, consts = _traced_body(unknown_body, mesh, manual_axes, res_local + [v.aval for v in rest.invars], check_vma)
    unknown_out_specs = tuple(s for s, u in zip(out_specs, out_unknown) if u)
    inputs = consts + res_values + [a for a, u in zip(args, unknown) if u]
    specs = tuple(PartitionSpec() for _ in consts) + tuple(res_specs) + tuple(s for s, u in zip(in_specs, unknown) if u)
    unknown_avals = tuple(a for a, u in zip(out_avals, out_unknown) if u)
    staged = trace.stage(shard_map_p, inputs, dict(jaxpr=body, mesh=mesh, in_specs=specs, out_specs=unknown_out_specs,
                                                    out_avals=unknown_avals, check_vma=check_vma,
                                                    manual_axes=manual_axes), unknown_avals)
    known_iter, staged_iter = iter(known_outs), iter(staged)
    return [next(staged_iter) if u else next(known_iter) for u in out_unknown]


partial_eval_rules[shard_map_p] = _partial_eval


# ---- transpose ---------------------------------------------------------------------------------------------------


def _transpose(cts: list[Any], *args: Any, jaxpr: Jaxpr, mesh: Any, in_specs: tuple, out_specs: tuple,
               out_avals: tuple, check_vma: bool, manual_axes: tuple) -> list[Any]:
    linear = [is_undefined(a) for a in args]
    nonzero = [not isinstance(c, Zero) for c in cts]
    view = Jaxpr([v for v, lin in zip(jaxpr.invars, linear) if not lin],
                 [v for v, lin in zip(jaxpr.invars, linear) if lin], jaxpr.equations, jaxpr.outvars)
    known_args = [a for a, lin in zip(args, linear) if not lin]
    n_known = len(known_args)

    lin_specs = [_cotangent_spec(s) for s, lin in zip(in_specs, linear) if lin]

    def body(*xs: Any) -> list[Any]:
        res, rest = list(xs[:n_known]), iter(xs[n_known:])
        local_cts = [next(rest) if nz else Zero(_cotangent_aval(v.aval)) for nz, v in zip(nonzero, jaxpr.outvars)]
        if not check_vma:
            local_cts = [_divided(c, mesh, manual_axes, s) for c, s in zip(local_cts, out_specs)]
        in_cts = backward_pass(view, res, local_cts)
        in_cts = [instantiate(c) for c in in_cts]
        if not check_vma:
            return [_summed(c, mesh, manual_axes, s) for c, s in zip(in_cts, lin_specs)]
        return [with_partial_sums(c, s.unreduced, s.reduced) for c, s in zip(in_cts, lin_specs)]

    avals = [v.aval for v in view.constvars] + [_cotangent_aval(v.aval) for v, nz in zip(jaxpr.outvars, nonzero)
                                                if nz]
    new, consts = _traced_body(body, mesh, manual_axes, avals, check_vma)
    ct_specs = [_cotangent_spec(s) for s, nz in zip(out_specs, nonzero) if nz]
    outs = iter(_bind(consts, known_args + [c for c in cts if not isinstance(c, Zero)], new, mesh, manual_axes,
                      [s for s, lin in zip(in_specs, linear) if not lin] + ct_specs, lin_specs, check_vma))
    return [next(outs) if lin else None for lin in linear]


def _cotangent_aval(aval: Any) -> Any:
    """The type of a cotangent: unreduced where the value is reduced, and reduced where it is unreduced."""
    return aval.update(unreduced=aval.reduced, reduced=aval.unreduced) if aval.unreduced or aval.reduced else aval


def _cotangent_spec(spec: PartitionSpec) -> PartitionSpec:
    return spec.update(unreduced=spec.reduced, reduced=spec.unreduced) if spec.unreduced or spec.reduced else spec


def _unmapped(manual: tuple, spec: Any) -> tuple[str, ...]:
    named = set(spec_axes(spec))
    return tuple(a for a in manual if a not in named)


def _divided(ct: Any, mesh: Any, manual: tuple, spec: Any) -> Any:
    axes = _unmapped(manual, spec)
    if isinstance(ct, Zero) or not axes:
        return ct
    size = math.prod(mesh.shape[a] for a in axes)
    return P.BINARY["div"].bind(ct, np.asarray(size, aval_of(ct).dtype))


def _summed(ct: Any, mesh: Any, manual: tuple, spec: Any) -> Any:
    axes = _unmapped(manual, spec)
    return preduce_p.bind(ct, axes=axes, op="sum") if axes else ct


transpose_rules[shard_map_p] = _transpose
