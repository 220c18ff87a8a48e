"""A jaxpr made ready to run on one device's NumPy values many times: a flat list of calls over numbered slots.

numpy_eval.py runs programs (a jitted step, a loop's body once per iteration) whose every operation is
a NumPy call of a few microseconds on small arrays, so the interpreter's own work per operation (reading
the environment by variable, building each call's parameters, converting literals) is what they cost.
`program_of` prepares that work once per executable jaxpr: each equation becomes one step, a call with
its inputs' slots, its parameters already complete (the local shapes of those that need them) and its
results' slots and types; literals are made into arrays once; a fused cluster too small for its executor
to do more than call its equations one by one (`min_elements`), or of one equation and not large
(`ONE_EQUATION_MAX`), becomes those equations' steps; a slot is cleared after its last reader, so that
intermediates are freed as early as in the interpreter that keeps no environment. The values are those of running the equations in order: the same implementations on the
same inputs, each result of its equation's type. The steps then run as one generated function (codegen.py: a line
per step, no loop over them; a tiny training step's 163 steps: 0.50 -> 0.40 ms, the best of 200 runs each) from
its second run on; `interpret` walks them instead, as the first run does, and so does a run while a profiler trace
is recorded, each step an event (on the track of the device call it runs in), preparing a program one too.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.core import impl_rules
from ..profiler import recorder
from ..core.jaxpr import Equation, Jaxpr, Literal, Var
from . import codegen, numba_program
from .fusion import DEVICE_KIND, EXECUTORS
from .cpu_executor import constant, prepared_calls, run_unfused, typed

# a cluster of one equation with fewer elements than this runs as that equation's step: fusing one equation saves no
# pass over memory, and the executor's dispatch (about 20 us) costs more than NumPy's call on arrays this small (a
# GRU's gradient sum over (128, 256) inside its scan, 2 busy cores: 26-130 us fused against 4 us for NumPy's add;
# 131072 elements: 42 / 17 us). Larger ones keep the executor, whose threads pay on a machine with idle cores.
ONE_EQUATION_MAX = 1 << 17

# a small cluster of this many operations or more runs as its compiled loop (numba_executor.SmallClusterCall)
SMALL_LOOP_MIN_OPERATIONS = 2

# one step: (call, input slots, parameters, output slots, output types, whether the call gives a list of results)
Step = tuple[Callable[..., Any], tuple[int, ...], dict[str, Any], tuple[int, ...], tuple[np.dtype, ...], bool]


class NumpyProgram:
    """The steps of one executable jaxpr, run by `__call__(consts, args)` -> its outputs' values."""

    def __init__(self, jaxpr: Jaxpr, structured: Mapping[Any, Callable[..., list[Any]]],
                 evaluator: Callable[..., list[Any]]) -> None:
        self._slots: dict[int, int] = {}
        self._template: list[Any] = []
        self.slot_types: dict[int, tuple[tuple[int, ...], np.dtype]] = {}  # each value's (shape, dtype)
        self._consts = tuple(self._slot(v) for v in jaxpr.constvars)
        self._args = tuple(self._slot(v) for v in jaxpr.invars)
        steps: list[Step] = []
        names: list[str] = []  # each step's primitive, for the profiler
        for eq in jaxpr.equations:
            made = self._steps_of(eq, structured, evaluator)
            steps.extend(made)
            names.extend([eq.primitive.name] if len(made) == 1 else [f"fused:{_name(s[0])}" for s in made])
        self._outs = tuple(self._read(x) for x in jaxpr.outvars)
        self._steps = _with_releases(steps, set(self._outs))
        self._names = names
        self._generated: Callable[..., list[Any]] | None = None
        self._whole = numba_program.whole_program(jaxpr, EXECUTORS[DEVICE_KIND].numba.compiler)
        self._walked = 0  # runs so far that walked the steps (codegen.WALKED_RUNS before the code is generated)

    # what codegen.py writes out: the slots of the consts, args and outputs, the constants by slot, the steps
    const_slots = property(lambda self: self._consts)
    arg_slots = property(lambda self: self._args)
    out_slots = property(lambda self: self._outs)
    template = property(lambda self: self._template)
    steps = property(lambda self: self._steps)

    def __call__(self, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        if recorder.on:
            return self._recorded(consts, args)
        if self._whole is not None:
            outputs = self._whole((*consts, *args))
            if outputs is not None:
                return outputs
        if self._generated is None and self._walked < codegen.WALKED_RUNS:
            self._walked += 1
            return self.interpret(consts, args)
        return self.generated()(consts, args)

    def generated(self) -> Callable[..., list[Any]]:
        """The steps as one generated function `(consts, args) -> outputs` (codegen.py), made once."""
        if self._generated is None:
            self._generated = codegen.program_function(self)
        return self._generated

    def interpret(self, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        """`__call__` by walking the steps (the generated function's reference)."""
        values = self._template.copy()
        for slot, value in zip(self._consts, consts):
            values[slot] = value
        for slot, value in zip(self._args, args):
            values[slot] = value
        for call, ins, params, outs, types, multiple, released in self._steps:
            result = call(*[values[i] for i in ins], **params)
            if multiple:
                for slot, dtype, value in zip(outs, types, result):
                    values[slot] = typed(value, dtype)
            else:
                values[outs[0]] = typed(result, types[0])
            for slot in released:
                values[slot] = None
        return [values[i] for i in self._outs]

    def _recorded(self, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        """`__call__`, each step recorded as an event."""
        values = self._template.copy()
        for slot, value in zip((*self._consts, *self._args), (*consts, *args)):
            values[slot] = value
        for name, (call, ins, params, outs, types, multiple, released) in zip(self._names, self._steps):
            begin = recorder.now()
            result = call(*[values[i] for i in ins], **params)
            results = zip(outs, types, result) if multiple else [(outs[0], types[0], result)]
            for slot, dtype, value in results:
                values[slot] = typed(value, dtype)
            recorder.add(name, "program", None, begin, recorder.now())
            for slot in released:
                values[slot] = None
        return [values[i] for i in self._outs]

    def _slot(self, var: Var | None = None, aval: Any = None) -> int:
        """A new slot (for `var`'s value, where given), of `var`'s type (else `aval`'s)."""
        self._template.append(None)
        slot = len(self._template) - 1
        if var is not None:
            self._slots[var.id] = slot
        aval = var.aval if var is not None else aval
        self.slot_types[slot] = (tuple(aval.shape), np.dtype(aval.dtype))
        return slot

    def _constant(self, value: np.ndarray) -> int:
        self._template.append(value)
        self.slot_types[len(self._template) - 1] = (value.shape, value.dtype)
        return len(self._template) - 1

    def _read(self, x: Any) -> int:
        return self._constant(constant(x)) if isinstance(x, Literal) else self._slots[x.id]

    def _steps_of(self, eq: Equation, structured: Mapping[Any, Callable[..., list[Any]]],
                  evaluator: Callable[..., list[Any]]) -> list[Step]:
        ins = tuple(self._read(x) for x in eq.inputs)
        cluster = eq.params.get("cluster") if eq.primitive.name == "fused" else None
        if cluster is not None and math.prod(eq.outputs[0].aval.shape) < max(
                getattr(cluster.executor, "min_elements", 0), ONE_EQUATION_MAX * (len(cluster.jaxpr.equations) == 1)):
            compiled = _small_cluster_call(cluster, [self.slot_types[i] for i in ins], eq.outputs[0].aval)
            if compiled is not None:
                return [(compiled, ins, {}, (self._slot(eq.outputs[0]),), (np.dtype(eq.outputs[0].aval.dtype),),
                         False)]
            calls = prepared_calls(cluster.jaxpr)
            if calls:
                return self._inlined(calls, cluster.jaxpr.equations, ins, eq.outputs[0])
        rule = structured.get(eq.primitive)
        if rule is not None:
            call, params, multiple = functools.partial(rule, evaluator), eq.params, True
        else:
            call, params, multiple = impl_rules[eq.primitive], eq.params, eq.primitive.multiple_results
            if eq.primitive.needs_local_shape:
                params = {**params, "local_shapes": [v.aval.shape for v in eq.outputs]}
        outs = tuple(self._slot(v) for v in eq.outputs)
        return [(call, ins, params, outs, tuple(np.dtype(v.aval.dtype) for v in eq.outputs), multiple)]

    def _inlined(self, calls: list[tuple], equations: Sequence[Equation], ins: tuple[int, ...],
                 output: Var) -> list[Step]:
        """A small cluster's prepared calls (cpu_executor.prepared_calls) as steps, made as its executor makes them
        (each NumPy call on the whole arrays, those that need a local shape given the cluster's), the last one's
        result in `output`'s slot."""
        local = list(ins)  # the cluster's values (its inputs, then its equations' results) -> their slots
        steps: list[Step] = []
        for position, (impl, reads, literals, params, local_shape, dtype) in enumerate(calls):
            eq_ins = tuple(local[i] if i >= 0 else self._constant(literals[-1 - i]) for i in reads)
            if local_shape:
                params = {**params, "local_shapes": [output.aval.shape]}
            local.append(self._slot(output) if position == len(calls) - 1 else
                         self._slot(aval=equations[position].outputs[0].aval))
            steps.append((impl, eq_ins, params, (local[-1],), (dtype,), False))
        return steps


def _small_cluster_call(cluster: Any, in_types: list[tuple[tuple[int, ...], np.dtype]], out: Any) -> Any:
    """For a small cluster with output type `out` (an aval): its compiled loop as one step (numba_executor.SmallClusterCall), where its executor compiles
    loops, numba can express it and it does more than one operation (a loop's call costs about what one NumPy
    call does; each further operation is one NumPy call saved); else None."""
    numba = getattr(cluster.executor, "numba", None)
    operations = sum(e.primitive.name != "broadcast_in_dim" for e in cluster.jaxpr.equations)
    if numba is None or operations < SMALL_LOOP_MIN_OPERATIONS or not out.shape:
        return None
    plan = cluster.kernel().numba
    if plan is None:
        return None
    jaxpr, shape = cluster.jaxpr, tuple(out.shape)
    return numba.small_call(plan, in_types, shape, np.dtype(out.dtype),
                            lambda inputs: run_unfused(jaxpr, inputs, shape))


def _with_releases(steps: list[Step], kept: set[int]) -> list[tuple]:
    """Each step with the slots it reads for the last time (cleared after it), those in `kept` aside."""
    last: dict[int, int] = {}
    for position, step in enumerate(steps):
        for slot in step[1]:
            last[slot] = position
    released: list[list[int]] = [[] for _ in steps]
    for slot, position in last.items():
        if slot not in kept:
            released[position].append(slot)
    return [step + (tuple(gone),) for step, gone in zip(steps, released)]


def program_of(jaxpr: Jaxpr, structured: Mapping[Any, Callable[..., list[Any]]],
               evaluator: Callable[..., list[Any]], attribute: str = "_numpy_program") -> NumpyProgram:
    """The NumpyProgram of executable `jaxpr` (made once, kept on it as `attribute`: one per rule table)."""
    found = getattr(jaxpr, attribute, None)
    if found is None:
        begin = recorder.now() if recorder.on else 0
        found = NumpyProgram(jaxpr, structured, evaluator)
        setattr(jaxpr, attribute, found)
        if begin:
            recorder.add("prepare program", "compile", None, begin, recorder.now(),
                         {"equations": len(jaxpr.equations)})
    return found


def _name(call: Callable[..., Any]) -> str:
    """An implementation's name, for the profiler."""
    return getattr(call, "__name__", None) or type(call).__name__
