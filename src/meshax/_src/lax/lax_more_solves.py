"""custom_linear_solve and custom_root: solvers whose derivatives come from implicit differentiation at the
solution (as JAX's), not from differentiating through the solver's own steps.

Each is a primitive holding its traced functions as closure-converted jaxprs; eagerly, under jit and under vmap it
runs its `solve` jaxpr in place. custom_linear_solve's tangent is one more linear solve (of `b`'s tangent less the
matvec's tangent at the solution), and its transpose is the transposed solve (vecmat, transpose_solve), so reverse
mode needs `transpose_solve` (or `symmetric=True`) as in JAX. custom_root's tangent is -tangent_solve(g, rhs), with
g the derivative of f in x at the root and rhs that of f in its captured values."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..core.core import Primitive, abstract_eval_rules, aval_of, keeps_own_vma, vma_rules
from ..core.jaxpr import Jaxpr, eval_jaxpr
from ..interpreters.ad import Zero, instantiate, jvp_flat, jvp_rules, linearize_flat, tangent_aval, transpose_rules
from ..interpreters.batching import batch_flat, batching_rules
from ..interpreters.staging import consts_as_inputs, inline_rules, partial_eval_rules, trace_to_jaxpr
from ..primitives import array_primitives as P
from ..primitives.batch_dims import move_to_front
from ..tree.tree_util import tree_flatten, tree_unflatten
from .lax_ops import _lift
from . import ad_rules, ad_structural  # noqa: F401  (vecmat linearizes matvec: the derivative rules must be there)

__all__ = ["custom_linear_solve", "custom_root"]


def _closed(fun: Callable[..., Sequence[Any]], avals: Sequence[Any]) -> tuple[Jaxpr, list[Any]]:
    """A flat function traced into a jaxpr taking its captured values first, and those values."""
    jaxpr, _ = trace_to_jaxpr(fun, list(avals))
    return consts_as_inputs(jaxpr), list(jaxpr.consts)


def _shapes(values: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(aval_of(v).shape) for v in values]


def _checked(name: str, expected: str, fun: Callable[[Any], Any], tree: Any, expected_leaves: Sequence[Any],
             has_aux: bool, aux_trees: list[Any], shapes: bool = True) -> Callable[..., list[Any]]:
    """`fun` on flat leaves, its result checked to have `tree`'s structure (and, with `shapes`, the expected leaves'
    shapes; the errors are JAX's); with `has_aux` the aux leaves follow, their structure recorded in `aux_trees`."""

    def flat(*leaves: Any) -> list[Any]:
        out = fun(tree_unflatten(tree, list(leaves)))
        aux_leaves: list[Any] = []
        if has_aux:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise ValueError(f"{name}() produced a pytree with structure {tree_flatten(out)[1]}, but a pytree "
                                 "tuple with auxiliary output was expected because has_aux was set to True.")
            out, aux = out
            aux_leaves, aux_tree = tree_flatten(aux)
            aux_trees[:] = [aux_tree]
        out_leaves, out_tree = tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"{name}() output pytree structure must match {expected}, got {out_tree} and {tree}.")
        if shapes and _shapes(out_leaves) != _shapes(expected_leaves):
            raise ValueError(f"{name}() output shapes must match {expected}, got {_shapes(out_leaves)} and "
                             f"{_shapes(expected_leaves)}")
        return [*out_leaves, *aux_leaves]

    return flat


def _split(values: Sequence[Any], lengths: Sequence[int]) -> list[list[Any]]:
    parts, start = [], 0
    for n in lengths:
        parts.append(list(values[start:start + n]))
        start += n
    parts.append(list(values[start:]))
    return parts


def _call_primitive(name: str, expand: Callable[..., list[Any]], out_avals: Callable[..., list[Any]]) -> Primitive:
    primitive = Primitive(name, multiple_results=True)
    abstract_eval_rules[primitive] = out_avals
    inline_rules[primitive] = expand
    vma_rules[primitive] = keeps_own_vma
    return primitive


