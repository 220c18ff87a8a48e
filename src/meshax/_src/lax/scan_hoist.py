"""A loop's sums of per-step products taken out of the loop: one large product over all the steps after it.

The transpose of a scan (scan_ad.py) carries, for each loop-invariant input (a weight), the running sum of its
cotangent: `acc += x_t^T @ g_t` each step, x_t a row of the inputs the loop walks and g_t a value the step
computes (a GRU's weight gradients: four small products and two row sums per step, each a BLAS or NumPy call of a
few microseconds on 32 rows). When a carry is such a running sum and nothing else in the body reads it, the body
instead hands out its factors as stacked outputs (those that are not rows of the loop's inputs already) and the
sum is one dot_general (or reduce_sum) over the steps' axis as well, added to the carry's start once after the
loop: the same terms, summed in another order (float rounding as any reassociation), as XLA's own loop fusion
may sum them. Only dot_generals without batch dimensions and reduce_sums without kept dimensions are taken, whose
factors change from step to step (computed from the rows or carries in the body, or rows of the walked inputs; not
constants, not carries themselves), and only where the stacked factors take at most 64 MiB more memory than the
inputs the loop walks.

The other way round, a product of a walked row with a loop-invariant input (`x_t @ W`, a GRU's input
projections) is computed before the loop for all the steps at once, `xs @ W`: one large product on the
controller's threads instead of one small product a step, the loop walking its result (the same terms; OpenBLAS
sums them in the same order for the GRU's and transformers' shapes, but may order a small odd-shaped product's
otherwise, ~1 ulp; the first, walked run of a loop and its generated code both take the rewritten loop, so every
run and every process computes the same). Taken where the stacked products take at most
EXTRA_STACKED_BYTES more memory than the inputs the loop walks.

First of all, the body's plain computations (simplify.pure) of loop-invariant inputs only (a weight's transpose,
a mask broadcast to the rows' shape) are computed once before the loop, which takes their results as more
loop-invariant inputs: the same values, one computation instead of one a step (a loop of no steps keeps them).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.jaxpr import Equation, Jaxpr, Var
from ..interpreters import simplify
from ..primitives import array_primitives as P
from .control_flow import _stacked, scan_p

_ACCUMULATE = frozenset({"add", "add_any"})


def _hoisted(eq: Equation, producers: dict[int, Equation], uses: dict[int, int]) -> list[Equation] | None:
    """`eq` (a scan) without its carries that only accumulate per-step products, and those products' sums as
    equations after it; None where no carry is one."""
    params = eq.params
    body: Jaxpr = params["jaxpr"]
    if body.constvars:
        return None
    consts, carries = params["num_consts"], params["num_carry"]
    carry_in = body.invars[consts:consts + carries]
    rows = {v.id: position for position, v in enumerate(body.invars[consts + carries:])}
    made = {v.id: e for e in body.equations for v in e.outputs}
    reads = simplify.read_counts(body.equations, body.outvars)
    varying, carry_ids = _varying(body, consts), {v.id for v in carry_in}
    found = {}  # carry index -> (its accumulating add, the summed product or reduction)
    for k, acc in enumerate(carry_in):
        term = _accumulated_term(acc, body.outvars[k], made, reads, varying - carry_ids)
        if term is not None:
            found[k] = term
    stacked = {x.id: x.aval for _, term in found.values() for x in term.inputs if x.id not in rows}
    walked = sum(_bytes(x.aval) for x in eq.inputs[consts + carries:])
    if not found or params["length"] * sum(map(_bytes, stacked.values())) > walked + EXTRA_STACKED_BYTES:
        return None
    return _rewritten(eq, body, found, rows)


# the steps' factors may take this much memory beyond what the loop's walked inputs take (a loop's gradient
# walks its residuals, of the same sizes as the factors)
EXTRA_STACKED_BYTES = 64 << 20


def _bytes(aval: Any) -> int:
    return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize


def _varying(body: Jaxpr, consts: int) -> set[int]:
    """The body's values that change from step to step: the carries, the rows, and what is computed from them."""
    varying = {v.id for v in body.invars[consts:]}
    for e in body.equations:
        if any(isinstance(x, Var) and x.id in varying for x in e.inputs):
            varying.update(v.id for v in e.outputs)
    return varying


def _accumulated_term(acc: Var, result: Any, made: dict[int, Equation], reads: dict[int, int],
                      stackable: set[int]) -> tuple[Equation, Equation] | None:
    """(add, term) where the carry `acc` comes out as `result` = acc + term, term a product or sum of values in
    `stackable` (those that change per step, but the carries themselves), and neither acc, result nor term is read
    by anything else."""
    add = made.get(result.id) if isinstance(result, Var) else None
    if add is None or add.primitive.name not in _ACCUMULATE or reads.get(acc.id) != 1 or reads.get(result.id) != 1:
        return None
    others = [x for x in add.inputs if x is not acc]
    if len(others) != 1 or len(add.inputs) != 2 or not isinstance(others[0], Var) or reads.get(others[0].id) != 1:
        return None
    term = made.get(others[0].id)
    if term is None or term.outputs[0].aval.dtype != acc.aval.dtype or term.outputs[0].aval.shape != acc.aval.shape:
        return None
    if not all(isinstance(x, Var) and x.id in stackable for x in term.inputs):
        return None
    if term.primitive is P.dot_general:
        (_, _), (lb, rb) = term.params["dimension_numbers"]
        return (add, term) if not lb and not rb and term.params.get("out_sharding") is None else None
    if term.primitive is P.REDUCE["sum"] and not term.params.get("keepdims", False):
        return add, term
    return None


