"""The autodiff API with JAX's semantics: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian.

Each flattens its pytree arguments and runs the core's forward-mode and transpose
machinery (interpreters/ad.py), so it composes with jit, shard_map and itself.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from .. import numpy as jnp
from ..arrays.array import Array
from ..core.core import Tracer, aval_of, define_primitive
from ..core.dtypes import float0, issubdtype
from ..interpreters.ad import Zero, backward_pass, defzero, jvp_flat, linearize_flat, tangent_aval
from ..core.jaxpr import Jaxpr
from . import custom_derivatives, remat, shard_map_ad  # noqa: F401  (register derivative rules)
from ..lax import ad_rules, ad_structural, parallel, scan_ad  # noqa: F401
from ..primitives import array_primitives as P
from ..sharding.placement_rules import elementwise
from ..tree.tree_util import register_pytree_node, tree_flatten, tree_map, tree_structure, tree_unflatten


# ---- stop_gradient -----------------------------------------------------------------------------------------------

stop_gradient_p = define_primitive("stop_gradient", lambda x: x, lambda x: x, elementwise)
defzero(stop_gradient_p)


def stop_gradient(x: Any) -> Any:
    """The identity, with a zero derivative."""
    return tree_map(lambda leaf: stop_gradient_p.bind(leaf) if _is_inexact(leaf) else leaf, x)


def _is_inexact(x: Any) -> bool:
    return issubdtype(aval_of(x).dtype, np.inexact)


# ---- helpers ---------------------------------------------------------------------------------------------------


def _argnums(argnums: int | Sequence[int], count: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -count <= n < count:
            raise TypeError(f"{name}: differentiating with respect to argnums={argnums} requires at least "
                            f"{max(nums) + 1} positional arguments to be passed by the caller, but got only "
                            f"{count} positional arguments.")
    return tuple(n % count for n in nums)


def _materialize(ct: Any, aval: Any) -> Any:
    """A cotangent or tangent as a value: symbolic zeros become zeros (float0 ones stay NumPy, as JAX's)."""
    if isinstance(ct, Zero):
        if ct.aval.dtype == float0:
            return np.zeros(ct.aval.shape, float0)
        zeros = jnp.zeros(ct.aval.shape, ct.aval.dtype)
        if ct.aval.weak_type:  # the zero gradient of a Python scalar is weakly typed, as the scalar is (and JAX's)
            return P.convert_element_type.bind(zeros, new_dtype=ct.aval.dtype, weak_type=True)
        return zeros
    return ct


def _like_sharding(ct: Any, sharding: Any) -> Any:
    """Gradients of Arrays come back laid out as the Array (JAX's gradient has its parameter's sharding); unreduced
    ones stay partial sums, as JAX types them."""
    partial = isinstance(ct, Array) and bool(getattr(getattr(ct.sharding, "spec", None), "unreduced", None))
    if sharding is not None and isinstance(ct, Array) and ct.sharding != sharding and not partial:
        from ..arrays.placement import device_put

        return device_put(ct, sharding)
    return ct


def _check_inputs(leaves: Sequence[Any], name: str, holomorphic: bool, allow_int: bool) -> None:
    for leaf in leaves:
        dtype = aval_of(leaf).dtype
        if holomorphic:
            if not issubdtype(dtype, np.complexfloating):
                raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, but got "
                                f"{dtype.name}.")
        elif not issubdtype(dtype, np.inexact) and not allow_int:
            raise TypeError(f"{name} requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
                            f"np.inexact), but got {dtype.name}. If you want to use Boolean- or integer-valued "
                            "inputs, use vjp or set allow_int to True.")


# ---- jvp and linearize -----------------------------------------------------------------------------------------