# ---- custom_linear_solve ------------------------------------------------------------------------------------------


def _solve_expand(*args: Any, const_lengths: tuple[int, ...], jaxprs: tuple[Any, ...], num_aux: int) -> list[Any]:
    matvec_c, vecmat_c, solve_c, tsolve_c, b = _split(args, const_lengths)
    return eval_jaxpr(jaxprs[2], [], [*solve_c, *b])


linear_solve_p = _call_primitive("custom_linear_solve", _solve_expand,
                                 lambda *avals, jaxprs, **_: [v.aval for v in jaxprs[2].outvars])
partial_eval_rules[linear_solve_p] = lambda trace, *args, **params: trace.stage(linear_solve_p, args, params)


def _matvec_tangent(jaxpr: Jaxpr, consts: list[Any], const_tangents: list[Any], x: list[Any]) -> list[Any] | None:
    """The tangent of matvec(x) from its captured values' tangents alone (None when they are all zero)."""
    if all(isinstance(t, Zero) for t in const_tangents):
        return None
    _, tangents = jvp_flat(lambda *c: eval_jaxpr(jaxpr, [], [*c, *x]), consts, const_tangents)
    return tangents


def _linear_solve_jvp(primals: list[Any], tangents: list[Any], *, const_lengths: tuple[int, ...],
                      jaxprs: tuple[Any, ...], num_aux: int) -> tuple[list[Any], list[Any]]:
    params = dict(const_lengths=const_lengths, jaxprs=jaxprs, num_aux=num_aux)
    outs = linear_solve_p.bind(*primals, **params)
    x = outs[:len(outs) - num_aux]
    matvec_c, vecmat_c, solve_c, tsolve_c, _ = _split(primals, const_lengths)
    matvec_t, *_, b_dot = _split(tangents, const_lengths)
    mv_dot = _matvec_tangent(jaxprs[0], matvec_c, matvec_t, x)
    aux_dot = [Zero(tangent_aval(aval_of(a))) for a in outs[len(x):]]
    if mv_dot is None and all(isinstance(t, Zero) for t in b_dot):
        return outs, [Zero(tangent_aval(aval_of(v))) for v in x] + aux_dot
    rhs = [instantiate(t) if isinstance(t, Zero) else t for t in b_dot]
    if mv_dot is not None:
        rhs = [r if isinstance(m, Zero) else P.BINARY["sub"].bind(r, m) for r, m in zip(rhs, mv_dot)]
    consts = primals[:sum(const_lengths)]
    x_dot = linear_solve_p.bind(*consts, *rhs, **params)[:len(x)]
    return outs, list(x_dot) + aux_dot


def _linear_solve_transpose(cts: list[Any], *args: Any, const_lengths: tuple[int, ...], jaxprs: tuple[Any, ...],
                            num_aux: int) -> list[Any]:
    if jaxprs[3] is None:
        raise TypeError("transpose_solve required for backwards mode automatic differentiation of "
                        "custom_linear_solve; pass transpose_solve= (or symmetric=True for a symmetric matvec).")
    matvec_c, vecmat_c, solve_c, tsolve_c, b = _split(args, const_lengths)
    x_cts = [instantiate(c) for c in cts[:len(cts) - num_aux]]
    swapped = (jaxprs[1], jaxprs[0], jaxprs[3], jaxprs[2])
    lengths = (const_lengths[1], const_lengths[0], const_lengths[3], const_lengths[2])
    b_cts = linear_solve_p.bind(*vecmat_c, *matvec_c, *tsolve_c, *solve_c, *x_cts, const_lengths=lengths,
                                jaxprs=swapped, num_aux=num_aux)[:len(b)]
    return [None] * sum(const_lengths) + list(b_cts)


