"""Differentiating scan without unrolling it: a jvp that is a scan, partial evaluation into a primal scan and a
tangent scan, and a transpose that is a reverse scan (as JAX does).

The jvp maps the body's jvp over the same loop. Partial evaluation traces the jvp'd body with its tangent
inputs unknown: the known part becomes a scan computing primal carries and outputs plus per-step residuals
(stacked as outputs), the unknown part a scan over those residuals. Carries that become unknown inside the
body are made unknown from the start (a fixpoint). The transpose runs the linear body's backward pass in
reverse order, carrying the carry cotangent and the sum of the loop-invariant inputs' cotangents.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.core import Tracer, aval_of, current_trace, set_current_trace
from ..interpreters.ad import (Zero, add_tangents, backward_pass, instantiate, is_undefined, jvp_flat, jvp_rules,
                               tangent_aval, transpose_rules, zeros)
from ..interpreters.staging import PartialEvalTrace, consts_as_inputs, partial_eval_rules, trace_to_jaxpr
from ..core.jaxpr import Jaxpr, eval_jaxpr
from .control_flow import _row, _stacked, scan_p
from . import scan_hoist  # noqa: F401  (installs the hoisting of the transpose's running sums)
from ..core.dtypes import issubdtype


def _closed(fun: Any, avals: Sequence[Any]) -> tuple[Jaxpr, list[Any]]:
    jaxpr, _ = trace_to_jaxpr(fun, list(avals))
    return consts_as_inputs(jaxpr), list(jaxpr.consts)


def _split3(items: Sequence[Any], a: int, b: int) -> tuple[list[Any], list[Any], list[Any]]:
    return list(items[:a]), list(items[a:a + b]), list(items[a + b:])


def _differentiable(aval: Any) -> bool:
    return issubdtype(aval.dtype, np.inexact)


# ---- jvp ------------------------------------------------------------------------------------------------------


def _scan_jvp(primals: list[Any], tangents: list[Any], *, jaxpr: Jaxpr, num_consts: int, num_carry: int,
              length: int, reverse: bool, unroll: int = 1) -> tuple[list[Any], list[Any]]:
    in_avals = [v.aval for v in jaxpr.invars]
    consts_a, carry_a, xs_a = _split3(in_avals, num_consts, num_carry)
    const_t, carry_t, xs_t = _split3(tangents, num_consts, num_carry)
    const_nz = [not isinstance(t, Zero) for t in const_t]
    xs_nz = [not isinstance(t, Zero) for t in xs_t]
    carry_d = [_differentiable(a) for a in carry_a]  # carries get tangents (zeros where none came in)
    out_avals = [v.aval for v in jaxpr.outvars]
    ys_d = [_differentiable(a) for a in out_avals[num_carry:]]

    def body(*args: Any) -> list[Any]:
        it = iter(args)
        consts = [next(it) for _ in consts_a]
        ct = [next(it) if nz else Zero(tangent_aval(a)) for nz, a in zip(const_nz, consts_a)]
        carry = [next(it) for _ in carry_a]
        cat = [next(it) if d else Zero(tangent_aval(a)) for d, a in zip(carry_d, carry_a)]
        xs = [next(it) for _ in xs_a]
        xt = [next(it) if nz else Zero(tangent_aval(a)) for nz, a in zip(xs_nz, xs_a)]
        outs, touts = jvp_flat(lambda *v: eval_jaxpr(jaxpr, (), v), consts + carry + xs, ct + cat + xt)
        carry_out, ys = outs[:num_carry], outs[num_carry:]
        carry_tout = [instantiate(t) for t, d in zip(touts[:num_carry], carry_d) if d]
        ys_tout = [instantiate(t) for t, d in zip(touts[num_carry:], ys_d) if d]
        return carry_out + carry_tout + ys + ys_tout

    avals = (consts_a + [a for a, nz in zip(consts_a, const_nz) if nz] + carry_a +
             [a for a, d in zip(carry_a, carry_d) if d] + xs_a + [a for a, nz in zip(xs_a, xs_nz) if nz])
    new, captured = _closed(body, avals)
    consts, carry, xs = _split3(primals, num_consts, num_carry)
    args = (captured + consts + [t for t, nz in zip(const_t, const_nz) if nz] + carry +
            [instantiate(t) for t, d in zip(carry_t, carry_d) if d] + xs + [t for t, nz in zip(xs_t, xs_nz) if nz])
    n_carry = num_carry + sum(carry_d)
    outs = scan_p.bind(*args, jaxpr=new, num_consts=len(captured) + num_consts + sum(const_nz), num_carry=n_carry,
                       length=length, reverse=reverse, unroll=unroll)
    carry_out, carry_tout, ys, ys_tout = outs[:num_carry], iter(outs[num_carry:n_carry]), \
        outs[n_carry:n_carry + len(ys_d)], iter(outs[n_carry + len(ys_d):])
    tangent_out = [next(carry_tout) if d else Zero(tangent_aval(a)) for d, a in zip(carry_d, carry_a)] + \
        [next(ys_tout) if d else Zero(tangent_aval(a)) for d, a in zip(ys_d, out_avals[num_carry:])]
    return carry_out + ys, tangent_out


jvp_rules[scan_p] = _scan_jvp


# ---- partial evaluation -------------------------------------------------------------------------------------------


def _scan_partial_eval(trace: Any, *args: Any, jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int,
                       reverse: bool, unroll: int = 1) -> list[Any]:
    unknown = [trace.is_own(a) for a in args]
    in_avals = [v.aval for v in jaxpr.invars]
    while True:  # a carry whose output is unknown is unknown from the start
        split = _trace_known(jaxpr, in_avals, unknown, num_consts, num_carry)
        carry_in = unknown[num_consts:num_consts + num_carry]
        grown = [i or o for i, o in zip(carry_in, split["must"][:num_carry])]
        if grown == carry_in:
            break
        unknown = unknown[:num_consts] + grown + unknown[num_consts + num_carry:]
    must, rest = split["must"], split["rest"]
    n_known_consts = sum(not u for u in unknown[:num_consts])
    n_known_carry = num_carry - sum(unknown[num_consts:num_consts + num_carry])
    with set_current_trace(trace.parent):
        known_out = scan_p.bind(*split["captured"], *[a for a, u in zip(args, unknown) if not u], jaxpr=split["body"],
                                num_consts=len(split["captured"]) + n_known_consts, num_carry=n_known_carry,
                                length=length, reverse=reverse, unroll=unroll)
    n_res = len(split["residual_avals"])
    known_values, stacked = known_out[:len(known_out) - n_res], known_out[len(known_out) - n_res:]
    invariant = [args[ref] if kind == "arg" else ref for kind, ref in split["invariant"]]
    u_consts, u_carry, u_xs = (
        [a for a, u in zip(part, flags) if u] for part, flags in
        zip(_split3(args, num_consts, num_carry), _split3(unknown, num_consts, num_carry)))
    n_inv, n_uc, n_ucarry = len(invariant), len(u_consts), len(u_carry)

    def unknown_body(*xs: Any) -> list[Any]:
        inv, rest_in = list(xs[:n_inv]), list(xs[n_inv:])
        consts_and_carry = rest_in[:n_uc + n_ucarry]
        res, ux = rest_in[n_uc + n_ucarry:n_uc + n_ucarry + n_res], rest_in[n_uc + n_ucarry + n_res:]
        return eval_jaxpr(rest, split["order"](inv, res), consts_and_carry + ux)

    avals = ([aval_of(c) for c in invariant] + [aval_of(c) for c in u_consts + u_carry] + split["residual_avals"] +
             [_row(aval_of(x)) for x in u_xs])
    body, captured = _closed(unknown_body, avals)
    staged = trace.stage(scan_p, captured + invariant + u_consts + u_carry + stacked + u_xs,
                         dict(jaxpr=body, num_consts=len(captured) + n_inv + n_uc, num_carry=n_ucarry,
                              length=length, reverse=reverse, unroll=unroll),
                         _scan_out_avals(body, n_ucarry, length))
    known_iter, staged_iter = iter(known_values), iter(staged)
    return [next(staged_iter) if m else next(known_iter) for m in must]


def _scan_out_avals(jaxpr: Jaxpr, num_carry: int, length: int) -> list[Any]:
    outs = [v.aval for v in jaxpr.outvars]
    return outs[:num_carry] + [_stacked(a, length) for a in outs[num_carry:]]


def _trace_known(jaxpr: Jaxpr, in_avals: list[Any], unknown: list[bool], num_consts: int, num_carry: int) -> dict:
    """Trace the known scan body: the body run with the unknown inputs in a PartialEvalTrace. Its outputs: the
    known carries, the known ys, and the per-step residuals the unknown part needs."""
    split: dict[str, Any] = {}
    known_positions = [i for i, u in enumerate(unknown) if not u]

    def known_body(*known_xs: Any) -> list[Any]:
        pe = PartialEvalTrace(current_trace())
        unknown_in = [pe.new_arg(a) for a, u in zip(in_avals, unknown) if u]
        known_iter, unknown_iter = iter(known_xs), iter(unknown_in)
        full = [next(unknown_iter) if u else next(known_iter) for u in unknown]
        with set_current_trace(pe, finish=True):
            outs = eval_jaxpr(jaxpr, (), full)
            must = [pe.is_own(o) or (k < num_carry and unknown[num_consts + k]) for k, o in enumerate(outs)]
            rest = pe.to_jaxpr(unknown_in, [o for o, m in zip(outs, must) if m])
        # loop-invariant residuals: the loop's own known constants, and constant values; the rest is per step
        const_of = {id(known_xs[j]): i for j, i in enumerate(known_positions) if i < num_consts}
        invariant, per_step, inv_slots, res_slots = [], [], [], []
        for slot, r in enumerate(rest.consts):
            if id(r) in const_of:
                invariant.append(("arg", const_of[id(r)]))
                inv_slots.append(slot)
            elif not isinstance(r, Tracer):
                invariant.append(("value", r))
                inv_slots.append(slot)
            else:
                per_step.append(r)
                res_slots.append(slot)

        def order(inv: list[Any], res: list[Any]) -> list[Any]:
            values: list[Any] = [None] * len(rest.consts)
            for slot, v in zip(inv_slots + res_slots, inv + res):
                values[slot] = v
            return values

        split.update(must=must, rest=rest, invariant=invariant, order=order,
                     residual_avals=[aval_of(r) for r in per_step])
        # a known carry whose output is unknown: this pass only tells the fixpoint so (a placeholder stands in)
        known_carry = [zeros(in_avals[num_consts + k]) if must[k] else o for k, o in enumerate(outs[:num_carry])
                       if not unknown[num_consts + k]]
        known_ys = [o for o, m in zip(outs[num_carry:], must[num_carry:]) if not m]
        return known_carry + known_ys + per_step

    body, captured = _closed(known_body, [a for a, u in zip(in_avals, unknown) if not u])
    split.update(body=body, captured=captured)
    return split


partial_eval_rules[scan_p] = _scan_partial_eval


# ---- transpose ---------------------------------------------------------------------------------------------------


def _scan_transpose(cts: list[Any], *args: Any, jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int,
                    reverse: bool, unroll: int = 1) -> list[Any]:
    """A reverse scan of the body's backward pass: carries the carry cotangent and the running sum of the linear
    constants' cotangents; the linear xs' cotangents come out stacked."""
    linear = [is_undefined(a) for a in args]
    # every carry is transposed as linear: a known carry of a linear scan is a tangent that starts at zero
    const_lin, carry_lin, xs_lin = _split3(linear, num_consts, num_carry)
    consts, _, xs = _split3(args, num_consts, num_carry)
    invars = list(jaxpr.invars)
    c_vars, carry_vars, x_vars = _split3(invars, num_consts, num_carry)
    view = Jaxpr([v for v, lin in zip(c_vars, const_lin) if not lin] + [v for v, lin in zip(x_vars, xs_lin) if not lin],
                 [v for v, lin in zip(c_vars, const_lin) if lin] + carry_vars + [v for v, lin in zip(x_vars, xs_lin) if lin],
                 jaxpr.equations, jaxpr.outvars)
    res_consts = [c for c, lin in zip(consts, const_lin) if not lin]
    res_xs = [x for x, lin in zip(xs, xs_lin) if not lin]
    lin_const_avals = [v.aval for v, lin in zip(c_vars, const_lin) if lin]
    carry_avals = [v.aval for v in carry_vars]
    ct_carry = [zeros(a) if isinstance(c, Zero) else c for c, a in zip(cts[:num_carry], carry_avals)]
    ct_ys = cts[num_carry:]
    ys_nz = [not isinstance(c, Zero) for c in ct_ys]
    y_avals = [v.aval for v in jaxpr.outvars[num_carry:]]
    n_rc, n_acc, n_carry, n_rx = len(res_consts), len(lin_const_avals), num_carry, len(res_xs)

    def body(*values: Any) -> list[Any]:
        rc = list(values[:n_rc])
        acc = list(values[n_rc:n_rc + n_acc])
        ct_c = list(values[n_rc + n_acc:n_rc + n_acc + n_carry])
        rx = list(values[n_rc + n_acc + n_carry:n_rc + n_acc + n_carry + n_rx])
        cy = iter(values[n_rc + n_acc + n_carry + n_rx:])
        ys = [next(cy) if nz else Zero(a) for nz, a in zip(ys_nz, y_avals)]
        in_cts = [instantiate(c) for c in backward_pass(view, rc + rx, ct_c + ys)]
        ct_consts, ct_carry_in, ct_xs = _split3(in_cts, n_acc, n_carry)
        return [add_tangents(a, c) for a, c in zip(acc, ct_consts)] + ct_carry_in + ct_xs

    avals = ([aval_of(c) for c in res_consts] + lin_const_avals + carry_avals +
             [_row(aval_of(x)) for x in res_xs] +
             [a for a, nz in zip(y_avals, ys_nz) if nz])
    new, captured = _closed(body, avals)
    outs = scan_p.bind(*captured, *res_consts, *[zeros(a) for a in lin_const_avals], *ct_carry, *res_xs,
                       *[c for c in ct_ys if not isinstance(c, Zero)], jaxpr=new, num_consts=len(captured) + n_rc,
                       num_carry=n_acc + n_carry, length=length, reverse=not reverse, unroll=unroll)
    acc_out, carry_out, xs_out = _split3(outs, n_acc, n_carry)
    acc_iter, xs_iter = iter(acc_out), iter(xs_out)
    const_cts = [next(acc_iter) if lin else None for lin in const_lin]
    xs_cts = [next(xs_iter) if lin else None for lin in xs_lin]
    return const_cts + [c if lin else None for c, lin in zip(carry_out, carry_lin)] + xs_cts


transpose_rules[scan_p] = _scan_transpose
