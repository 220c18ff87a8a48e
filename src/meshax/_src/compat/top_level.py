"""Smaller top-level names of jax: ensure_compile_time_eval, live_arrays, linear_transpose,
closure_convert, print_environment_info, the host_* aliases, process_indices, and configuration contexts (enable_x64,
and those whose only meaningful setting in meshax is the default: default_matmul_precision, numpy_rank_promotion,
numpy_dtype_promotion, transfer guards, log_compiles, explain_cache_misses, check_tracer_leaks...)."""
from __future__ import annotations

import contextlib
import functools
import platform
import sys
from typing import Any, Callable, Iterator

import numpy as np

from ..runtime import devices as device_table
from ..transforms.autodiff import vjp
from ..arrays.array import Array, live
from ..config import config
from ..core.core import Tracer, aval_of
from ..interpreters.staging import compile_time_eval, consts_as_inputs, trace_to_jaxpr
from ..core.jaxpr import eval_jaxpr
from ..tree.tree_util import tree_flatten, tree_map, tree_unflatten
from ..core.dtypes import issubdtype
from ..transforms.jacobians import jacrev

# ---- tracing helpers --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """Inside jit, operations whose operands are all concrete (not traced) run at once instead of being staged."""
    previous = compile_time_eval.active
    compile_time_eval.active = True
    try:
        yield
    finally:
        compile_time_eval.active = previous


def live_arrays(platform: str | None = None) -> list[Array]:
    """The Arrays that exist (are referenced) in this process."""
    return list(live.values())


def linear_transpose(fun: Callable[..., Any], *primals: Any, reduce_axes: Any = ()) -> Callable[..., Any]:
    """The transpose of the linear function `fun` at inputs shaped like `primals` (arrays or ShapeDtypeStructs):
    a function from output cotangents to a tuple of input cotangents."""
    zeros = tree_map(lambda p: np.zeros(p.shape, p.dtype) if not isinstance(p, Array) else p, primals)
    _, pullback = vjp(fun, *zeros)

    def transposed(*cotangents: Any) -> tuple:
        return tuple(pullback(cotangents[0] if len(cotangents) == 1 else cotangents))

    return transposed


def closure_convert(fun: Callable[..., Any], *example_args: Any) -> tuple[Callable[..., Any], list[Any]]:
    """`fun` traced on `example_args` as a function of its arguments followed by the floating-point traced values it
    closes over (returned as the second result), so custom_vjp rules can differentiate with respect to them."""
    flat, in_tree = tree_flatten(example_args)
    out_trees = []

    def flat_fun(*xs: Any) -> list[Any]:
        out, tree = tree_flatten(fun(*tree_unflatten(in_tree, list(xs))))
        out_trees.append(tree)
        return out

    jaxpr, _ = trace_to_jaxpr(flat_fun, [aval_of(x) for x in flat])
    hoisted = [isinstance(c, Tracer) and issubdtype(aval_of(c).dtype, np.inexact) for c in jaxpr.consts]
    consts = [c for c, h in zip(jaxpr.consts, hoisted) if h]
    program = consts_as_inputs(jaxpr)

    def converted(*args_and_consts: Any) -> Any:
        args, given = args_and_consts[:len(example_args)], list(args_and_consts[len(example_args):])
        supplied = iter(given)
        all_consts = [next(supplied) if h else c for c, h in zip(jaxpr.consts, hoisted)]
        out = eval_jaxpr(program, (), all_consts + tree_flatten(args)[0])
        return tree_unflatten(out_trees[0], out)

    return converted, consts


def custom_gradient(fun: Callable[..., Any]) -> Callable[..., Any]:
    """`fun` returning (value, vjp) -> a function of value whose reverse-mode derivative is that vjp: given the
    value's cotangent, it returns one cotangent per argument (as a tuple)."""

    @functools.wraps(fun)
    def call(*args: Any) -> Any:
        return _custom_gradient_call(fun)(*args)

    return call


def _custom_gradient_call(fun: Callable[..., Any]) -> Callable[..., Any]:
    """One call's custom_vjp: its forward pass traces the user's vjp into a jaxpr whose consts are the residuals."""
    from ..transforms.custom_derivatives import custom_vjp

    traced: list[Any] = []  # (the vjp as a jaxpr taking residuals then cotangents, the tree of its outputs)

    def forward(*args: Any) -> tuple[Any, Any]:
        value, rule = fun(*args)
        cts, ct_tree = tree_flatten(value)
        out_trees = []

        def flat_rule(*ct: Any) -> list[Any]:
            out, tree = tree_flatten(rule(tree_unflatten(ct_tree, list(ct))))
            out_trees.append(tree)
            return out

        jaxpr, _ = trace_to_jaxpr(flat_rule, [aval_of(c) for c in cts])
        traced[:] = [(consts_as_inputs(jaxpr), out_trees[0])]
        return value, list(jaxpr.consts)

    def backward(residuals: list[Any], ct: Any) -> tuple:
        program, out_tree = traced[0]
        out = tree_unflatten(out_tree, eval_jaxpr(program, (), list(residuals) + tree_flatten(ct)[0]))
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    wrapped = custom_vjp(lambda *args: fun(*args)[0])
    wrapped.defvjp(forward, backward)
    return wrapped