jvp_rules[linear_solve_p] = _linear_solve_jvp
transpose_rules[linear_solve_p] = _linear_solve_transpose


def _transposed(matvec: Callable[[Any], Any], tree: Any, leaves: Sequence[Any]) -> Callable[[Any], Any]:
    """The transpose (vecmat) of the linear map `matvec`, by linearizing it at zero and transposing."""
    zeros = [np.zeros(aval_of(v).shape, aval_of(v).dtype) for v in leaves]

    def flat(*xs: Any) -> list[Any]:
        out, _ = tree_flatten(matvec(tree_unflatten(tree, list(xs))))
        return out

    def vecmat(y: Any) -> Any:
        _, linear = linearize_flat(flat, zeros)
        cts = linear.transpose(tree_flatten(y)[0])
        return tree_unflatten(tree, [instantiate(c) for c in cts])

    return vecmat


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable[[Callable, Any], Any],
                        transpose_solve: Callable[[Callable, Any], Any] | None = None, symmetric: bool = False,
                        has_aux: bool = False) -> Any:
    """solve(matvec, b), differentiated as the solution of the linear system matvec(x) == b (as
    jax.lax.custom_linear_solve): derivatives flow to `b` and to the values `matvec` captures, never through
    `solve`'s own steps. Reverse mode needs `transpose_solve` (solving with matvec's transpose) or `symmetric`."""
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    leaves, tree = tree_flatten(b)
    leaves = [_lift(v) for v in leaves]
    avals = [aval_of(v) for v in leaves]
    aux_trees: list[Any] = []
    matvec_j, matvec_c = _closed(_checked("matvec", "b", matvec, tree, leaves, False, []), avals)
    solve_j, solve_c = _closed(_checked("solve", "b", lambda x: solve(matvec, x), tree, leaves, has_aux, aux_trees),
                               avals)
    vecmat_j, vecmat_c, tsolve_j, tsolve_c = None, [], None, []
    if transpose_solve is not None:
        if symmetric:
            vecmat, vecmat_j, vecmat_c = matvec, matvec_j, matvec_c
        else:
            vecmat = _transposed(matvec, tree, leaves)
            vecmat_j, vecmat_c = _closed(_checked("vecmat", "b", vecmat, tree, leaves, False, []), avals)
        tsolve_j, tsolve_c = _closed(_checked("transpose_solve", "b", lambda x: transpose_solve(vecmat, x), tree,
                                              leaves, has_aux, []), avals)
    num_aux = len(solve_j.outvars) - len(leaves)
    outs = linear_solve_p.bind(*matvec_c, *vecmat_c, *solve_c, *tsolve_c, *leaves,
                               const_lengths=(len(matvec_c), len(vecmat_c), len(solve_c), len(tsolve_c)),
                               jaxprs=(matvec_j, vecmat_j, solve_j, tsolve_j), num_aux=num_aux)
    x = tree_unflatten(tree, outs[:len(leaves)])
    return (x, tree_unflatten(aux_trees[0], outs[len(leaves):])) if has_aux else x


# ---- custom_root -------------------------------------------------------------------------------------------------


def _root_expand(*args: Any, num_solve_consts: int, num_guess: int, f_jaxpr: Jaxpr, solve_jaxpr: Jaxpr,
                 tangent_solve: Callable, num_aux: int) -> list[Any]:
    return eval_jaxpr(solve_jaxpr, [], list(args[:num_solve_consts + num_guess]))


custom_root_p = _call_primitive("custom_root", _root_expand,
                                lambda *avals, solve_jaxpr, **_: [v.aval for v in solve_jaxpr.outvars])


