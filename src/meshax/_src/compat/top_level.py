"""Smaller top-level names of jax: ensure_compile_time_eval, live_arrays, linear_transpose,
closure_convert, print_environment_info, the host_* aliases, process_indices, and configuration contexts (enable_x64,
and those whose only meaningful setting in meshax is the default: default_matmul_precision, numpy_rank_promotion,
numpy_dtype_promotion, transfer guards, log_compiles, explain_cache_misses, check_tracer_leaks...)."""
from __future__ import annotations

import contextlib
import enum
import functools
import platform
import sys
import types
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..runtime import devices as device_table
from ..transforms.autodiff import vjp
from ..arrays.array import Array, live_arrays as _live_arrays
from ..config import config
from ..core.core import Tracer, aval_of
from ..interpreters.staging import compile_time_eval, consts_as_inputs, trace_to_jaxpr
from ..core.jaxpr import eval_jaxpr
from ..tree import registry as tree_util_registry
from .config_states import debug_infs, debug_nans, enable_x64  # noqa: F401  (top-level names)
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
    return _live_arrays()


def linear_transpose(fun: Callable[..., Any], *primals: Any, reduce_axes: Any = ()) -> Callable[..., Any]:
    """The transpose of the linear function `fun` at inputs shaped like `primals` (arrays or ShapeDtypeStructs):
    a function from output cotangents to a tuple of input cotangents."""
    from .. import numpy as jnp

    zeros = tree_map(lambda p: p if isinstance(p, Array) else np.zeros(p.shape, p.dtype)
                     if hasattr(p, "shape") and hasattr(p, "dtype") else jnp.zeros_like(p), primals)
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


# ---- small top-level names -----------------------------------------------------------------------------------------


class CompilerEffortLevel(enum.Enum):
    """How hard XLA optimises (accepted for compatibility: meshax compiles nothing)."""
    UNKNOWN = 0
    O0 = 9
    O1 = 19
    O2 = 29
    O3 = 39


class Inline(enum.Enum):
    """When a jitted call is inlined into its caller (accepted for compatibility: meshax inlines every call)."""
    JAX_EARLY = "jax_early"
    JAX_LATE = "jax_late"
    XLA_EARLY = "xla_early"
    XLA_LATE = "xla_late"
    AUTO = "auto"


class MemorySpace(enum.Enum):
    """Where a value lives (jax.memory.Space): meshax keeps every value in host memory."""
    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()


memory = types.SimpleNamespace(Space=MemorySpace)


class DontWant:
    """jax.ad marker: a derivative that is not wanted."""

    def __repr__(self) -> str:
        return "DontWant()"


class DidntWant:
    """jax.ad marker: a derivative that was not wanted."""

    def __repr__(self) -> str:
        return "DidntWant()"


class GradRef:
    """jax.ad marker: a derivative accumulated into a Ref."""


class GradValue:
    """jax.ad marker: a derivative returned as a value."""


ad = types.SimpleNamespace(DontWant=DontWant, DidntWant=DidntWant, GradRef=GradRef, GradValue=GradValue)


def copy_to_host_async(x: Any) -> Any:
    """Start copying `x`'s buffers to the host: meshax's buffers are host memory already, so `x` comes back."""
    return x


def get_mesh() -> Any:
    """The mesh set with `jax.set_mesh` (or entered with `with mesh:`); an empty Mesh without one."""
    from ..sharding.mesh import Mesh, current_mesh

    mesh = current_mesh()
    if mesh is not None:
        return mesh
    empty = object.__new__(Mesh)
    empty.__dict__.update(devices=np.empty((0,), dtype=object), axis_names=(), axis_types=(), shape={}, _flat=[],
                          _position={}, _key=((), (0,), (), ()), _hash=hash(((), (0,), (), ())))
    return empty


# ---- dynamic slices and refs (jax.ds, jax.ref) -----------------------------------------------------------------


