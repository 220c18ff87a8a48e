"""Slices' gradients joined: scatter-adds of slices onto zeros that together tile the array along one axis
become one concatenate of their updates.

The gradient of `x[:, :h]` and `x[:, h:]` both read (a GRU's gates) is two scatter-adds into a zero-filled
array (simplify.py chains them: the second onto the first): a zero fill and two passes, where the updates
alone, side by side, are the value. Installed as a rewrite of simplify.py; equal but for the sign of a zero
(0.0 + -0.0 is 0.0, the concatenate keeps -0.0).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.jaxpr import Equation, Literal, Var
from ..interpreters import simplify
from . import array_primitives as P


def _as_concatenate(eq: Equation, producers: dict[int, Equation], uses: dict[int, int]) -> Equation | None:
    """One concatenate for a chain of scatter-adds of slices ending at `eq`, each read only by the next, the first
    onto a broadcast zero, whose regions tile the result along one axis; None for any other equation."""
    pieces: list[tuple[tuple[Any, ...], Any]] = []  # (index, update) of each scatter, the last first
    current = eq
    while True:
        if current.primitive.name != "scatter" or current.params.get("mode") != "add" or len(current.inputs) != 2:
            return None
        pieces.append((current.params["index"], current.inputs[1]))
        operand = current.inputs[0]
        below = producers.get(operand.id) if isinstance(operand, Var) else None
        if below is None:
            return None
        if below.primitive.name == "broadcast_in_dim":
            if not _is_zero(below.inputs[0]):
                return None
            break
        if uses.get(operand.id) != 1:
            return None
        current = below
    return _joined(pieces, eq)


def _is_zero(x: Any) -> bool:
    return isinstance(x, Literal) and not np.any(np.asarray(x.value))


def _joined(pieces: list[tuple[tuple[Any, ...], Any]], eq: Equation) -> Equation | None:
    """The concatenate of the updates when their regions (slices of step 1) tile `eq`'s output along one axis."""
    out = eq.outputs[0].aval
    if len(pieces) < 2:
        return None
    axes = set()
    ranges = []
    for index, update in pieces:
        if len(index) != out.ndim or not all(isinstance(e, slice) and e.step == 1 for e in index):
            return None
        region = tuple(e.stop - e.start for e in index)
        if not isinstance(update, Var) or update.aval.shape != region or update.aval.dtype != out.dtype:
            return None
        partial = [axis for axis, e in enumerate(index) if (e.start, e.stop) != (0, out.shape[axis])]
        if len(partial) != 1:
            return None
        axes.add(partial[0])
        ranges.append((index[partial[0]].start, index[partial[0]].stop, update))
    if len(axes) != 1:
        return None
    ranges.sort(key=lambda r: r[0])
    (axis,) = axes
    ends = [0] + [stop for _, stop, _ in ranges]
    if [start for start, _, _ in ranges] != ends[:-1] or ends[-1] != out.shape[axis]:
        return None
    return Equation(P.concatenate, [update for _, _, update in ranges], eq.outputs, {"axis": axis})


simplify.rewrites["scatter"] = _as_concatenate
