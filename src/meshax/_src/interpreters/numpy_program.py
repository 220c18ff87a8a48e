"""A jaxpr made ready to run on one device's NumPy values many times: a flat list of calls over numbered slots.

numpy_eval.py runs programs (a jitted step, a loop's body once per iteration) whose every operation is
a NumPy call of a few microseconds on small arrays, so the interpreter's own work per operation (reading
the environment by variable, building each call's parameters, converting literals) is what they cost.
`program_of` prepares that work once per executable jaxpr: each equation becomes one step, a call with
its inputs' slots, its parameters already complete (the local shapes of those that need them) and its
results' slots and types; literals are made into arrays once; a fused cluster too small for its executor
to do more than call its equations one by one (`min_elements`) becomes those equations' steps; a slot is
cleared after its last reader, so that intermediates are freed as early as in the interpreter that keeps
no environment. The values are those of running the equations in order: the same implementations on the
same inputs, each result of its equation's type. While a profiler trace is recorded, each step is an event (on the
track of the device call it runs in), and preparing a program one too.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..core.core import impl_rules
from ..profiler import recorder
from ..core.jaxpr import Equation, Jaxpr, Literal, Var
from .cpu_executor import constant, prepared_calls, typed

# one step: (call, input slots, parameters, output slots, output types, whether the call gives a list of results)
Step = tuple[Callable[..., Any], tuple[int, ...], dict[str, Any], tuple[int, ...], tuple[np.dtype, ...], bool]


class NumpyProgram:
    """The steps of one executable jaxpr, run by `__call__(consts, args)` -> its outputs' values."""

    def __init__(self, jaxpr: Jaxpr, structured: Mapping[Any, Callable[..., list[Any]]],
                 evaluator: Callable[..., list[Any]]) -> None:
        self._slots: dict[int, int] = {}
        self._template: list[Any] = []
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

    def __call__(self, consts: Sequence[Any], args: Sequence[Any]) -> list[Any]:
        if recorder.on:
            return self._recorded(consts, args)
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

    def _slot(self, var: Var | None = None) -> int:
        """A new slot (for `var`'s value, where given)."""
        self._template.append(None)
        if var is not None:
            self._slots[var.id] = len(self._template) - 1
        return len(self._template) - 1

    def _constant(self, value: np.ndarray) -> int:
        self._template.append(value)
        return len(self._template) - 1

    def _read(self, x: Any) -> int:
        return self._constant(constant(x)) if isinstance(x, Literal) else self._slots[x.id]

    def _steps_of(self, eq: Equation, structured: Mapping[Any, Callable[..., list[Any]]],
                  evaluator: Callable[..., list[Any]]) -> list[Step]:
        ins = tuple(self._read(x) for x in eq.inputs)
        cluster = eq.params.get("cluster") if eq.primitive.name == "fused" else None
        if cluster is not None and math.prod(eq.outputs[0].aval.shape) < getattr(cluster.executor, "min_elements", 0):
            calls = prepared_calls(cluster.jaxpr)
            if calls:
                return self._inlined(calls, ins, eq.outputs[0])
        rule = structured.get(eq.primitive)
        if rule is not None:
            call, params, multiple = functools.partial(rule, evaluator), eq.params, True
        else:
            call, params, multiple = impl_rules[eq.primitive], eq.params, eq.primitive.multiple_results
            if eq.primitive.needs_local_shape:
                params = {**params, "local_shapes": [v.aval.shape for v in eq.outputs]}
        outs = tuple(self._slot(v) for v in eq.outputs)
        return [(call, ins, params, outs, tuple(np.dtype(v.aval.dtype) for v in eq.outputs), multiple)]

    def _inlined(self, calls: list[tuple], ins: tuple[int, ...], output: Var) -> list[Step]:
        """A small cluster's prepared calls (cpu_executor.prepared_calls) as steps, made as its executor makes them
        (each NumPy call on the whole arrays, those that need a local shape given the cluster's), the last one's
        result in `output`'s slot."""
        local = list(ins)  # the cluster's values (its inputs, then its equations' results) -> their slots
        steps: list[Step] = []
        for position, (impl, reads, literals, params, local_shape, dtype) in enumerate(calls):
            eq_ins = tuple(local[i] if i >= 0 else self._constant(literals[-1 - i]) for i in reads)
            if local_shape:
                params = {**params, "local_shapes": [output.aval.shape]}
            local.append(self._slot(output if position == len(calls) - 1 else None))
            steps.append((impl, eq_ins, params, (local[-1],), (dtype,), False))
        return steps


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
