"""A NumpyProgram as generated Python: one function whose body is one line per step, made once per program.

Walking a program's steps costs a few hundred nanoseconds per NumPy call (reading and writing the slots, the
argument lists, the result's type check), about what a NumPy call on a small array costs itself. The function
made here does the same calls in the same order on the same values, written out: each step is one line calling
its implementation (bound as a global, its parameters too), its inputs and result are local variables, and an
intermediate is deleted after its last reader. Some work is left out where it cannot change a value:
- an elementwise NumPy function whose operands all have the result's type (`impl.into`, the contract
  cpu_executor.run_unfused writes through), or the ufunc an implementation is (`impl.ufunc`) where NumPy gives
  the result's type for the operands' types (a comparison), is called directly, and its result is not checked
  for its type (NumPy gives it that type, as an array where it has dimensions), once its operands are known to
  be arrays of their types (the program's inputs, which its callers give so, results of earlier steps, literals);
- such a call writes into the buffer of an operand it reads for the last time (NumPy computes each element
  from the operands' elements at that position, so it may overwrite them) when that operand is an array this
  function made with a call of the same kind, of the result's shape and type, and read only by such calls
  (so no view of it exists);
- such a call whose result is a scan's y (and no other output) writes it straight into its row of the stacked
  result (`stores`), not into a buffer copied there afterwards; so does any implementation marked `writes_out`
  (`call(*args, out=buffer)` leaves its value in `buffer`: a small cluster's compiled loop, a transcendental);
- the result of an implementation marked `exact_result` (an array of the step's type) is not checked;
- an implementation with a `specialize(params, input types)` giving a call for these types (a product of two
  matrices: cpu_kernels.py) is that call, with the inputs alone, and its result is of its type;
- likewise a scatter (an implementation marked `overwrites_operand`) updates its operand in place instead of
  a copy of it, when that operand is such a fresh array read for the last time, by no call that keeps a view
  (a slice's gradient summed into others' is a chain of scatter-adds onto one buffer).
codegen_loops.py writes whole loops (scan, while) the same way, their bodies inlined.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from .cpu_executor import typed

# a slot's static type: (shape, dtype), None where not known
SlotType = tuple[tuple[int, ...], np.dtype] | None
# runs of a program (or loop) that walk its steps before its code is generated: a program run once (an
# initializer, a first call that also traces and compiles) does not pay for it (measured on 2 busy cores:
# writing out and compiling a tiny training step's 266 lines took 24 ms, a GPT step's 1188 lines 238 ms,
# against 0.5 ms and ~0.5 s for walking them once)
WALKED_RUNS = 1


class Source:
    """The lines of one generated function and the globals they read."""

    def __init__(self) -> None:
        self.globals: dict[str, Any] = {"typed": typed, "asarray": np.asarray, "empty": np.empty}
        self.lines: list[str] = []
        self._names: dict[int, str] = {}

    def bind(self, value: Any) -> str:
        """The name of a global holding `value` (one per object)."""
        name = self._names.get(id(value))
        if name is None:
            name = self._names[id(value)] = f"g{len(self.globals)}"
            self.globals[name] = value
        return name

    def function(self, name: str, arguments: str) -> Callable[..., Any]:
        """The lines made into a function `name(arguments)`."""
        text = f"def {name}({arguments}):\n" + "".join(f"    {line}\n" for line in self.lines)
        namespace = dict(self.globals)
        exec(compile(text, f"<meshax {name}>", "exec"), namespace)  # noqa: S102 - our own generated source
        made = namespace[name]
        made.source = text
        return made


def _direct(call: Any, ins: Sequence[int], types: dict[int, SlotType], out: SlotType) -> Any:
    """The NumPy function a step may call directly (see the module's docstring), or None."""
    into = getattr(call, "into", None)
    function = into or getattr(call, "ufunc", None)
    if function is None or out is None or not out[0] or not isinstance(function, np.ufunc) or \
            function.nin != len(ins) or function.nout != 1 or any(types.get(i) is None for i in ins):
        return None
    dtypes = tuple(types[i][1] for i in ins)
    if into is not None and all(dtype == out[1] for dtype in dtypes):
        return function
    return function if _result_type(function, dtypes) == out[1] else None


@functools.lru_cache(maxsize=1024)
def _result_type(function: np.ufunc, dtypes: tuple[np.dtype, ...]) -> np.dtype | None:
    """The type of `function`'s result on arrays of `dtypes` (None where it takes no such arrays)."""
    try:
        with np.errstate(all="ignore"):
            return np.asarray(function(*[np.zeros(1, dtype) for dtype in dtypes])).dtype
    except (TypeError, ValueError):
        return None


def emit(source: Source, program: Any, inputs: Sequence[str], indent: str = "", prefix: str = "v",
         inputs_typed: bool = False, stores: dict[int, str] | None = None) -> list[str | None]:
    """Lines (added to `source`, indented by `indent`) computing `program`'s steps, its consts and args being the
    local variables `inputs` (arrays of their types where `inputs_typed`: see `typed_inputs`); returns the
    expressions of its outputs. Its intermediates are the locals `{prefix}{slot}`. `stores` names, for output
    slots, an array of the result's shape and type to leave the value in (a scan's row of a stacked y): a direct
    call computing one writes it there (its expression is then None, nothing is left for the caller to store;
    the local names that row)."""
    types: dict[int, SlotType] = program.slot_types
    names: dict[int, str] = dict(zip((*program.const_slots, *program.arg_slots), inputs))
    for slot, value in enumerate(program.template):
        if value is not None:
            names[slot] = source.bind(value)
    made: set[int] = set()  # slots of the steps' results (locals of this function)
    known = {slot for slot, value in enumerate(program.template) if value is not None}  # arrays of their types
    if inputs_typed:
        known.update((*program.const_slots, *program.arg_slots))
    directs = [_direct(step[0], step[1], types, types.get(step[3][0]) if not step[5] else None)
               for step in program.steps]
    only_direct = _read_only_by(program.steps, directs)
    no_views = _read_only_by(program.steps, [d or getattr(step[0], "overwrites_operand", None)
                                             for step, d in zip(program.steps, directs)])
    fresh: set[int] = set()  # slots holding a buffer made here with no view of it anywhere
    stored: set[int] = set()  # output slots written into their destination in `stores`
    read = {slot for step in program.steps for slot in step[1]} | set(program.out_slots)
    for step, direct in zip(program.steps, directs):
        call, ins, params, outs, dtypes, multiple, released = step
        special_for = None if multiple else getattr(call, "specialize", None)
        args = ", ".join(names[i] for i in ins)
        for slot in outs:
            names[slot] = f"{prefix}{slot}"
        if direct is not None and stores and outs[0] in stores:  # a view of the destination: never overwritten
            source.lines.append(f"{indent}{names[outs[0]]} = {source.bind(direct)}({args}, out={stores[outs[0]]})")
            stored.add(outs[0])
        elif direct is not None:
            out = outs[0]
            into = next((i for i in released if i in fresh and i in only_direct and types[i] == types[out]), None)
            call_text = f"{source.bind(direct)}({args}{', out=' + names[into] if into is not None else ''})"
            exact = all(i in known for i in ins)
            source.lines.append(f"{indent}{names[out]} = " +
                                (call_text if exact else f"typed({call_text}, {source.bind(dtypes[0])})"))
            fresh.add(out)
        elif special_for is not None and (special := special_for(params, [types.get(i) for i in ins])) is not None:
            source.lines.append(f"{indent}{names[outs[0]]} = {source.bind(special)}({args})")  # of its type
        elif not multiple and stores and outs[0] in stores and getattr(call, "writes_out", False):
            source.lines.append(f"{indent}{names[outs[0]]} = {source.bind(call)}({_arguments(source, args, params)}, "
                                f"out={stores[outs[0]]})")
            stored.add(outs[0])
        else:
            if getattr(call, "overwrites_operand", False):  # its result is a buffer of its own, or its operand's
                if ins[0] in released and ins[0] in fresh and ins[0] in no_views and ins[0] not in ins[1:] \
                        and types.get(ins[0]) == types.get(outs[0]):
                    params = {**params, "overwrite": True}
                fresh.add(outs[0])
            call_text = f"{source.bind(call)}({_arguments(source, args, params)})"
            if multiple:
                source.lines.append(f"{indent}{', '.join(names[s] for s in outs)}{',' if len(outs) == 1 else ''}"
                                    f" = {call_text}")
                source.lines.extend(f"{indent}{names[s]} = typed({names[s]}, {source.bind(t)})"
                                    for s, t in zip(outs, dtypes))
            elif getattr(call, "exact_result", False):
                source.lines.append(f"{indent}{names[outs[0]]} = {call_text}")
            else:
                source.lines.append(f"{indent}{names[outs[0]]} = typed({call_text}, {source.bind(dtypes[0])})")
        known.update(outs)
        made.update(outs)
        gone = [names[i] for i in (*released, *outs) if i in made and (i in released or i not in read)]
        if gone:
            source.lines.append(f"{indent}del {', '.join(gone)}")
        fresh.difference_update(released)
    return [None if slot in stored else names[slot] for slot in program.out_slots]


def _arguments(source: Source, args: str, params: dict[str, Any]) -> str:
    """A call's argument text: its inputs (`args`, joined), then its parameters as a bound dict, where it has any."""
    return ", ".join([args] * bool(args) + [f"**{source.bind(params)}"] * bool(params))


def typed_inputs(source: Source, program: Any, inputs: Sequence[str]) -> None:
    """Lines making each of `program`'s inputs (the locals `inputs`) an array of its type, as `emit` may then take
    them (`inputs_typed`): a loop does it once, not in each iteration at each use."""
    for name, slot in zip(inputs, (*program.const_slots, *program.arg_slots)):
        source.lines.append(f"{name} = typed({name}, {source.bind(program.slot_types[slot][1])})")


def _read_only_by(steps: Sequence[tuple], directs: Sequence[Any]) -> set[int]:
    """The slots every reader of which is a direct call."""
    readers_ok: dict[int, bool] = {}
    for step, direct in zip(steps, directs):
        for slot in step[1]:
            readers_ok[slot] = readers_ok.get(slot, True) and direct is not None
    return {slot for slot, ok in readers_ok.items() if ok}


def program_function(program: Any) -> Callable[[Sequence[Any], Sequence[Any]], list[Any]]:
    """`program` as one generated function `(consts, args) -> outputs`."""
    source = Source()
    consts = [f"c{k}" for k in range(len(program.const_slots))]
    args = [f"a{k}" for k in range(len(program.arg_slots))]
    for names, sequence in ((consts, "consts"), (args, "args")):
        if names:
            source.lines.append(f"{', '.join(names)}{',' if len(names) == 1 else ''} = {sequence}")
    # its callers give arrays of the slots' types (numpy_eval.host, the results of other programs' steps)
    outputs = emit(source, program, consts + args, inputs_typed=True)
    source.lines.append(f"return [{', '.join(outputs)}]")
    return source.function("program", "consts, args")