def _root_jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    outs = custom_root_p.bind(*primals, **params)
    start = params["num_solve_consts"] + params["num_guess"]
    f_consts, f_tangents = primals[start:], tangents[start:]
    root = outs[:len(outs) - params["num_aux"]]
    aux_dot = [Zero(tangent_aval(aval_of(a))) for a in outs[len(root):]]
    if all(isinstance(t, Zero) for t in f_tangents):
        return outs, [Zero(tangent_aval(aval_of(r))) for r in root] + aux_dot
    f_jaxpr = params["f_jaxpr"]
    _, rhs = jvp_flat(lambda *c: eval_jaxpr(f_jaxpr, [], [*c, *root]), f_consts, f_tangents)
    solved = params["tangent_solve"](f_consts, root, [instantiate(t) for t in rhs])
    return outs, [P.UNARY["neg"].bind(s) for s in solved] + aux_dot


jvp_rules[custom_root_p] = _root_jvp


def _tangent_solver(tangent_solve: Callable, f_jaxpr: Jaxpr, tree: Any) -> Callable[..., list[Any]]:
    """tangent_solve as the primitive calls it: (f's captured values, root leaves, rhs leaves) -> solution leaves,
    with g the derivative of f in x at the root."""

    def solver(f_consts: list[Any], root: list[Any], rhs: list[Any]) -> list[Any]:
        def g(v: Any) -> Any:
            _, out = jvp_flat(lambda *x: eval_jaxpr(f_jaxpr, [], [*f_consts, *x]), root, tree_flatten(v)[0])
            return tree_unflatten(tree, [instantiate(t) for t in out])

        return tree_flatten(tangent_solve(g, tree_unflatten(tree, rhs)))[0]

    return solver


def custom_root(f: Callable, initial_guess: Any, solve: Callable[[Callable, Any], Any],
                tangent_solve: Callable[[Callable, Any], Any], has_aux: bool = False) -> Any:
    """solve(f, initial_guess), differentiated by the implicit function theorem at the root (as
    jax.lax.custom_root): derivatives flow to the values `f` captures, through tangent_solve(g, y), which solves
    g(x) == y for g the derivative of f at the root."""
    leaves, tree = tree_flatten(initial_guess)
    leaves = [_lift(v) for v in leaves]
    avals = [aval_of(v) for v in leaves]
    f_j, f_c = _closed(_checked("f", "initial_guess", f, tree, leaves, False, [], shapes=False), avals)

    def f_again(x: Any) -> Any:
        return tree_unflatten(tree, eval_jaxpr(f_j, [], [*f_c, *tree_flatten(x)[0]]))

    aux_trees: list[Any] = []
    solve_j, solve_c = _closed(_checked("solve", "initial_guess", lambda x: solve(f_again, x), tree, leaves,
                                        has_aux, aux_trees, shapes=False), avals)
    outs = custom_root_p.bind(*solve_c, *leaves, *f_c, num_solve_consts=len(solve_c), num_guess=len(leaves),
                              f_jaxpr=f_j, solve_jaxpr=solve_j, tangent_solve=_tangent_solver(tangent_solve, f_j, tree),
                              num_aux=len(solve_j.outvars) - len(leaves))
    root = tree_unflatten(tree, outs[:len(leaves)])
    return (root, tree_unflatten(aux_trees[0], outs[len(leaves):])) if has_aux else root


# ---- batching: the primitives stay whole (so that derivatives of vmapped solves stay implicit) ---------------------


def _batched_jaxpr(jaxpr: Jaxpr, dims: Sequence[int | None], size: int) -> tuple[Jaxpr, list[Any]]:
    """`jaxpr` over inputs batched along their first dimension where `dims` is 0, every output batched first;
    returns the jaxpr (new captured values as leading inputs) and those values."""
    avals = [a.update(shape=(size, *a.shape)) if d == 0 else a for a, d in zip(jaxpr.in_avals, dims)]

    def fun(*args: Any) -> list[Any]:
        outs, out_dims = batch_flat(lambda *a: eval_jaxpr(jaxpr, [], list(a)), args, dims, size)
        return [move_to_front(o, d, size) for o, d in zip(outs, out_dims)]

    return _closed(fun, avals)


