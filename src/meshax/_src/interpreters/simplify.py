"""Simplification of a jaxpr before it runs: no work whose result nobody reads, nothing computed twice.

Six rewrites, all exact (the simplified program's values are bit for bit the original's, but for the
sign of a zero sum and the transposed product's rounding on some BLAS kernels, below):
- scalar constants are folded: an operation on literals only, with a scalar result, becomes a literal
  (computed once, by the same implementation);
- identities are dropped: a conversion to the same type, a broadcast or reshape to the same shape,
  x * 1, x / 1, x - 0, x + (-0.0), integer x + 0, -(-x), select(p, x, x), one broadcast of another;
- common subexpressions: an equation that repeats an earlier one (same primitive, inputs and
  parameters) reuses its outputs;
- a sum with a scatter-add into zeros becomes a scatter-add onto the other summand (below; equal but for the
  sign of a zero);
- the rewrites higher layers install (`rewrites`: a convolution's input gradient as one primitive, windows.py; a
  loop's running sums of per-step products as one product after it, and its products of rows and weights as
  one product before it, lax/scan_hoist.py);
- a transposed product, transpose(dot_general(a, b)) with the product read nowhere else and the
  transpose swapping its two groups of free dimensions, becomes dot_general(b, a): the result comes
  out in the order it is read in (a weight's gradient is a row-major matrix, as the weight it updates,
  not a column-major view; BLAS computes C^T = B^T A^T with the same sums, in the same order with
  OpenBLAS's SkylakeX kernels, in another with its Haswell ones: there the last bits may differ);
then dead code (equations none of whose outputs is used) is eliminated. Only primitives with a plain
NumPy implementation and no side effect are touched; calls, loops, collectives and callbacks stay.
The printed program (make_jaxpr) is never simplified: this runs on the copy that executes.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.core import ShapedArray, impl_rules
from ..core.jaxpr import Equation, Jaxpr, Literal, Var

# primitives whose equations must run even when their results are unused, or run once per occurrence
_EFFECTFUL = frozenset({"pure_callback", "debug_callback", "io_callback", "sharding_constraint"})
# elementwise primitives whose scalar instances are folded into literals
_FOLDABLE = frozenset({
    "add", "sub", "mul", "div", "neg", "max", "min", "abs", "sign", "square", "reciprocal", "sqrt", "exp", "log",
    "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "not", "select", "convert_element_type", "add_any",
    "floor", "ceil", "round", "pow", "rem", "floor_divide", "integer_pow",
})


# rewrites that higher layers install, by the name of the primitive whose equation they may replace:
# (equation, the equation computing each variable by id, how often each variable is read) -> its replacement (the
# same outputs, the same values: one equation, or a list of equations in order) or None; what the replacement no longer reads is left for dead-code elimination
rewrites: dict[str, Callable[[Equation, dict[int, Equation], dict[int, int]], Equation | list[Equation] | None]] = {}


def pure(eq: Equation) -> bool:
    """Whether `eq` is a plain computation: a NumPy implementation and no side effect."""
    return eq.primitive in impl_rules and eq.primitive.name not in _EFFECTFUL


def simplify(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with constants folded, identities dropped, repeated and unused equations removed."""
    replaced: dict[int, Any] = {}  # var id -> the Var or Literal that stands for it now
    seen: dict[Any, list[Var]] = {}  # CSE: key of an equation -> its outputs
    kept: list[Equation] = []
    producers: dict[int, Equation] = {}  # var id -> the kept equation that computes it

    def current(x: Any) -> Any:
        return replaced.get(x.id, x) if isinstance(x, Var) else x

    for eq in jaxpr.equations:
        eq = Equation(eq.primitive, [current(x) for x in eq.inputs], eq.outputs, eq.params)
        if pure(eq) and not eq.primitive.multiple_results:
            same = _folded(eq) or _identity(eq) or _undone(eq, producers)
            if same is not None:
                replaced[eq.outputs[0].id] = same
                continue
            eq = _one_broadcast(eq, producers)
        key = _cse_key(eq)
        if key is not None:
            if key in seen:
                for var, earlier in zip(eq.outputs, seen[key]):
                    replaced[var.id] = earlier
                continue
            seen[key] = eq.outputs
        kept.append(eq)
        producers.update((v.id, eq) for v in eq.outputs)
    outvars = [current(v) for v in jaxpr.outvars]
    kept = _untransposed_products(kept, outvars)
    zeros = {eq.outputs[0].id for eq in kept if eq.primitive.name == "broadcast_in_dim" and
             isinstance(eq.inputs[0], Literal) and not np.any(_literal_value(eq.inputs[0]))}
    kept = _scatters_onto_sums(kept, outvars, zeros) if zeros else kept
    if any(eq.primitive.name in rewrites for eq in kept):
        kept = _installed_rewrites(kept, outvars)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, _without_dead_code(kept, outvars), outvars, jaxpr.consts)


