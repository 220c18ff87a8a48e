"""Loops on one device as generated Python: a scan or a while loop written out as one function, its body's program
inlined (codegen.py), made once per loop.

Running a loop's body through its program once per iteration costs, besides the body's NumPy calls, the call
itself and the lists of its inputs and outputs (a scan of tanh(c @ w + x) over 1000 rows of (4, 16): 37 -> 24 ms
written out, its gradient 112 -> 71 ms, on 2 busy cores). Here the loop is one function: the carries are local
variables, a scan's rows of the xs are sliced and its ys written into the stacked results made before the loop
(by the call computing one, where it can: codegen.emit's `stores`; a carry that is also a y is then that row, and
a y that is a row of an x is that x), in the same order and with the same
values as running the body's program once per iteration (control_flow.py's rules, which call `scan_function` and
`while_function` and fall back on that where they give None: a loop's first run, a profiler trace being
recorded, an evaluator without programs, a body with constants of its own). A scan whose body is small enough
is compiled whole after some runs (numba_program.scan_program), and runs so from then on.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core.jaxpr import Jaxpr
from ..profiler import recorder
from . import numba_program
from .codegen import WALKED_RUNS, Source, emit, typed_inputs
from .fusion import DEVICE_KIND, EXECUTORS
from .numpy_eval import programs

Loop = Callable[[Sequence[Any]], list[Any]]


def scan_function(run: Callable[..., Any], jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int,
                  reverse: bool) -> Loop | None:
    """The scan of body `jaxpr` run by evaluator `run` as one function `(args) -> carry + stacked ys` (made once
    per loop), or None where it runs otherwise (see the module's docstring)."""
    key = ("scan", run, num_consts, num_carry, length, reverse)
    return _cached(jaxpr, key, lambda make: _scan(make(jaxpr), jaxpr, num_consts, num_carry, length, reverse))


def while_function(run: Callable[..., Any], cond_jaxpr: Jaxpr, body_jaxpr: Jaxpr, cond_nconsts: int,
                   body_nconsts: int) -> Loop | None:
    """The while loop of `cond_jaxpr` and `body_jaxpr` run by evaluator `run` as one function `(args) -> carry`
    (made once per loop), or None where it runs otherwise."""
    key = ("while", run, id(body_jaxpr), cond_nconsts, body_nconsts)  # the body is kept alive by the function
    return _cached(cond_jaxpr, key, lambda make: _while(make(cond_jaxpr), make(body_jaxpr), body_jaxpr, cond_nconsts,
                                                        body_nconsts))


def _cached(jaxpr: Jaxpr, key: tuple, build: Callable[[Callable[[Jaxpr], Any]], Loop | None]) -> Loop | None:
    """The loop function kept on `jaxpr` under `key` (the evaluator its second item), built once the loop has run
    codegen.WALKED_RUNS times without it (None until then)."""
    if recorder.on:
        return None
    loops = getattr(jaxpr, "_numpy_loops", None)
    if loops is None:
        loops = jaxpr._numpy_loops = {}
    found = loops.get(key, 0)
    if type(found) is int:  # the runs so far
        if found < WALKED_RUNS:
            loops[key] = found + 1
            return None
        make = programs.get(key[1])
        found = loops[key] = None if make is None else build(make)
    return found


def _scan(body: Any, jaxpr: Jaxpr, num_consts: int, num_carry: int, length: int, reverse: bool) -> Loop | None:
    if body.const_slots:
        return None
    source = Source()
    n_xs = len(body.arg_slots) - num_consts - num_carry
    consts, carry, xs = ([f"{stem}{k}" for k in range(n)] for stem, n in (("k", num_consts), ("c", num_carry),
                                                                         ("x", n_xs)))
    ys = [v.aval for v in jaxpr.outvars[num_carry:]]
    stacks = [f"y{k}" for k in range(len(ys))]
    outs = body.out_slots
    x_of_slot = dict(zip(body.arg_slots[num_consts + num_carry:], xs))
    if consts + carry + xs:
        source.lines.append(f"{', '.join(consts + carry + xs)}, = args")
        typed_inputs(source, body, consts + carry + xs)  # the xs' rows then too
    for name, aval, slot in zip(stacks, ys, outs[num_carry:]):
        if slot in x_of_slot:  # a y that is a row of an x (a residual the gradient reads): that x, C-ordered
            source.lines.append(f"{name} = {source.bind(np.ascontiguousarray)}({x_of_slot[slot]})")
        else:
            stacked = (length, *(int(d) for d in aval.shape))
            source.lines.append(f"{name} = empty({stacked!r}, {source.bind(np.dtype(aval.dtype))})")
    source.lines.append(f"for i in range({length - 1}, -1, -1):" if reverse else f"for i in range({length}):")
    rows = [f"r{k}" for k in range(n_xs)]
    for row, x, var in zip(rows, xs, jaxpr.invars[num_consts + num_carry:]):
        # a row of a 1-d x is a NumPy scalar: as an array, as the body's program is given it
        source.lines.append(f"    {row} = {x}[i]" if var.aval.ndim else f"    {row} = asarray({x}[i])")
    # a value that is one y only is computed into its row; where it is a carry too, the carry is that row
    once = [slot for slot in outs[num_carry:] if outs[num_carry:].count(slot) == 1]
    stores = {slot: f"{name}[i]" for slot, name in zip(outs[num_carry:], stacks) if slot in once}
    outputs = emit(source, body, consts + carry + rows, indent="    ", inputs_typed=True, stores=stores)
    source.lines.extend(f"    {name}[i] = {value}" for name, value, slot in zip(stacks, outputs[num_carry:],
                                                                                  outs[num_carry:])
                        if value is not None and slot not in x_of_slot)
    # after the ys: a y may be a carry's old value (a stored value is the local `v{slot}`, see `emit`)
    _assign(source, carry, [value or f"v{slot}" for slot, value in zip(outs, outputs[:num_carry])])
    # a carry computed into a y's row is copied once at the end: no result is a view of another
    source.lines.extend(f"{name} = {name}.copy()" for name, value in zip(carry, outputs[:num_carry]) if value is None)
    source.lines.append(f"return [{', '.join(carry + stacks)}]")
    function = source.function("scan", "args")
    compiled = numba_program.scan_program(jaxpr, num_consts, num_carry, length, reverse,
                                          EXECUTORS[DEVICE_KIND].numba.compiler)
    if compiled is None:
        return function

    def scan(args: Sequence[Any]) -> list[Any]:  # the compiled loop once in use (numba_program.py), else Python's
        outputs = compiled(args)
        return function(args) if outputs is None else outputs
    scan.source = function.source  # the generated Python's, as a loop function shows it
    return scan


def _while(cond: Any, body: Any, body_jaxpr: Jaxpr, cond_nconsts: int, body_nconsts: int) -> Loop | None:
    if cond.const_slots or body.const_slots:
        return None
    source = Source()
    cond_consts, body_consts = [f"k{k}" for k in range(cond_nconsts)], [f"b{k}" for k in range(body_nconsts)]
    carry = [f"c{k}" for k in range(len(body_jaxpr.invars) - body_nconsts)]
    if cond_consts + body_consts + carry:
        source.lines.append(f"{', '.join(cond_consts + body_consts + carry)}, = args")
        typed_inputs(source, cond, cond_consts + carry)
        typed_inputs(source, body, body_consts)
    source.lines.append("while True:")
    (go,) = emit(source, cond, cond_consts + carry, indent="    ", prefix="u", inputs_typed=True)
    source.lines.append(f"    if not bool({go}):")
    source.lines.append("        break")
    _assign(source, carry, emit(source, body, body_consts + carry, indent="    ", inputs_typed=True))
    source.lines.append(f"return [{', '.join(carry)}]")
    function = source.function("while_loop", "args")
    function.body_jaxpr = body_jaxpr  # its id is part of the function's key: no other jaxpr may take it
    return function


def _assign(source: Source, names: Sequence[str], values: Sequence[str]) -> None:
    """One line (in the loop) giving each carry its new value, all at once."""
    if names:
        source.lines.append(f"    {', '.join(names)}, = {', '.join(values)},")
