"""jax.ad_checkpoint: naming values for remat policies, and listing what a backward pass keeps.

`checkpoint_name(x, name)` (in remat.py, beside the policies such as `save_only_these_names` that save the values
so named) binds the identity primitive `name`. `saved_residuals` traces the
linearization of a function on abstract inputs and describes each value the backward pass keeps:
an argument, a constant, or the output of an operation with the user's source line.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from . import autodiff as ad_api  # noqa: F401  (registers the derivative rules)
from ..core.dtypes import issubdtype
from ..core.core import ShapedArray, Tracer, aval_of, current_trace, set_current_trace
from ..interpreters.ad import linearize_flat
from ..interpreters.staging import StagingTrace, stage_observers
from .remat import checkpoint_name, name_p  # noqa: F401  (jax.ad_checkpoint's names)
from .residual_origins import Origins, recording
from ..tree.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_unflatten

# ---- saved residuals ------------------------------------------------------------------------------------------


def _argument_names(fun: Callable[..., Any], args: tuple, kwargs: dict) -> list[str]:
    """One name per leaf of (args, kwargs): the parameter's name and the leaf's path inside it (`a[1]` for the
    second value of a `*a` parameter). JAX 0.12 names a checkpointed function's parameters so too, `jax_remat3`
    or not (0.10.2's new remat reported them as `args[i]`)."""
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        positional: list[str] = []
        for name, value in bound.arguments.items():
            kind = bound.signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                positional += [f"{name}[{j}]" for j in range(len(value))]
            elif kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                positional.append(name)
        parameter_names = positional
    except (TypeError, ValueError):
        parameter_names = []
    names = []
    for i, arg in enumerate(args):
        base = parameter_names[i] if i < len(parameter_names) else f"args[{i}]"
        names += [base + keystr(path) for path, _ in tree_flatten_with_path(arg)[0]]
    for key, value in kwargs.items():
        names += [key + keystr(path) for path, _ in tree_flatten_with_path(value)[0]]
    return names


def saved_residuals(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> list[tuple[ShapedArray, str]]:
    """The values `jax.vjp(fun, *args)` keeps for its backward pass: (type, where it comes from) each."""
    leaves, structure = tree_flatten((args, kwargs))
    names = _argument_names(fun, args, kwargs)
    trace = StagingTrace(current_trace())
    inputs = [trace.new_arg(aval_of(x)) for x in leaves]
    differentiable = [i for i, x in enumerate(leaves) if issubdtype(aval_of(x).dtype, np.inexact)]

    def flat(*diff: Any) -> list[Any]:
        full = list(inputs)
        for i, value in zip(differentiable, diff):
            full[i] = value
        call_args, call_kwargs = tree_unflatten(structure, full)
        return tree_flatten(fun(*call_args, **call_kwargs))[0]

    origins = Origins()
    stage_observers.append(origins)
    recording.append(origins)
    try:
        with set_current_trace(trace, finish=True):
            _, linear = linearize_flat(flat, [inputs[i] for i in differentiable])
    finally:
        stage_observers.remove(origins)
        recording.remove(origins)
    argument_of = {t.payload.id: name for t, name in zip(inputs, names)}
    arguments, others = [], []
    for value in linear.jaxpr.consts:
        if isinstance(value, Tracer) and trace.is_own(value):
            var = value.payload
            if var.id in argument_of:
                arguments.append((argument_of[var.id], (value.aval, f"from the argument {argument_of[var.id]}")))
                continue
            others.append((var.id, (value.aval, origins.of.get(var.id, "output of an operation"))))
        else:
            aval = aval_of(value)
            others.append((-1, (aval, "from a literal" if aval.shape == () else "from a constant")))
    order = {name: i for i, name in enumerate(names)}
    arguments.sort(key=lambda item: order[item[0]])
    others.sort(key=lambda item: item[0])  # constants first, then values in the order they were computed
    return [item for _, item in arguments] + [item for _, item in others]


def print_saved_residuals(fun: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Print, one a line, the values `jax.vjp(fun, *args)` keeps for its backward pass and where each comes from."""
    for aval, description in saved_residuals(fun, *args, **kwargs):
        print(f"{aval.str_short()} {description}")