@tree_util_registry.register_pytree_node_class
class Slice:
    """`size` elements from `start` (an int or a traced integer) every `stride` (as jax.ds makes)."""

    def __init__(self, start: Any, size: Any, stride: int = 1) -> None:
        if not isinstance(stride, int) or stride < 0:
            raise ValueError(f"Slice stride must be a non-negative int; got {stride!r}.")
        self.start, self.size, self.stride = start, size, stride

    def tree_flatten(self) -> tuple[tuple, tuple]:
        return (), (self.start, self.size, self.stride)

    @classmethod
    def tree_unflatten(cls, aux: tuple, children: tuple) -> "Slice":
        return cls(*aux)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Slice) and (self.start, self.size, self.stride) == (other.start, other.size,
                                                                                     other.stride)

    __hash__ = None  # type: ignore[assignment]  (as JAX's: its start may be an array)

    def __repr__(self) -> str:
        return f"Slice(start={self.start!r}, size={self.size!r}, stride={self.stride!r})"

    def as_index(self) -> Any:
        """A Python slice when `start` is a concrete int, else the integer index array of the elements."""
        if isinstance(self.start, (int, np.integer)):
            return slice(int(self.start), int(self.start) + self.size * self.stride, self.stride)
        from .. import numpy as jnp

        return self.start + jnp.arange(self.size, dtype=np.int32) * self.stride


_UNSET = object()


def ds(start: Any, size: Any = _UNSET, stride: int | None = None) -> Any:
    """A dynamic slice for indexing refs: `size` elements from `start` (with one argument: the first `start`);
    `ds(None)` is `slice(None)`."""
    if size is _UNSET:
        return slice(None) if start is None else Slice(0, start, 1 if stride is None else stride)
    return Slice(0 if start is None else start, size, 1 if stride is None else stride)


def plain_index(index: Any) -> Any:
    """`index` as a tuple in which every Slice became what Array indexing takes (Ellipsis for None or ())."""
    if index is None or (isinstance(index, tuple) and not index):
        return ...
    parts = index if isinstance(index, tuple) else (index,)
    return tuple(i.as_index() if isinstance(i, Slice) else i for i in parts)


def ref_get(ref: Any, idx: Any = None) -> Any:
    """The value of `ref[idx]` (the whole value when `idx` is None)."""
    return ref[plain_index(idx)]


def ref_set(ref: Any, idx: Any, value: Any) -> None:
    """`ref[idx] = value`, `value` shaped as `ref[idx]` (the whole Ref when `idx` is None)."""
    _check_value_shape("swap", ref, idx, value)
    ref[plain_index(idx)] = value


def ref_swap(ref: Any, idx: Any, value: Any, _function_name: str = "ref_swap") -> Any:
    """Write `value` at `ref[idx]`; returns what was there."""
    old = ref_get(ref, idx)
    ref_set(ref, idx, value)
    return old


def ref_addupdate(ref: Any, idx: Any, x: Any) -> None:
    """`ref[idx] += x`, `x` shaped as `ref[idx]`."""
    _check_value_shape("addupdate", ref, idx, x)
    ref[plain_index(idx)] = ref_get(ref, idx) + x


def _check_value_shape(what: str, ref: Any, idx: Any, value: Any) -> None:
    """ValueError (as JAX) unless `value` has exactly the shape of `ref[idx]`: refs do not broadcast."""
    expected = tuple(aval_of(ref_get(ref, idx)).shape)
    if tuple(np.shape(value)) != expected:
        raise ValueError(f"Invalid shape for `{what}`. Ref shape: {tuple(ref.shape)}. Expected shape: {expected}. "
                         f"Value shape: {tuple(np.shape(value))}.")