def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> Any:
    """(fun(*primals), the derivative of fun at primals applied to tangents)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jax.jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    p_leaves, p_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"primal and tangent arguments to jax.jvp must have the same tree structure; primals have "
                        f"tree structure {p_tree} whereas tangents have tree structure {t_tree}.")
    for p, t in zip(p_leaves, t_leaves):
        expected = tangent_aval(aval_of(p))
        if tuple(np.shape(t)) != tuple(expected.shape):
            raise ValueError(f"jvp called with different primal and tangent shapes; got primal shape "
                             f"{expected.shape} and tangent shape as {tuple(np.shape(t))}")
    out_tree, aux = [], []
    tangents_in = [Zero(tangent_aval(aval_of(p))) if aval_of(p).dtype != aval_of(t).dtype and
                   not issubdtype(aval_of(p).dtype, np.inexact) else t for p, t in zip(p_leaves, t_leaves)]
    primals_out, tangents_out = jvp_flat(_flat_fun(fun, p_tree, out_tree, aux, has_aux), p_leaves, tangents_in)
    n_out = out_tree[0].num_leaves
    tangents_out = [_materialize(t, None) for t in tangents_out[:n_out]]
    result = (tree_unflatten(out_tree[0], primals_out[:n_out]), tree_unflatten(out_tree[0], tangents_out))
    return result + (_aux(aux, primals_out, n_out),) if has_aux else result


def linearize(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """(fun(*primals), a function applying fun's derivative at primals to tangents)."""
    p_leaves, p_tree = tree_flatten(primals)
    out_tree, aux = [], []
    primals_out, linear = linearize_flat(_flat_fun(fun, p_tree, out_tree, aux, has_aux), p_leaves)
    n_out = out_tree[0].num_leaves

    def f_jvp(*tangents: Any) -> Any:
        t_leaves, t_tree = tree_flatten(tangents)
        if t_tree != p_tree:
            raise TypeError(f"linearized function called on tangents of structure {t_tree}, expected {p_tree}.")
        return tree_unflatten(out_tree[0], [_materialize(t, None) for t in linear(t_leaves)[:n_out]])

    result = (tree_unflatten(out_tree[0], primals_out[:n_out]), f_jvp)
    return result + (_aux(aux, primals_out, n_out),) if has_aux else result


def _flat_fun(fun: Callable[..., Any], in_tree: Any, out_tree: list, aux: list, has_aux: bool) -> Callable:
    def flat(*xs: Any) -> list[Any]:
        result = fun(*tree_unflatten(in_tree, list(xs)))
        if has_aux:
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise TypeError("a function differentiated with has_aux=True must return a pair (output, aux); got "
                                f"{type(result).__name__}.")
            result, extra = result
            aux_leaves, aux_tree = tree_flatten(extra)
            aux.append(aux_tree)
        leaves, tree = tree_flatten(result)
        out_tree.append(tree)
        return leaves + (aux_leaves if has_aux else [])  # aux values leave the trace as primal outputs

    return flat


def _aux(aux: list, primals_out: list[Any], n_out: int) -> Any:
    return tree_unflatten(aux[0], primals_out[n_out:])


# ---- vjp, grad ---------------------------------------------------------------------------------------------------


def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """(fun(*primals), a function mapping an output cotangent to the cotangents of primals)."""
    p_leaves, p_tree = tree_flatten(primals)
    out_tree, aux = [], []
    primals_out, linear = linearize_flat(_flat_fun(fun, p_tree, out_tree, aux, has_aux), p_leaves)
    out_structure = out_tree[0]
    n_out = out_structure.num_leaves
    shardings = tuple(p.sharding if isinstance(p, Array) else None for p in p_leaves)
    f_vjp = VJP(_Backward(linear, p_tree, out_structure, shardings), list(linear.jaxpr.consts))
    result = (tree_unflatten(out_structure, primals_out[:n_out]), f_vjp)
    return result + (_aux(aux, primals_out, n_out),) if has_aux else result


class _Backward:
    """What a VJP needs besides its residuals: the linear program (without its residual values) and the trees."""

    def __init__(self, linear: Any, p_tree: Any, out_tree: Any, shardings: tuple) -> None:
        program = linear.jaxpr
        self.program = Jaxpr(program.constvars, program.invars, program.equations, program.outvars)
        self.in_avals, self.out_avals = linear.in_avals, linear.out_avals
        self.p_tree, self.out_tree, self.shardings = p_tree, out_tree, shardings


class NotNeeded:
    """An argument the backward pass does not keep (JAX's marker in `VJP.args_res`)."""

    def __repr__(self) -> str:
        return "NotNeeded()"


class VJP:
    """The backward function `jax.vjp` returns: call it with an output cotangent. A pytree whose leaves are the
    residuals it keeps, so it can be returned from `jit` or passed through transformations."""

    def __init__(self, backward: _Backward, residuals: list[Any]) -> None:
        self._backward = backward
        self.opaque_residuals = list(residuals)
        self.in_tree, self.out_tree = backward.p_tree, backward.out_tree
        self.args_res = [NotNeeded() for _ in range(backward.p_tree.num_leaves)]

    @property
    def jaxpr(self) -> Jaxpr:
        program = self._backward.program
        return Jaxpr(program.constvars, program.invars, program.equations, program.outvars, self.opaque_residuals)

    def __call__(self, cotangent: Any) -> tuple[Any, ...]:
        backward = self._backward
        c_leaves, c_tree = tree_flatten(cotangent)
        if c_tree != backward.out_tree:
            raise TypeError(f"Tree structure of cotangent input {c_tree}, does not match structure of primal "
                            f"output {backward.out_tree}.")
        for c, a in zip(c_leaves, backward.out_avals):
            if tuple(np.shape(c)) != tuple(a.shape):
                raise ValueError(f"vjp: the cotangent has shape {tuple(np.shape(c))} but the primal output has "
                                 f"shape {a.shape}; pass a cotangent shaped like the output.")
        n_out = backward.out_tree.num_leaves
        cts = backward_pass(backward.program, self.opaque_residuals,
                            c_leaves + [Zero(a) for a in backward.out_avals[n_out:]])
        cts = [_like_sharding(_materialize(c, a), s) for c, a, s in zip(cts, backward.in_avals, backward.shardings)]
        return tuple(tree_unflatten(backward.p_tree, cts))

    def __repr__(self) -> str:
        return f"VJP(in_tree={self.in_tree}, out_tree={self.out_tree}, residuals={len(self.opaque_residuals)})"


register_pytree_node(VJP, lambda f: (f.opaque_residuals, f._backward),
                     lambda backward, residuals: VJP(backward, list(residuals)))


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False, reduce_axes: Sequence[Any] = ()) -> Callable:
    """A function returning (fun(*args), the gradient of fun with respect to args[argnums])."""
    _check_callable(fun, "value_and_grad")

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums(argnums, len(args), "value_and_grad")
        diff_args = [args[i] for i in nums]
        _check_inputs(tree_flatten(diff_args)[0], "grad", holomorphic, allow_int)

        def partial(*chosen: Any) -> Any:
            full = list(args)
            for i, value in zip(nums, chosen):
                full[i] = value
            return fun(*full, **kwargs)

        out = vjp(partial, *diff_args, has_aux=has_aux)
        value, f_vjp = out[0], out[1]
        _check_scalar_output(value, holomorphic)
        aval = aval_of(value)
        if aval.weak_type:  # a weakly typed output seeds a weakly typed cotangent, as in JAX
            ct = jnp._cast(np.ones((), aval.dtype), aval.dtype, True)
        else:
            ct = jnp.ones((), aval.dtype) if not isinstance(value, Tracer) else np.ones((), aval.dtype)
        grads = f_vjp(ct)
        grads = grads[0] if isinstance(argnums, int) else tuple(grads)
        return ((value, out[2]), grads) if has_aux else (value, grads)

    return wrapped


def grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False, reduce_axes: Sequence[Any] = ()) -> Callable:
    """A function returning the gradient of the scalar function `fun` with respect to args[argnums]."""
    _check_callable(fun, "grad")
    both = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun, updated=())
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        (value, grads) = both(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return wrapped


def _check_callable(fun: Any, name: str) -> None:
    if not callable(fun):
        raise TypeError(f"Expected a callable value, got {fun!r}")


def _check_scalar_output(value: Any, holomorphic: bool) -> None:
    leaves = tree_flatten(value)[0]
    if len(leaves) != 1 or tree_structure(value).num_leaves != 1 or not hasattr(leaves[0], "shape") and \
            not np.isscalar(leaves[0]):
        raise TypeError(f"Gradient only defined for scalar-output functions. Output was {value}.")
    aval = aval_of(leaves[0])
    if aval.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: {aval.shape}.")
    if issubdtype(aval.dtype, np.complexfloating) and not holomorphic:
        raise TypeError(f"grad requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but "
                        f"got {aval.dtype.name}. For holomorphic differentiation, pass holomorphic=True. For "
                        "differentiating non-holomorphic functions involving complex outputs, use jax.vjp directly.")
    if not issubdtype(aval.dtype, np.inexact):
        raise TypeError(f"grad requires real- or complex-valued outputs (output dtype that is a sub-dtype of "
                        f"np.inexact), but got {aval.dtype.name}.")
