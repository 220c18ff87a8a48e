"""A jitted program run in the eager trace (jit's eager rule): its simplified, fused program, cluster by cluster,
with results to be reduced across devices held and reduced together."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..arrays.collectives import allreduce_devices_many
from ..core.jaxpr import Jaxpr, Literal, Var, eval_jaxpr
from .eager import HeldReduction, bind_holding
from .fusion import ClusterDoesNotCompose, executable, fused_p


def run_eagerly(jaxpr: Jaxpr, args: Sequence[Any]) -> list[Any]:
    """Evaluate `jaxpr`'s executable program in the eager trace: each cluster as one operation where its
    sharding rules compose for the inputs it gets, else its equations one by one. A result to be reduced
    across devices (a gradient summed over the batch's devices) is held until an equation reads it (or the held
    partial values pass MAX_HELD_BYTES), and then reduced together with every other held one: one wait for the
    peers instead of one per gradient."""
    env: dict[int, Any] = {}
    held: dict[int, Any] = {}  # var id -> its HeldReduction: the result, not yet reduced

    def read(x: Any) -> Any:
        return x.value if isinstance(x, Literal) else env[x.id]

    def reduce_held() -> None:
        batches: dict[Any, list[tuple[int, HeldReduction]]] = {}
        for var_id, h in held.items():
            dtype = np.asarray(next(iter(h.partials.values()))).dtype
            batches.setdefault((h.mesh, h.axes, h.op, dtype), []).append((var_id, h))
        for batch in batches.values():
            mesh, axes, op = batch[0][1].mesh, batch[0][1].axes, batch[0][1].op
            reduced = allreduce_devices_many(mesh, axes, [h.partials for _, h in batch], op)
            for (var_id, h), values in zip(batch, reduced):
                env[var_id] = h.finish([values])
        held.clear()

    program = executable(jaxpr)
    for var, value in zip(program.invars, args):
        env[var.id] = value
    for eq in program.equations:
        if held and any(isinstance(x, Var) and x.id in held for x in eq.inputs):
            reduce_held()
        inputs = [read(x) for x in eq.inputs]
        if eq.primitive is fused_p:
            try:  # planned (its layout found) before anything runs or moves; a plan is kept for the next call
                outs = [fused_p.bind(*inputs, **eq.params)]
            except ClusterDoesNotCompose:
                outs = [eval_jaxpr(eq.params["cluster"].jaxpr, (), inputs)[0]]
        elif not eq.primitive.multiple_results and eq.primitive.name in _HELD:
            out = bind_holding(eq.primitive, *inputs, **eq.params)
            if isinstance(out, HeldReduction):
                held[eq.outputs[0].id] = out
                if sum(h.nbytes for h in held.values()) > MAX_HELD_BYTES:
                    reduce_held()
                continue
            outs = [out]
        else:
            out = eq.primitive.bind(*inputs, **eq.params)
            outs = out if eq.primitive.multiple_results else [out]
        for var, value in zip(eq.outputs, outs):
            env[var.id] = value
    if held:
        reduce_held()
    return [read(v) for v in program.outvars]


_HELD = frozenset({"dot_general", "reduce_sum", "reduce_max", "reduce_min"})  # may sum (max, min) over devices
MAX_HELD_BYTES = 64 << 20  # held results are reduced at once when they come to more than this (their partials)