def _rewritten(eq: Equation, body: Jaxpr, found: dict[int, tuple[Equation, Equation]],
               rows: dict[int, int]) -> list[Equation]:
    """The scan without the `found` carries, handing out their terms' factors stacked, and their sums after it."""
    params = eq.params
    consts, carries, length = params["num_consts"], params["num_carry"], params["length"]
    dropped = {id(e) for pair in found.values() for e in pair}
    kept = [k for k in range(carries) if k not in found]
    stacked_outputs: dict[int, Var] = {}  # body value id -> the outer variable of its stacked steps
    new_ys: list[Var] = []
    for _, term in found.values():
        for x in term.inputs:
            if x.id not in rows and x.id not in stacked_outputs:
                new_ys.append(x)
                stacked_outputs[x.id] = Var(_stacked(x.aval, length))
    new_body = Jaxpr([], body.invars[:consts] + [body.invars[consts + k] for k in kept] + body.invars[consts + carries:],
                     [e for e in body.equations if id(e) not in dropped],
                     [body.outvars[k] for k in kept] + body.outvars[carries:] + new_ys)
    xs = eq.inputs[consts + carries:]
    loop = Equation(scan_p, eq.inputs[:consts] + [eq.inputs[consts + k] for k in kept] + xs,
                    [eq.outputs[k] for k in kept] + eq.outputs[carries:] + [stacked_outputs[v.id] for v in new_ys],
                    dict(params, jaxpr=new_body, num_carry=len(kept)))
    after = []
    for k, (add, term) in found.items():
        operands = [xs[rows[x.id]] if x.id in rows else stacked_outputs[x.id] for x in term.inputs]
        total = Var(term.outputs[0].aval)
        after.append(Equation(term.primitive, operands, [total], _over_steps(term)))
        after.append(Equation(add.primitive, [eq.inputs[consts + k], total], [eq.outputs[k]], add.params))
    return [loop] + after


def _over_steps(term: Equation) -> dict[str, Any]:
    """`term`'s parameters for its operands stacked along a new leading axis of steps, summed over it too."""
    if term.primitive is P.dot_general:
        (lc, rc), batch = term.params["dimension_numbers"]
        return dict(term.params, dimension_numbers=(((0,) + tuple(d + 1 for d in lc), (0,) + tuple(d + 1 for d in rc)),
                                                    batch))
    return dict(term.params, axes=(0,) + tuple(d + 1 for d in term.params["axes"]))


def _products_before(eq: Equation) -> list[Equation] | None:
    """`eq` (a scan) with its products of a walked row and a loop-invariant input computed before it for all
    the steps (one product each), the loop walking their results; None where it has none."""
    params = eq.params
    body: Jaxpr = params["jaxpr"]
    consts, carries, length = params["num_consts"], params["num_carry"], params["length"]
    if body.constvars:
        return None
    rows = {v.id: position for position, v in enumerate(body.invars[consts + carries:])}
    invariant = {v.id for v in body.invars[:consts]}
    found = [e for e in body.equations if _row_times_invariant(e, rows, invariant)]
    walked = sum(_bytes(x.aval) for x in eq.inputs[consts + carries:])
    if not found or length * sum(_bytes(e.outputs[0].aval) for e in found) > walked + EXTRA_STACKED_BYTES:
        return None
    xs = eq.inputs[consts + carries:]
    before, new_xs = [], []
    for e in found:
        (lc, rc), batch = e.params["dimension_numbers"]
        stacked = Var(_stacked(e.outputs[0].aval, length))
        before.append(Equation(e.primitive, [xs[rows[e.inputs[0].id]], eq.inputs[body.invars.index(e.inputs[1])]],
                               [stacked], dict(e.params, dimension_numbers=((tuple(d + 1 for d in lc), rc), batch))))
        new_xs.append(stacked)
    taken = {id(e) for e in found}
    new_body = Jaxpr([], body.invars + [e.outputs[0] for e in found],
                     [e for e in body.equations if id(e) not in taken], body.outvars)
    return before + [Equation(scan_p, eq.inputs + new_xs, eq.outputs, dict(params, jaxpr=new_body))]


def _row_times_invariant(e: Equation, rows: dict[int, int], invariant: set[int]) -> bool:
    """Whether `e` is a dot_general (no batch dimensions, no sharding asked) of a walked row by a loop-invariant
    input, in that order."""
    if e.primitive is not P.dot_general or e.params.get("out_sharding") is not None or \
            any(e.params["dimension_numbers"][1]):
        return False
    row, weight = e.inputs
    return isinstance(row, Var) and isinstance(weight, Var) and row.id in rows and weight.id in invariant