def _fronted(values: Sequence[Any], dims: Sequence[int | None], size: int, force: bool = False
             ) -> tuple[list[Any], list[int | None]]:
    """The values with their batch dimension first (given one, or all of them with `force`), and their dims."""
    moved = [move_to_front(v, d, size) if d is not None or force else v for v, d in zip(values, dims)]
    return moved, [0 if d is not None or force else None for d in dims]


def _size(values: Sequence[Any], dims: Sequence[int | None]) -> int:
    return next(aval_of(v).shape[d] for v, d in zip(values, dims) if d is not None)


def _linear_solve_batch(values: list[Any], dims: list[Any], *, const_lengths: tuple[int, ...],
                        jaxprs: tuple[Any, ...], num_aux: int) -> tuple[list[Any], list[int]]:
    size = _size(values, dims)
    groups = _split(values, const_lengths)
    group_dims = _split(dims, const_lengths)
    b, b_dims = _fronted(groups[4], group_dims[4], size, force=True)
    new_consts, new_jaxprs = [], []
    for jaxpr, consts, cdims in zip(jaxprs, groups[:4], group_dims[:4]):
        consts, cdims = _fronted(consts, cdims, size)
        if jaxpr is None:
            new_jaxprs.append(None)
            new_consts.append(consts)
            continue
        batched, extra = _batched_jaxpr(jaxpr, [*cdims, *b_dims], size)
        new_jaxprs.append(batched)
        new_consts.append([*extra, *consts])
    outs = linear_solve_p.bind(*[c for group in new_consts for c in group], *b,
                               const_lengths=tuple(len(g) for g in new_consts), jaxprs=tuple(new_jaxprs),
                               num_aux=num_aux)
    return outs, [0] * len(outs)


def _batched_tangent_solver(tangent_solve: Callable, num_extra: int, f_dims: list[int | None], size: int
                            ) -> Callable[..., list[Any]]:
    """The tangent solver of a batched custom_root: the unbatched one mapped over the batch."""

    def solver(f_consts: list[Any], root: list[Any], rhs: list[Any]) -> list[Any]:
        consts, nc, nr = f_consts[num_extra:], len(f_consts) - num_extra, len(root)

        def one(*args: Any) -> list[Any]:
            return tangent_solve(list(args[:nc]), list(args[nc:nc + nr]), list(args[nc + nr:]))

        outs, out_dims = batch_flat(one, [*consts, *root, *rhs], [*f_dims, *[0] * (nr + len(rhs))], size)
        return [move_to_front(o, d, size) for o, d in zip(outs, out_dims)]

    return solver


def _root_batch(values: list[Any], dims: list[Any], *, num_solve_consts: int, num_guess: int, f_jaxpr: Jaxpr,
                solve_jaxpr: Jaxpr, tangent_solve: Callable, num_aux: int) -> tuple[list[Any], list[int]]:
    size = _size(values, dims)
    values, dims = _fronted(values, dims, size)
    start = num_solve_consts + num_guess
    solve_b, solve_extra = _batched_jaxpr(solve_jaxpr, dims[:start], size)
    num_root = len(solve_jaxpr.outvars) - num_aux
    f_b, f_extra = _batched_jaxpr(f_jaxpr, [*dims[start:], *[0] * num_root], size)
    tangent = _batched_tangent_solver(tangent_solve, len(f_extra), dims[start:], size)
    outs = custom_root_p.bind(*solve_extra, *values[:start], *f_extra, *values[start:],
                              num_solve_consts=len(solve_extra) + num_solve_consts, num_guess=num_guess,
                              f_jaxpr=f_b, solve_jaxpr=solve_b, tangent_solve=tangent, num_aux=num_aux)
    return outs, [0] * len(outs)


batching_rules[linear_solve_p] = _linear_solve_batch
batching_rules[custom_root_p] = _root_batch
