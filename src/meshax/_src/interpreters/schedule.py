"""When a program's collectives run: gathers as early as their inputs allow, reductions as late as their results
allow, so that they meet in a few groups instead of one wait between every two pieces of compute.

Every collective is a point where each process waits for the slowest of its peers. A step of FSDP
gathers each layer's weights just before the layer and reduces each gradient just after it is
computed: about fifteen such waits, each as long as a peer takes to be scheduled again on a busy
host (measured 3-15 ms each on 4 processes sharing 2 busy cores), against the hand-written NumPy
step's handful of back-to-back reductions at its end. Here the executable program (fusion.executable)
moves `all_gather`s up to just after the equations computing their operands and `preduce` /
`reduce_scatter`s (and plain work on their results, such as a pmean's division) down to just before
the first equation reading their results, so that the gathers of parameters run together at the
start and the gradients' reductions together at the end. Sums
(psum, psum_scatter) that end up next to each other, over the same axes and of one dtype, then become
one `grouped_sum` (lax/parallel.py): one reduction of all their values side by side, one wait; and
gathers next to each other (same axes and dtype) one `grouped_gather`: one exchange.

What moves and what never does:
- collectives keep their order among themselves (every process runs the same program, so this is
  only for predictability), and nothing moves past an equation with effects or a call, loop or
  branch (which may hold collectives of its own); `pvary`, its type casts and `axis_index` do
  not communicate;
- the values are the same: only the order of independent equations changes;
- a moved collective keeps a value alive for longer (a gathered weight from the start, a full
  gradient until its reduction), so moves stop once they would keep more than `MAX_MOVED_BYTES` of
  one device's values alive in all.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ..core.core import Primitive
from ..core.jaxpr import Equation, Jaxpr, Var
from .simplify import pure

HOISTED = frozenset({"all_gather"})
SUNK = frozenset({"preduce", "reduce_scatter"})
# collectives' relatives that do not communicate (casts that change only a type)
_LOCAL = frozenset({"pvary", "axis_index", "reduced_vary_cast_p", "vary_unreduced_cast_p", "preduced"})
MAX_MOVED_BYTES = 32 << 20
grouped_sum: list[Primitive] = []  # the primitive of several sums in one reduction (lax/parallel.py puts it here)
grouped_gather: list[Primitive] = []  # ... of several all_gathers in one exchange


def schedule(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with its gathers moved up and its reductions moved down (see the module's docstring)."""
    names = {eq.primitive.name for eq in jaxpr.equations}
    if not names & (HOISTED | SUNK):
        return jaxpr
    budget = [MAX_MOVED_BYTES]
    equations = _moved(list(jaxpr.equations), lambda eq: eq.primitive.name in HOISTED, lambda eq: eq.outputs, _reads,
                       budget)
    sums = {v.id for eq in equations if eq.primitive.name in SUNK for v in eq.outputs}

    def sunk(eq: Equation) -> bool:  # a reduction, or plain work on a reduction's result (a pmean's division)
        return eq.primitive.name in SUNK or (pure(eq) and any(isinstance(x, Var) and x.id in sums for x in eq.inputs))

    equations = _moved(equations[::-1], sunk, lambda eq: [x for x in eq.inputs if isinstance(x, Var)], _written,
                       budget)[::-1]
    if grouped_sum:
        equations = _grouped(equations, grouped_sum[0], _sum_key, _sum_part, budget)
    if grouped_gather:
        equations = _grouped(equations, grouped_gather[0], _gather_key, _gather_part, budget)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, equations, jaxpr.outvars, jaxpr.consts)


def _reads(later: Equation, earlier: Equation) -> bool:
    """Whether `later` reads an output of `earlier` (a gather depends on its operands' producers)."""
    made = {v.id for v in earlier.outputs}
    return any(isinstance(x, Var) and x.id in made for x in later.inputs)


def _written(earlier: Equation, later: Equation) -> bool:
    """Whether `later` reads an output of `earlier`, seen from the end of the program (a reduction depends on
    its results' readers)."""
    return _reads(later, earlier)


def _barrier(eq: Equation) -> bool:
    """Whether nothing may move past `eq`: a collective, an effect, or a call that may hold either."""
    return not pure(eq) and eq.primitive.name not in _LOCAL


def _moved(equations: list[Equation], movable: Callable[[Equation], bool], kept_alive: Callable[[Equation], list[Any]],
           depends: Callable[[Equation, Equation], bool], budget: list[int]) -> list[Equation]:
    """`equations` with each `movable` one moved towards the front, to just after the last equation it depends
    on or the last barrier before it, as long as `budget` (bytes kept alive longer) lasts."""
    result: list[Equation] = []
    for eq in equations:
        if movable(eq):
            size = sum(math.prod(v.aval.shape) * v.aval.dtype.itemsize for v in kept_alive(eq))
            if size <= budget[0]:
                position = 0
                for index in range(len(result) - 1, -1, -1):
                    if _barrier(result[index]) or depends(eq, result[index]):
                        position = index + 1
                        break
                if position < len(result):
                    budget[0] -= size
                result.insert(position, eq)
                continue
        result.append(eq)
    return result


def _sum_key(eq: Equation) -> Any:
    """What sums must share to be reduced together (None: `eq` is not a sum that can be)."""
    name = eq.primitive.name
    if name not in SUNK or (name == "preduce" and eq.params["op"] != "sum"):
        return None
    dtype = eq.inputs[0].aval.dtype
    return None if dtype.kind == "b" or not isinstance(eq.inputs[0], Var) else (tuple(eq.params["axes"]), dtype)


def _sum_part(eq: Equation) -> Any:
    return None if eq.primitive.name == "preduce" else (eq.params["dimension"], eq.params["tiled"])


def _gather_key(eq: Equation) -> Any:
    """What gathers must share to be exchanged together (None: `eq` is not a gather that can be)."""
    if eq.primitive.name not in HOISTED or not isinstance(eq.inputs[0], Var):
        return None
    return tuple(eq.params["axes"]), eq.inputs[0].aval.dtype


def _gather_part(eq: Equation) -> Any:
    return eq.params["axis"], eq.params["tiled"]


def _grouped(equations: list[Equation], primitive: Primitive, key_of: Callable[[Equation], Any],
             part_of: Callable[[Equation], Any], budget: list[int]) -> list[Equation]:
    """Collectives with the same key as one `primitive` equation, at the first one's place: a later one joins
    while nothing between them is a barrier or computes its operand (and it reads no result of the group), and
    while `budget` lasts for its result made that much earlier."""
    result: list[Equation] = []
    run: list[Equation] = []
    between: list[Equation] = []  # equations after the group's first sum, not in it

    def flush() -> None:
        if len(run) > 1:
            result.append(Equation(primitive, [eq.inputs[0] for eq in run], [eq.outputs[0] for eq in run],
                                   {"axes": key_of(run[0])[0], "parts": tuple(part_of(eq) for eq in run)}))
        else:
            result.extend(run)
        result.extend(between)
        run.clear()
        between.clear()

    for eq in equations:
        key = key_of(eq)
        if run and key is not None and key == key_of(run[0]) and \
                not any(_reads(eq, earlier) for earlier in run + between):
            size = sum(math.prod(v.aval.shape) * v.aval.dtype.itemsize for v in eq.outputs) if between else 0
            if size <= budget[0]:
                budget[0] -= size
                run.append(eq)
                continue
        if run and not _barrier(eq):
            between.append(eq)
            continue
        flush()
        (run if key is not None else result).append(eq)
    flush()
    return result