def _invariants_before(eq: Equation, producers: dict[int, Equation]) -> list[Equation] | None:
    """`eq` (a scan) with its body's computations of loop-invariant inputs only made before it, their results
    more loop-invariant inputs; a walked input that is one value repeated (a broadcast along the steps' axis)
    read as that value; a stacked output that is a loop-invariant value repeated made after it as a broadcast (a
    view: a weight's transpose saved for the gradient's loop, which then reads it as loop-invariant). None where
    nothing changes (or the loop has no steps)."""
    params = eq.params
    body: Jaxpr = params["jaxpr"]
    consts, carries, length = params["num_consts"], params["num_carry"], params["length"]
    if body.constvars or length == 0:
        return None
    outer = {v.id: x for v, x in zip(body.invars[:consts], eq.inputs[:consts])}  # body invariant -> outer value
    walked = list(zip(body.invars[consts + carries:], eq.inputs[consts + carries:]))
    repeated = [(v, producers[x.id].inputs[0]) for v, x in walked
                if isinstance(x, Var) and x.id in producers and _repeated_along_steps(producers[x.id])]
    outer.update((v.id, x) for v, x in repeated)
    before: list[Equation] = []
    taken: set[int] = set()
    for e in body.equations:
        if simplify.pure(e) and not _has_jaxpr(e) and \
                all(not isinstance(x, Var) or x.id in outer for x in e.inputs):
            results = [Var(v.aval) for v in e.outputs]
            before.append(Equation(e.primitive, [outer[x.id] if isinstance(x, Var) else x for x in e.inputs],
                                   results, e.params))
            outer.update((v.id, r) for v, r in zip(e.outputs, results))
            taken.add(id(e))
    ys = list(zip(body.outvars[carries:], eq.outputs[carries:]))
    invariant_ys = [(v, y) for v, y in ys if isinstance(v, Var) and v.id in outer]
    if not before and not repeated and not invariant_ys:
        return None
    made = [v for e in body.equations if id(e) in taken for v in e.outputs]
    moved = {v.id for v, _ in repeated}
    new_consts = made + [v for v, _ in repeated] + body.invars[:consts]
    kept_ys = [(v, y) for v, y in ys if not (isinstance(v, Var) and v.id in outer)]
    new_body = Jaxpr([], new_consts + [v for v in body.invars[consts:] if v.id not in moved],
                     [e for e in body.equations if id(e) not in taken],
                     body.outvars[:carries] + [v for v, _ in kept_ys])
    loop = Equation(scan_p, [outer[v.id] for v in new_consts] + eq.inputs[consts:consts + carries] +
                    [x for v, x in walked if v.id not in moved], eq.outputs[:carries] + [y for _, y in kept_ys],
                    dict(params, jaxpr=new_body, num_consts=len(new_consts)))
    after = [Equation(P.broadcast_in_dim, [outer[v.id]], [y],
                      dict(shape=tuple(y.aval.shape), broadcast_dimensions=tuple(range(1, len(y.aval.shape)))))
             for v, y in invariant_ys]
    return before + [loop] + after


def _repeated_along_steps(e: Equation) -> bool:
    """Whether `e` broadcasts its operand along a new leading axis only (the same value at every step)."""
    if e.primitive is not P.broadcast_in_dim or not isinstance(e.inputs[0], Var):
        return False
    shape = tuple(e.params["shape"])
    return tuple(e.inputs[0].aval.shape) == shape[1:] and \
        tuple(e.params["broadcast_dimensions"]) == tuple(range(1, len(shape)))


def _has_jaxpr(eq: Equation) -> bool:
    """Whether `eq` runs a jaxpr of its own (a fused cluster): left in the loop."""
    return any(isinstance(value, Jaxpr) or hasattr(value, "jaxpr") for value in eq.params.values())


def _rewritten_scan(eq: Equation, producers: dict[int, Equation], uses: dict[int, int]) -> list[Equation] | None:
    """`eq` (a scan) with its computations of loop-invariant inputs before it, its running sums of products
    after it and its products of rows before it."""
    # the body simplified once for the three (a product written twice is computed once)
    eq = Equation(eq.primitive, eq.inputs, eq.outputs, dict(eq.params, jaxpr=simplify.simplify(eq.params["jaxpr"])))
    first = _invariants_before(eq, producers)
    head, loop, broadcasts = ([], eq, []) if first is None else _split_at_scan(first)
    after = _hoisted(loop, producers, uses)
    tail = after or [loop]
    before = _products_before(tail[0])
    if before is None:
        return head + tail + broadcasts if first or after else None
    return head + before + tail[1:] + broadcasts


def _split_at_scan(equations: list[Equation]) -> tuple[list[Equation], Equation, list[Equation]]:
    """(the equations before the one scan of `equations`, the scan, those after it)."""
    k = next(k for k, e in enumerate(equations) if e.primitive is scan_p)
    return equations[:k], equations[k], equations[k + 1:]


simplify.rewrites["scan"] = _rewritten_scan
