"""jit: trace a function once per input signature into a Jaxpr, then evaluate the Jaxpr.

Evaluation binds each equation in the caller's trace: eagerly (partitioned over the
inputs' meshes) at top level, or recorded into an enclosing trace. Python side
effects of the function therefore happen once, when it is traced.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

from .api import device_put
from .array import Array
from .core import Jaxpr, aval_of, eval_jaxpr, trace_to_jaxpr
from .sharding import PartitionSpec, Sharding
from .tree_util import tree_flatten, tree_unflatten


def _as_tuple(x: Any) -> tuple[Any, ...]:
    if x is None:
        return ()
    return (x,) if isinstance(x, (int, str)) else tuple(x)


def _signature_of(leaf: Any) -> Any:
    try:
        aval = aval_of(leaf)
    except TypeError:
        raise TypeError(f"jit: argument {leaf!r} of type {type(leaf).__name__} is not an array or number; pass it "
                        "as a static argument (static_argnums / static_argnames).") from None
    sharding = leaf.sharding if isinstance(leaf, Array) else None
    return (aval.shape, aval.dtype, aval.weak_type, sharding)


class Jitted:
    """A function compiled (traced) once per signature of its arguments."""

    def __init__(self, fun: Callable[..., Any], in_shardings: Any, out_shardings: Any,
                 static_argnums: Sequence[int], static_argnames: Sequence[str], donate_argnums: Sequence[int]) -> None:
        self.fun = fun
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.static_argnums = tuple(static_argnums)
        self.static_argnames = tuple(static_argnames)
        self._cache: dict[Any, tuple[Jaxpr, Any]] = {}
        functools.update_wrapper(self, fun)

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict, tuple, tuple]:
        static_positional = tuple((i, args[i]) for i in self.static_argnums if i < len(args))
        static_named = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        dynamic_args = tuple(a for i, a in enumerate(args) if i not in self.static_argnums)
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return dynamic_args, dynamic_kwargs, static_positional, static_named

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        dynamic_args, dynamic_kwargs, static_positional, static_named = self._split(args, kwargs)
        if self.in_shardings is not None:
            dynamic_args = _apply_shardings(dynamic_args, self.in_shardings)
        leaves, structure = tree_flatten((dynamic_args, dynamic_kwargs))
        signature = tuple(_signature_of(x) for x in leaves)
        try:
            key = (structure, signature, static_positional, static_named)
            hash(key)
        except TypeError as error:
            raise ValueError(f"jit: static arguments must be hashable ({error}); pass them as static_argnums.") from None
        if key not in self._cache:
            self._cache[key] = self._trace(structure, leaves, static_positional, static_named)
        jaxpr, out_structure = self._cache[key]
        outputs = tree_unflatten(out_structure, eval_jaxpr(jaxpr, leaves))
        if self.out_shardings is not None:
            outputs = _apply_shardings(outputs, self.out_shardings)
        return outputs

    def _trace(self, structure: Any, leaves: list[Any], static_positional: tuple, static_named: tuple) -> tuple:
        out_structure = []

        def flat_fun(*flat: Any) -> list[Any]:
            dynamic_args, dynamic_kwargs = tree_unflatten(structure, list(flat))
            args = list(dynamic_args)
            for index, value in static_positional:
                args.insert(index, value)
            result = self.fun(*args, **dynamic_kwargs, **dict(static_named))
            out_leaves, tree = tree_flatten(result)
            out_structure.append(tree)
            return out_leaves

        avals = [aval_of(x) for x in leaves]
        jaxpr, _ = trace_to_jaxpr(flat_fun, avals)
        return jaxpr, out_structure[0]

    def lower(self, *args: Any, **kwargs: Any) -> "Lowered":
        dynamic_args, dynamic_kwargs, static_positional, static_named = self._split(args, kwargs)
        leaves, structure = tree_flatten((dynamic_args, dynamic_kwargs))
        jaxpr, _ = self._trace(structure, leaves, static_positional, static_named)
        return Lowered(jaxpr)

    def __get__(self, instance: Any, owner: Any) -> Any:
        return self if instance is None else functools.partial(self, instance)


class Lowered:
    """The traced program, printable (`as_text()`)."""

    def __init__(self, jaxpr: Jaxpr) -> None:
        self.jaxpr = jaxpr

    def as_text(self) -> str:
        return str(self.jaxpr)

    def compile(self) -> "Lowered":
        return self


def _apply_shardings(tree: Any, shardings: Any) -> Any:
    if isinstance(shardings, Sharding) or shardings is None:
        return device_put(tree, shardings)
    if isinstance(tree, tuple) and isinstance(shardings, (tuple, list)) and len(shardings) == len(tree):
        return tuple(_apply_shardings(t, s) for t, s in zip(tree, shardings))
    return device_put(tree, shardings)


def jit(fun: Callable[..., Any] | None = None, *, in_shardings: Any = None, out_shardings: Any = None,
        static_argnums: Any = (), static_argnames: Any = (), donate_argnums: Any = (), donate_argnames: Any = (),
        keep_unused: bool = False, device: Any = None, backend: Any = None, inline: bool = False) -> Any:
    """Trace `fun` once per argument signature (shapes, dtypes, shardings, static values) and reuse it."""
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums)
    if not callable(fun):
        raise TypeError(f"jit needs a function; got {type(fun).__name__}.")
    static_argnames = _as_tuple(static_argnames)
    static_argnums = _as_tuple(static_argnums)
    parameters = _parameter_names(fun)
    static_argnums = tuple(sorted(set(static_argnums) | {parameters.index(n) for n in static_argnames
                                                          if n in parameters}))
    return Jitted(fun, in_shardings, out_shardings, static_argnums, static_argnames, _as_tuple(donate_argnums))


def _parameter_names(fun: Callable[..., Any]) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fun).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """Ask for `x` to be laid out as `shardings` (a reshard when run eagerly)."""
    from . import primitives as P

    leaves, structure = tree_flatten(x)
    single = isinstance(shardings, (Sharding, PartitionSpec)) or not isinstance(shardings, (list, tuple))
    targets = [shardings] * len(leaves) if single else list(shardings)
    if len(targets) != len(leaves):
        raise ValueError(f"with_sharding_constraint got {len(targets)} shardings for {len(leaves)} arrays.")
    return tree_unflatten(structure, [P.sharding_constraint.bind(leaf, sharding=s) for leaf, s in zip(leaves, targets)])