def _untransposed_products(equations: list[Equation], outvars: list[Any]) -> list[Equation]:
    """Each transpose of a product used only by it, swapping the product's free dimensions of its left operand
    with those of its right one, replaced by the product of the swapped operands (the old product is left
    for dead-code elimination)."""
    uses = read_counts(equations, outvars)
    producers = {eq.outputs[0].id: eq for eq in equations if eq.primitive.name == "dot_general"}
    result = []
    for eq in equations:
        product = producers.get(eq.inputs[0].id) if eq.primitive.name == "transpose" and \
            isinstance(eq.inputs[0], Var) else None
        if product is not None and uses.get(product.outputs[0].id) == 1:
            swapped = _swapped_product(product, eq)
            if swapped is not None:
                eq = swapped
        result.append(eq)
    return result


def read_counts(equations: list[Equation], outvars: list[Any]) -> dict[int, int]:
    """How many times each variable is read (by the equations, and as an output)."""
    uses: dict[int, int] = {}
    for x in [x for eq in equations for x in eq.inputs] + list(outvars):
        if isinstance(x, Var):
            uses[x.id] = uses.get(x.id, 0) + 1
    return uses


def _scatters_onto_sums(equations: list[Equation], outvars: list[Any], zeros: set[int]) -> list[Equation]:
    """Each sum add_any(a, s) of a scatter-add s = scatter(z, y) into zeros `z` (a broadcast zero: `zeros`), s read
    nowhere else, replaced by the scatter-add of y onto a: the updates land on a directly (a slice's gradient
    summed into others', as a convolution's input gradient is: one pass over the region, not a zero-filled copy
    and a sum of two whole arrays). Equal but for the sign of a zero: (-0.0) + 0 is +0.0."""
    uses = read_counts(equations, outvars)
    producers = {eq.outputs[0].id: eq for eq in equations if eq.primitive.name == "scatter"}
    result = []
    for eq in equations:
        if eq.primitive.name == "add_any" and len(eq.inputs) == 2:
            for k in (1, 0):
                s, a = eq.inputs[k], eq.inputs[1 - k]
                scatter = producers.get(s.id) if isinstance(s, Var) else None
                if scatter is not None and scatter.params.get("mode") == "add" and uses.get(s.id) == 1 and \
                        isinstance(scatter.inputs[0], Var) and scatter.inputs[0].id in zeros and \
                        isinstance(a, Var) and a.aval.shape == s.aval.shape and a.aval.dtype == s.aval.dtype:
                    eq = Equation(scatter.primitive, [a, *scatter.inputs[1:]], eq.outputs, scatter.params)
                    break
        result.append(eq)
    return result


def _installed_rewrites(equations: list[Equation], outvars: list[Any]) -> list[Equation]:
    """Each equation that a rewrite of `rewrites` replaces, replaced."""
    uses = read_counts(equations, outvars)
    producers = {v.id: eq for eq in equations for v in eq.outputs}
    result: list[Equation] = []
    for eq in equations:
        rewrite = rewrites.get(eq.primitive.name)
        replacement = rewrite(eq, producers, uses) if rewrite is not None else None
        if replacement is None:
            made = [eq]
        elif isinstance(replacement, Equation):
            made = [replacement]
        else:  # several equations giving its outputs
            made = replacement
        result.extend(made)
        producers.update((v.id, e) for e in made for v in e.outputs)  # what later rewrites see computed
    return result


def _swapped_product(product: Equation, transpose: Equation) -> Equation | None:
    """dot_general(rhs, lhs) giving `transpose`'s output, if `transpose` only swaps `product`'s free
    dimensions (no batch dimensions, no out_sharding)."""
    (lc, rc), (lb, rb) = product.params["dimension_numbers"]
    if lb or rb or product.params.get("out_sharding") is not None:
        return None
    lhs, rhs = product.inputs
    left_free = lhs.aval.ndim - len(lc)
    right_free = rhs.aval.ndim - len(rc)
    swap = tuple(range(left_free, left_free + right_free)) + tuple(range(left_free))
    if tuple(transpose.params["permutation"]) != swap or swap == tuple(range(len(swap))):
        return None
    params = dict(product.params, dimension_numbers=((tuple(rc), tuple(lc)), ((), ())))
    return Equation(product.primitive, [rhs, lhs], transpose.outputs, params)


def _without_dead_code(equations: list[Equation], outvars: list[Any]) -> list[Equation]:
    live = {v.id for v in outvars if isinstance(v, Var)}
    kept = []
    for eq in reversed(equations):
        if pure(eq) and eq.outputs and not any(v.id in live for v in eq.outputs):
            continue
        live.update(x.id for x in eq.inputs if isinstance(x, Var))
        kept.append(eq)
    return kept[::-1]