def empty_ref(ty: Any, memory_space: Any = None, pin: bool = False) -> Any:
    """A new Ref of type `ty` (shape and dtype) with unspecified contents, inside a traced function (jit, grad...);
    as in JAX, it cannot be made eagerly."""
    from ..core.core import current_trace, eager_trace
    from ..transforms.refs import new_ref
    from .. import numpy as jnp

    if current_trace() is eager_trace():
        raise NotImplementedError("Evaluation rule for 'empty_ref' not implemented: make an empty Ref inside a "
                                  "jitted function, or use jax.new_ref(initial_value).")
    return new_ref(jnp.zeros(ty.shape, ty.dtype))


def free_ref(ref: Any) -> tuple:
    """Release a Ref made with empty_ref (a no-op in meshax, whose Refs are garbage collected)."""
    from ..transforms.refs import Ref

    if not isinstance(ref, Ref):
        raise TypeError(f"free_ref takes a Ref; got {type(ref).__name__}.")
    return ()


# ---- transformations: fwd_and_bwd, smap ---------------------------------------------------------------------------


def fwd_and_bwd(fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool = False,
                jitted: bool = True) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """`fwd(*args) -> (out, residuals[, aux])` and `bwd(residuals, cotangent)` -> the cotangents of the arguments
    `argnums` (one, or a tuple for a sequence): jax.vjp split in two reusable (by default jitted) functions."""
    from ..transforms.jit import jit

    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def fwd(*args: Any) -> tuple:
        def of_wanted(*wanted: Any) -> Any:
            full = list(args)
            for i, value in zip(nums, wanted):
                full[i] = value
            return fun(*full)

        return vjp(of_wanted, *[args[i] for i in nums], has_aux=has_aux)

    def bwd(residuals: Any, cotangent: Any) -> Any:
        cotangents = residuals(cotangent)
        return cotangents[0] if isinstance(argnums, int) else cotangents

    return (jit(fwd), jit(bwd)) if jitted else (fwd, bwd)


class _InferFromArgs:
    def __repr__(self) -> str:
        return "jax.sharding.Infer"


Infer = _InferFromArgs()


def smap(f: Callable[..., Any] | None = None, /, *, in_axes: Any = Infer, out_axes: Any,
         axis_name: Any) -> Any:
    """`f` mapped over mesh axis `axis_name` of the mesh in use (jax.set_mesh): a shard_map manual over that axis
    alone, each argument split along its axis `in_axes` (inferred from Explicit shardings when left out) and each
    result stacked along `out_axes` (None: the same on every shard)."""
    if f is None:
        return functools.partial(smap, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        from ..sharding.mesh import AxisType, current_mesh
        from ..sharding.shardings import PartitionSpec
        from ..transforms.shard_map import shard_map

        mesh = current_mesh()
        if mesh is None:
            raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to enter into a mesh "
                             "context.")
        names = frozenset(axis_name if isinstance(axis_name, (tuple, frozenset, set)) else (axis_name,))
        spec = lambda axis: PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), axis_name)
        if in_axes is Infer:
            if any(mesh.axis_types[mesh.axis_names.index(n)] != AxisType.Explicit for n in names):
                raise TypeError(f"in_axes was not specified when axis_name={names} was of type "
                                f"{mesh.axis_types[mesh.axis_names.index(next(iter(names)))]}; pass in_axes=.")
            in_specs = tree_map(lambda x: spec(_explicit_axis(x, axis_name)), args)
        else:
            per_arg = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
            in_specs = tuple(tree_map(lambda x, a=a: spec(None if a is None else a % max(np.ndim(x), 1)), arg)
                             for arg, a in zip(args, per_arg))
        out_specs = tree_map(spec, out_axes, is_leaf=lambda a: a is None)
        return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, axis_names=set(names))(*args)

    return mapped


def _explicit_axis(x: Any, axis_name: Any) -> int | None:
    """The dimension of `x` split over mesh axis `axis_name` in its type (Explicit sharding), if any."""
    for dim, axes in enumerate(aval_of(x).explicit or ()):
        if axes and axis_name in (axes if isinstance(axes, tuple) else (axes,)):
            return dim
    return None
