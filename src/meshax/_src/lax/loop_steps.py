"""A scan's iterations on the eager path, each one call: its body's jaxpr on the loop's leading values (consts,
carry) and row i of each of its xs.

Bound equation by equation, an iteration of a GRU's gradient is some 40 eager operations, each choosing a mesh,
a sharding rule and placements (the first training step: 16,000 of them, most of its 0.9 s). Bound as one
`loop_step` call, an iteration goes where a jitted call goes (numpy_eval.try_primitive): on one device, the first
iteration runs eagerly and teaches its results' shardings, and the next ones, whose inputs have the same types
and shardings, run as the body's NumPy program; over several devices, each iteration runs as a jitted call does
in the eager trace (eager_programs.run_eagerly): the body's executable program, its elementwise chains fused (a
GPT's layers under scan on 8 devices: 0.9-1.0 -> 0.64-0.74 s a training step). The values are the same: the same
implementations on the same inputs. Only the plain eager trace binds it (control_flow.py); elsewhere the
iterations are expanded as before.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..core.core import Primitive, abstract_eval_rules, keeps_own_vma, vma_rules
from ..core.jaxpr import Jaxpr, eval_jaxpr
from ..interpreters.eager import eager_rules
from ..interpreters.eager_programs import run_eagerly
from ..interpreters.numpy_eval import structured_rules
from ..interpreters.staging import inline_rules
from ..primitives import array_primitives as P

loop_step_p = Primitive("loop_step", multiple_results=True)


def step(jaxpr: Jaxpr, leading: Sequence[Any], xs: Sequence[Any], i: int) -> list[Any]:
    """The body's outputs for iteration i: `jaxpr` on `leading` and row i of each of `xs`, as one call."""
    return loop_step_p.bind(*leading, *xs, np.int32(i), jaxpr=jaxpr, rows=len(xs))


def _split(args: Sequence[Any], rows: int) -> tuple[list[Any], list[Any], int]:
    *values, index = args
    cut = len(values) - rows
    return values[:cut], values[cut:], int(index)


def _body_inputs(args: Sequence[Any], rows: int) -> list[Any]:
    """The body's inputs for the iteration: the leading values, then row i of each of the xs."""
    leading, xs, i = _split(args, rows)
    return leading + [P.static_slice.bind(x, index=(i,)) for x in xs]


def _expanded(*args: Any, jaxpr: Jaxpr, rows: int) -> list[Any]:
    return eval_jaxpr(jaxpr, (), _body_inputs(args, rows))


def _eagerly(*args: Any, jaxpr: Jaxpr, rows: int) -> list[Any]:
    """An iteration in the eager trace (inputs over a mesh): the body's executable program, its elementwise chains
    fused (eager_programs.run_eagerly, as a jitted call runs there)."""
    return run_eagerly(jaxpr, _body_inputs(args, rows))


def _on_numpy(run: Any, *args: Any, jaxpr: Jaxpr, rows: int) -> list[Any]:
    leading, xs, i = _split(args, rows)
    return run(jaxpr, (), leading + [np.asarray(x[i]) for x in xs])


abstract_eval_rules[loop_step_p] = lambda *avals, jaxpr, rows: [v.aval for v in jaxpr.outvars]
vma_rules[loop_step_p] = keeps_own_vma
inline_rules[loop_step_p] = _expanded
eager_rules[loop_step_p] = _eagerly
structured_rules[loop_step_p] = _on_numpy