# ---- environment ----------------------------------------------------------------------------------------------


def print_environment_info(return_string: bool = False) -> str | None:
    """The versions and devices meshax runs with, printed (or returned)."""
    from meshax import __version__

    text = "\n".join([
        f"meshax:    {__version__}", f"numpy:     {np.__version__}",
        f"python:    {sys.version.replace(chr(10), ' ')}", f"platform:  {platform.platform()}",
        f"process_count: {device_table.process_count()}", f"local_devices: {device_table.local_devices()}",
    ]) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None


def host_count(backend: Any = None) -> int:
    """The number of processes (JAX's older name for process_count)."""
    return device_table.process_count()


def host_id(backend: Any = None) -> int:
    """This process's index (JAX's older name for process_index)."""
    return device_table.process_index()


def host_ids(backend: Any = None) -> list[int]:
    """Every process's index."""
    return list(range(device_table.process_count()))


def process_indices(backend: Any = None) -> list[int]:
    """Every process's index."""
    return list(range(device_table.process_count()))


@contextlib.contextmanager
def enable_x64(new_val: bool = True) -> Iterator[None]:
    """64-bit dtypes on (or off) for the code run inside."""
    yield from _with_option("jax_enable_x64", bool(new_val))


@contextlib.contextmanager
def default_device(device: Any) -> Iterator[None]:
    """Uncommitted values created or computed inside land on `device` (a device of this process, or 'cpu'; None:
    this process's first device), as with jax.default_device."""
    yield from _with_option("jax_default_device", device)


def _only_default(name: str, allowed: tuple, why: str) -> Callable[..., Any]:
    """A configuration context of JAX whose only setting meshax has is the default (others raise)."""

    @contextlib.contextmanager
    def context(new_val: Any = allowed[0]) -> Iterator[None]:
        if new_val not in allowed:
            raise NotImplementedError(f"jax.{name}({new_val!r}) is not implemented in meshax ({why}); it accepts "
                                      f"{', '.join(map(repr, allowed))}.")
        yield

    context.__name__ = name
    context.__doc__ = f"As jax.{name}; meshax: {why}."
    return context


_MATMUL = ("highest", "float32", "default", "high", "bfloat16_3x", "tensorfloat32", "bfloat16", None)
default_matmul_precision = _only_default("default_matmul_precision", _MATMUL,
                                         "NumPy computes matmuls in the dtype's full precision whatever is asked")
numpy_rank_promotion = _only_default("numpy_rank_promotion", ("allow",), "ranks always promote as in NumPy")
numpy_dtype_promotion = _only_default("numpy_dtype_promotion", ("standard",), "JAX's standard promotion only")
transfer_guard = _only_default("transfer_guard", ("allow", "log"), "transfers are not guarded")
transfer_guard_host_to_device = _only_default("transfer_guard_host_to_device", ("allow", "log"),
                                              "transfers are not guarded")
transfer_guard_device_to_host = _only_default("transfer_guard_device_to_host", ("allow", "log"),
                                              "transfers are not guarded")
transfer_guard_device_to_device = _only_default("transfer_guard_device_to_device", ("allow", "log"),
                                                "transfers are not guarded")
log_compiles = _only_default("log_compiles", (False, True), "nothing is compiled, so nothing is logged")
explain_cache_misses = _only_default("explain_cache_misses", (False, True), "jit retraces silently")
check_tracer_leaks = _only_default("check_tracer_leaks", (False, True),
                                   "an escaped tracer is always reported when it is used")
checking_leaks = functools.partial(check_tracer_leaks, True)


@contextlib.contextmanager
def debug_nans(new_val: bool = True) -> Iterator[None]:
    """Within the block, operations producing NaNs raise FloatingPointError (jax.debug_nans)."""
    yield from _with_option("jax_debug_nans", bool(new_val))


@contextlib.contextmanager
def debug_infs(new_val: bool = True) -> Iterator[None]:
    """Within the block, operations producing infinities raise FloatingPointError (jax.debug_infs)."""
    yield from _with_option("jax_debug_infs", bool(new_val))


def _with_option(name: str, value: Any) -> Iterator[None]:
    """Option `name` set to `value` for the block (for the whole process), then restored."""
    previous = config.read(name)
    config.update(name, value)
    try:
        yield
    finally:
        config.update(name, previous)


def default_backend() -> str:
    """The platform arrays live on: meshax has CPU devices only."""
    return "cpu"


def jacobian(fun: Callable[..., Any], argnums: Any = 0, has_aux: bool = False, holomorphic: bool = False,
             allow_int: bool = False) -> Callable[..., Any]:
    """The Jacobian of `fun` (as jax.jacobian: reverse mode)."""
    return jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)


def named_call(fun: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """`fun` itself: names label XLA's profiles, which meshax does not make."""
    return fun


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """A scope name for profiles (a no-op in meshax, as names only label XLA's programs)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope name argument must be a string; got {name!r}.")
    yield


def effects_barrier() -> None:
    """Wait for pending side effects: meshax runs them in order as they come, so there are none."""