def _literal_value(x: Literal) -> np.ndarray:
    return np.asarray(x.value, dtype=x.aval.dtype)


def _folded(eq: Equation) -> Literal | None:
    """A literal for a scalar operation on literals."""
    out = eq.outputs[0].aval
    if eq.primitive.name not in _FOLDABLE or out.shape != () or not all(isinstance(x, Literal) for x in eq.inputs):
        return None
    with np.errstate(all="ignore"):
        value = np.asarray(impl_rules[eq.primitive](*[_literal_value(x) for x in eq.inputs], **eq.params))
    value = value.astype(out.dtype) if value.dtype != out.dtype else value
    # a weak-typed literal is held as a Python scalar (as staging holds one), a strong one as a NumPy scalar
    return Literal(value.item() if out.weak_type else value[()], out)


def _is_constant(x: Any, number: float) -> bool:
    if not isinstance(x, Literal):
        return False
    value = _literal_value(x)
    return bool(value == number) and (number != 0 or value.dtype.kind not in "fc" or not np.signbit(value.real))


def _is_negative_zero(x: Any) -> bool:
    if not isinstance(x, Literal):
        return False
    value = _literal_value(x)
    return value.dtype.kind == "f" and bool(value == 0) and bool(np.signbit(value))


def _identity(eq: Equation) -> Any:
    """The input that `eq` merely passes on (same type and shape as its output), or None."""
    name, inputs, out = eq.primitive.name, eq.inputs, eq.outputs[0].aval

    def passes(x: Any) -> bool:
        return isinstance(x, Var) and _same_type(x.aval, out)

    if name in ("convert_element_type", "reshape", "broadcast_in_dim", "stop_gradient") and passes(inputs[0]):
        return inputs[0]
    if name == "mul":
        for a, b in ((inputs[0], inputs[1]), (inputs[1], inputs[0])):
            if passes(a) and _is_constant(b, 1):
                return a
    if name == "div" and passes(inputs[0]) and _is_constant(inputs[1], 1):
        return inputs[0]
    if name == "sub" and passes(inputs[0]) and _is_constant(inputs[1], 0):
        return inputs[0]  # x - 0 is x, -0.0 included
    if name in ("add", "add_any"):
        for a, b in ((inputs[0], inputs[1]), (inputs[1], inputs[0])):
            # x + (-0.0) is x for every float x; x + 0 only for integers (-0.0 + 0.0 is 0.0)
            if passes(a) and (_is_negative_zero(b) or (out.dtype.kind in "iu" and _is_constant(b, 0))):
                return a
    if name == "select" and isinstance(inputs[1], Var) and inputs[1] is inputs[2] and passes(inputs[1]):
        return inputs[1]
    return None


def _undone(eq: Equation, producers: dict[int, Equation]) -> Any:
    """x for -(-x)."""
    if eq.primitive.name != "neg" or not isinstance(eq.inputs[0], Var):
        return None
    inner = producers.get(eq.inputs[0].id)
    if inner is not None and inner.primitive.name == "neg" and isinstance(inner.inputs[0], Var) and \
            _same_type(inner.inputs[0].aval, eq.outputs[0].aval):
        return inner.inputs[0]
    return None


def _one_broadcast(eq: Equation, producers: dict[int, Equation]) -> Equation:
    """A broadcast of a broadcast as one broadcast of the original (the intermediate is never made)."""
    if eq.primitive.name != "broadcast_in_dim" or not isinstance(eq.inputs[0], Var):
        return eq
    inner = producers.get(eq.inputs[0].id)
    if inner is None or inner.primitive is not eq.primitive:
        return eq
    dims = tuple(eq.params["broadcast_dimensions"][d] for d in inner.params["broadcast_dimensions"])
    return Equation(eq.primitive, [inner.inputs[0]], eq.outputs, dict(eq.params, broadcast_dimensions=dims))


def _same_type(a: ShapedArray, b: ShapedArray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.weak_type == b.weak_type


def _cse_key(eq: Equation) -> Any:
    """What identifies `eq`'s computation (None: never merged)."""
    if not pure(eq) or not eq.outputs:
        return None
    inputs = tuple(("v", x.id) if isinstance(x, Var) else
                   ("l", x.aval.dtype.str, x.aval.weak_type, _literal_value(x).tobytes()) for x in eq.inputs)
    try:
        params = tuple(sorted(eq.params.items()))
        key = (eq.primitive, inputs, params, tuple((v.aval.shape, v.aval.dtype, v.aval.weak_type) for v in eq.outputs))
        hash(key)
    except TypeError:  # unhashable parameters (arrays): not merged
        return None
    return key
