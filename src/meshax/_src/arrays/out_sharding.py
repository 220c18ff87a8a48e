"""`reshard` (a pytree laid out as asked) and the `out_sharding=` keyword of functions that make arrays (jnp creation
functions, random distributions), as JAX 0.10 has them."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from .placement import device_put
from ..sharding.aval_sharding import TypeSharding
from ..sharding.mesh import AxisType, current_mesh
from ..sharding.shardings import NamedSharding, PartitionSpec, Sharding
from ..tree.tree_util import prefix_leaves, tree_flatten, tree_unflatten


def _target(spec: Any) -> Sharding:
    if isinstance(spec, Sharding):
        return spec
    if isinstance(spec, TypeSharding) and not spec.mesh.empty:  # a type's sharding: its spec on the mesh in use
        spec = spec.spec
    if isinstance(spec, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"reshard got the PartitionSpec {spec!r} but no mesh is in use; call it inside `with "
                             "meshax.set_mesh(mesh):` or pass NamedSharding(mesh, spec).")
        return NamedSharding(mesh, spec)
    raise TypeError(f"reshard needs a PartitionSpec or a Sharding; got {spec!r} of type {type(spec).__name__}.")


def reshard(xs: Any, out_shardings: Any) -> Any:
    """`xs` laid out as `out_shardings` (one PartitionSpec/Sharding for all leaves, or a tree of them that is a
    prefix of `xs`'s, each covering its subtree)."""
    leaves, tree = tree_flatten(xs)
    if isinstance(out_shardings, (PartitionSpec, Sharding)):
        targets = [out_shardings] * len(leaves)
    else:
        try:
            targets = prefix_leaves(out_shardings, xs, is_leaf=lambda s: isinstance(s, (PartitionSpec, Sharding)))
        except ValueError as error:
            raise ValueError(f"reshard's shardings {out_shardings!r} are not a prefix of the arrays' tree {tree}: "
                             f"give one sharding, or a tree of them that is a prefix of theirs ({error}).") from None
    return tree_unflatten(tree, [device_put(x, _spelled(_target(t), x)) for x, t in zip(leaves, targets)])


def _spelled(target: Sharding, x: Any) -> Sharding:
    """On a mesh with Explicit axes, the target's spec with one entry a dimension, as types spell it (P() of a
    matrix is P(None, None))."""
    if not isinstance(target, NamedSharding) or AxisType.Explicit not in target.mesh.axis_types:
        return target
    spec, ndim = target.spec, len(getattr(x, "shape", ()))
    if len(spec) >= ndim:
        return target
    padded = PartitionSpec(*spec, *[None] * (ndim - len(spec)), unreduced=spec.unreduced, reduced=spec.reduced)
    return NamedSharding(target.mesh, padded, memory_kind=target.memory_kind)


def accepts_out_sharding(fun: Callable[..., Any]) -> Callable[..., Any]:
    """`fun` with an `out_sharding=` keyword: a PartitionSpec (over the mesh in use) or a Sharding its result is
    laid out as."""

    @functools.wraps(fun)
    def wrapped(*args: Any, out_sharding: Any = None, **kwargs: Any) -> Any:
        result = fun(*args, **kwargs)
        if out_sharding is None or isinstance(out_sharding, TypeSharding) and out_sharding.mesh.empty:
            return result  # (a type's sharding without a mesh places nothing)
        return reshard(result, out_sharding)

    signature = inspect.signature(fun)  # the keyword shows in the signature, as in JAX
    wrapped.__signature__ = signature.replace(parameters=[
        *signature.parameters.values(), inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)])
    return wrapped
