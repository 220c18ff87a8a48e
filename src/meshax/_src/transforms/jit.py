"""jit: trace a function once per input signature into a Jaxpr, then evaluate the Jaxpr.

A call binds `jit_p` with the captured values (closure conversion) and the arguments.
A staging trace records it as one equation (printed by make_jaxpr); every other trace
expands it in place (`inline_rules`): eagerly, each equation runs partitioned over the
inputs' meshes; under grad or inside shard_map, each goes through that trace's rules.
Python side effects of the function therefore happen once, when it is traced.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import threading
import weakref
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..arrays.placement import check_committed_devices, device_put, host_value
from ..arrays.formats import shardings_of_formats
from .stages import Traced
from ..arrays.array import Array
from ..core.core import Primitive, Tracer, abstract_eval_rules, aval_of, keeps_own_vma, vma_rules
from ..interpreters.eager import eager_rules, plain_eager_call
from ..interpreters import kernel_compiler
from ..interpreters.eager_programs import run_eagerly
from ..interpreters.numpy_eval import direct_call, host, structured_rules
from ..interpreters.numpy_eval import program as numpy_program
from ..interpreters.staging import consts_as_inputs, inline_rules, trace_to_jaxpr
from ..core.jaxpr import Jaxpr, eval_jaxpr
from ..sharding.mesh import AxisType, Mesh, current_mesh
from ..runtime import devices as device_table
from ..runtime.denormals import flushed
from ..runtime.numpy_errors import silenced
from ..arrays.partition import choose_mesh, sharding_for
from .jit_fast import MISS, FastCall
from .refs import Ref, unwrapped
from . import residual_origins
from ..runtime.history import note as note_call
from ..sharding.placement_rules import replicated
from ..sharding.shardings import NamedSharding, PartitionSpec, Sharding
from ..arrays.transfer import from_host
from ..profiler import recorder
from ..tree.tree_util import keystr, tree_flatten, tree_flatten_with_path, tree_map, tree_unflatten


def _as_tuple(x: Any) -> tuple[Any, ...]:
    if x is None:
        return ()
    return (x,) if isinstance(x, (int, str)) else tuple(x)


class _JitState(threading.local):
    def __init__(self) -> None:
        self.disabled = False


_jit_state = _JitState()


def jit_disabled() -> bool:
    return _jit_state.disabled


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the block, jitted functions run their Python code eagerly (values are the same)."""
    previous, _jit_state.disabled = _jit_state.disabled, disable
    try:
        yield
    finally:
        _jit_state.disabled = previous


def _call_signature(leaf: Any) -> Any:
    """A leaf's part of a call's cache key: its type, or ("Ref", its value's type) for an array Ref."""
    if type(leaf) is Array:  # the common case, read without making its type: the same tuple as _signature_of's
        return (leaf._shape, leaf._dtype, leaf.weak_type, leaf._sharding)
    return ("Ref", _signature_of(leaf._value)) if isinstance(leaf, Ref) else _signature_of(leaf)


def _direct_kinds(inputs: Sequence[Any]) -> tuple:
    """What a call's direct function depends on beyond its signature: each Array's commitment, each other
    input's type."""
    return tuple([x.committed if type(x) is Array else type(x) for x in inputs])


def _signature_of(leaf: Any) -> Any:
    try:
        aval = aval_of(leaf)
    except TypeError:
        raise TypeError(f"jit: argument {leaf!r} of type {type(leaf).__name__} is not an array or number; pass it "
                        "as a static argument (static_argnums / static_argnames).") from None
    sharding = leaf.sharding if isinstance(leaf, Array) else None
    return (aval.shape, aval.dtype, aval.weak_type, sharding)


TRACES_KEPT = 1024  # per jitted function: traced programs (a few KB each) for this many call signatures


class Jitted:
    """A function compiled (traced) once per signature of its arguments; at most TRACES_KEPT traces are kept,
    the oldest forgotten first."""

    def __init__(self, fun: Callable[..., Any], in_shardings: Any, out_shardings: Any,
                 static_argnums: Sequence[int], static_argnames: Sequence[str], donate_argnums: Sequence[int],
                 donate_argnames: Sequence[str] = ()) -> None:
        self.fun = fun
        self.in_shardings = in_shardings = shardings_of_formats(in_shardings)
        self.out_shardings = out_shardings = shardings_of_formats(out_shardings)
        self.static_argnums = tuple(static_argnums)
        self.static_argnames = tuple(static_argnames)
        self.donate_argnums = tuple(donate_argnums)
        self.donate_argnames = tuple(donate_argnames)
        self._cache = _cache_of(fun, (_hashable(in_shardings), _hashable(out_shardings), self.static_argnums,
                                      self.static_argnames, self.donate_argnums))
        self._entries: dict[Any, str] = {}  # call signature -> how a call is recorded in the history
        self._direct: dict[Any, tuple] = {}  # call signature -> (_direct_kinds, mesh in use, numpy_eval.direct_call)
        self._fast: FastCall | None = None  # the last call, repeated without the general path's work
        functools.update_wrapper(self, fun, updated=())  # not fun.__dict__ (a wrapped Jitted's state)

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict, tuple, tuple]:
        if not self.static_argnums and not self.static_argnames:
            return args, kwargs, (), ()
        count = len(args)
        static = sorted({i % count for i in self.static_argnums if -count <= i < count})
        static_positional = tuple((i, args[i]) for i in static)
        static_named = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames))
        dynamic_args = tuple(a for i, a in enumerate(args) if i not in static)
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return dynamic_args, dynamic_kwargs, static_positional, static_named

    def _flatten(self, dynamic_args: tuple, dynamic_kwargs: dict) -> tuple[list[Any], Any]:
        """The leaves and tree structure of the dynamic arguments, placed as in_shardings says."""
        if self.in_shardings is not None:
            dynamic_args = _apply_shardings(dynamic_args, self.in_shardings, "in_shardings")
        return tree_flatten((dynamic_args, dynamic_kwargs))

    def _prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, list[Any], bool]:
        """The cache key of a call (tree structure, leaf signatures, static values), its dynamic leaves, and
        whether it was traced now."""
        dynamic_args, dynamic_kwargs, static_positional, static_named = self._split(args, kwargs)
        leaves, structure = self._flatten(dynamic_args, dynamic_kwargs)
        key = (structure, tuple(_call_signature(x) for x in leaves), static_positional, static_named)
        try:
            traced = self._cache.get(key)
        except TypeError as error:
            raise ValueError(f"jit: static arguments must be hashable ({error}); pass them as static_argnums.") from None
        if traced is None:
            traced = self._trace(structure, leaves, static_positional, static_named)
            if any(isinstance(c, Tracer) for c in traced[1]):  # captured tracers of an enclosing trace
                return (key, traced), leaves, False
            if len(self._cache) >= TRACES_KEPT:  # forget the oldest signature: a program called with ever new
                del self._cache[next(iter(self._cache))]  # shapes must not grow without bound
            self._cache[key] = traced
            return (key, traced), leaves, True
        return (key, traced), leaves, False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if jit_disabled():
            return self.fun(*args, **kwargs)
        if self._fast is not None:
            with flushed, silenced:
                outputs = self._fast((args, kwargs))
            if outputs is not MISS:
                return outputs
        key, leaves, first = self._prepare(args, kwargs)
        if first:  # the numba kernels it asks for compile once the call is over
            with kernel_compiler.deferred(), flushed, silenced:
                outputs = self._run(key, leaves)
        else:
            with flushed, silenced:  # subnormals flush to zero and NumPy warns of nothing, as XLA's CPU (runtime/)
                outputs = self._run(key, leaves)
        if self.donate_argnums or self.donate_argnames:
            self._delete_donated(args, kwargs, outputs)
        return outputs

    def _delete_donated(self, args: tuple, kwargs: dict[str, Any], outputs: Any) -> None:
        """Delete the donated Arrays (JAX reuses their buffers for the outputs: reading them afterwards raises);
        an Array the call returns as it is stays."""
        donated = [args[i] for i in self.donate_argnums if -len(args) <= i < len(args)]
        donated += [kwargs[name] for name in self.donate_argnames if name in kwargs]
        returned = {id(leaf) for leaf in tree_flatten(outputs)[0]}
        for leaf in tree_flatten(donated)[0]:
            if isinstance(leaf, Array) and id(leaf) not in returned and not leaf.is_deleted():
                leaf.delete()

    def _run(self, key: tuple, leaves: list[Any]) -> Any:
        """Evaluate the program traced for `key`. Host values it returns (constants, inputs passed through) become
        Arrays replicated over the mesh the call runs on, as jax.jit returns them."""
        _, (jaxpr, consts, out_structure) = key
        refs = [leaf for leaf in leaves if isinstance(leaf, Ref)]
        leaves = unwrapped(leaves)
        check_committed_devices(leaves, getattr(self.fun, "__name__", "fun"))
        if device_table.process_count() > 1:
            self._note_call(key[0], leaves)
        outputs = self._bind(key[0], jaxpr, [*consts, *leaves], refs)
        self._fast = self._fast_call(key[0], jaxpr, consts, leaves, outputs, out_structure) if not refs else None
        if refs:  # the Refs' final values come last: write them into the caller's Refs
            for ref, value in zip(refs, outputs[len(outputs) - len(refs):]):
                ref._value = value
            outputs = outputs[:len(outputs) - len(refs)]
        if not all(isinstance(value, (Array, Tracer)) for value in outputs):
            mesh = choose_mesh(leaves)
            committed = any(isinstance(x, Array) and x.committed for x in leaves)
            outputs = [_as_output(value, mesh, committed) for value in outputs]
        outputs = tree_unflatten(out_structure, [_as_compiled_output(value) for value in outputs])
        if self.out_shardings is not None:
            outputs = _apply_shardings(outputs, self.out_shardings, "out_shardings")
        return outputs

    def _fast_call(self, signature: tuple, jaxpr: Jaxpr, consts: Sequence[Any], leaves: list[Any],
                   outputs: list[Any], out_structure: Any) -> FastCall | None:
        """The FastCall repeating this call (jit_fast.py), where it ran directly on one device's values with
        Arrays alone for arguments and results and nothing else to do (no static, donated or placed arguments,
        one process, results' shardings as compiled programs report them)."""
        found = self._direct.get(signature)
        if found is None or found[0] != _direct_kinds([*consts, *leaves]) or found[1] is not current_mesh() or \
                not plain_eager_call() or self.static_argnums or self.static_argnames or self.donate_argnums or \
                self.donate_argnames or self.in_shardings is not None or self.out_shardings is not None or \
                device_table.process_count() > 1 or any(type(leaf) is not Array for leaf in leaves) or \
                any(type(value) is not Array or _as_compiled_output(value) is not value for value in outputs):
            return None
        call = found[2]
        run = functools.partial(numpy_program(jaxpr), ())  # structured_rules[jit_p], its program bound
        return FastCall.make(signature[0], leaves, [host(c) for c in consts], run, call.templates, call.device,
                             out_structure)

    def _bind(self, signature: tuple, jaxpr: Jaxpr, inputs: list[Any], refs: list[Ref]) -> list[Any]:
        """jit_p.bind of the program on `inputs`; where the eager trace would run it on one device's NumPy values
        (numpy_eval.try_primitive), the function doing that for this signature, its checks made once (a tiny
        optax adam step: 144 -> 119 us)."""
        params = {"jaxpr": jaxpr, "name": getattr(self.fun, "__name__", "fun")}
        if refs or not plain_eager_call():
            return jit_p.bind(*inputs, **params)
        found = self._direct.get(signature)
        kinds = _direct_kinds(inputs)
        if found is not None and found[0] == kinds and found[1] is current_mesh():
            return found[2](inputs)
        call = direct_call(jit_p, inputs, params) if not any(isinstance(x, Tracer) for x in inputs) else None
        if call is None:
            return jit_p.bind(*inputs, **params)
        if len(self._direct) >= TRACES_KEPT:
            del self._direct[next(iter(self._direct))]
        self._direct[signature] = (kinds, current_mesh(), call)
        return call(inputs)

    def _note_call(self, signature: tuple, leaves: list[Any]) -> None:
        """Record the call in the history of the processes its arrays span, so that a process that skips a
        jitted step (even one that does not communicate) is caught at their next communication."""
        processes: set[int] = set()
        for leaf in leaves:
            if isinstance(leaf, Array) and leaf.committed:
                processes |= _processes_of(leaf.sharding)
        if len(processes) > 1:
            entry = self._entries.get(signature)
            if entry is None:
                if len(self._entries) >= TRACES_KEPT:
                    del self._entries[next(iter(self._entries))]
                shapes = ";".join(f"{leaf.shape}{leaf.dtype}" for leaf in leaves if isinstance(leaf, Array))
                entry = self._entries[signature] = f"jit {getattr(self.fun, '__name__', 'fun')} {shapes}"
            note_call(sorted(processes), entry)

    def _trace(self, structure: Any, leaves: list[Any], static_positional: tuple, static_named: tuple) -> tuple:
        out_structure = []

        is_ref = [isinstance(leaf, Ref) for leaf in leaves]

        def flat_fun(*flat: Any) -> list[Any]:
            refs = [Ref(x) for x, ref in zip(flat, is_ref) if ref]  # this trace's Refs, holding its values
            it = iter(refs)
            flat = [next(it) if ref else x for x, ref in zip(flat, is_ref)]
            dynamic_args, dynamic_kwargs = tree_unflatten(structure, list(flat))
            args = list(dynamic_args)
            for index, value in static_positional:
                args.insert(index, value)
            result = self.fun(*args, **dynamic_kwargs, **dict(static_named))
            _check_outputs(self.fun, result)
            out_leaves, tree = tree_flatten(result)
            out_structure.append(tree)
            return out_leaves + [ref._value for ref in refs]

        avals = [aval_of(x) for x in unwrapped(leaves)]
        begin = recorder.now() if recorder.on else 0
        jaxpr, _ = trace_to_jaxpr(flat_fun, avals)
        if begin:
            recorder.add(f"trace jit({getattr(self.fun, '__name__', 'fun')})", "compile", None, begin, recorder.now(),
                         {"equations": len(jaxpr.equations)})
        return consts_as_inputs(jaxpr), list(jaxpr.consts), out_structure[0]

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        """The program traced for these arguments (a jax.stages.Traced: `.jaxpr`, `.out_info`, `.lower()`)."""
        key, _, _ = self._prepare(args, kwargs)
        return Traced(self, key)

    @staticmethod
    def _signatures(leaves: list[Any]) -> list[Any]:
        """The leaves' parts of a call's cache key."""
        return [_call_signature(x) for x in leaves]

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The program traced for these arguments; `.compile()` makes it callable on arguments like them."""
        return self.trace(*args, **kwargs).lower()

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The results' types for these arguments (ShapeDtypeStructs), from the traced program."""
        return self.trace(*args, **kwargs).out_info

    def __get__(self, instance: Any, owner: Any) -> Any:
        return self if instance is None else functools.partial(self, instance)


# One cache of traced programs per function and jit options, shared by every `jit(f)` of the same `f` (as in
# JAX: a fresh `jax.jit(f)` reuses the programs traced for `f`, values of globals included).
_caches: "weakref.WeakKeyDictionary[Any, dict[Any, dict]]" = weakref.WeakKeyDictionary()


def _cache_of(fun: Callable[..., Any], options: Any) -> dict[Any, tuple[Jaxpr, list[Any], Any]]:
    """The traced programs of `fun` under jit `options` (a private cache where `fun` or the options can't be keys)."""
    while isinstance(fun, Jitted):  # jit(jit(f)) runs f's program: it shares f's cache
        fun = fun.fun
    try:
        per_function = _caches.setdefault(fun, {})
        return per_function.setdefault(options, {})
    except TypeError:  # not weakly referable, not hashable, or options not hashable
        return {}


def forget_traces() -> None:
    """Empty every function's shared cache of traced programs (jax.clear_caches)."""
    for per_function in list(_caches.values()):
        for cache in per_function.values():
            cache.clear()


def clear_caches() -> None:
    """Forget every traced program (jit and shard_map re-trace on their next call)."""
    forget_traces()
    for obj in gc.get_objects():
        if isinstance(obj, Jitted):
            obj._cache.clear()


def _hashable(value: Any) -> Any:
    """`value` if it can be a dictionary key, else a marker that no other value equals."""
    try:
        hash(value)
        return value
    except TypeError:
        return object()


@functools.lru_cache(maxsize=1024)
def _processes_of(sharding: Sharding) -> frozenset[int]:
    return frozenset(d.process_index for d in sharding.device_set)


jit_p = Primitive("jit", multiple_results=True)
abstract_eval_rules[jit_p] = lambda *avals, jaxpr, name: [v.aval for v in jaxpr.outvars]


def _inline(*args: Any, jaxpr: Jaxpr, name: str) -> list[Any]:
    """The program's equations, in the current trace."""
    if residual_origins.recording:  # print_saved_residuals describes what they stage as the function's outputs
        with residual_origins.jitted_call(name):
            return eval_jaxpr(jaxpr, (), args)
    return eval_jaxpr(jaxpr, (), args)


inline_rules[jit_p] = _inline
vma_rules[jit_p] = keeps_own_vma
structured_rules[jit_p] = lambda run, *args, jaxpr, name: run(jaxpr, (), args)
eager_rules[jit_p] = lambda *args, jaxpr, name: run_eagerly(jaxpr, args)  # the simplified, fused program


def _describe(structure: Any, signature: tuple) -> str:
    avals = ", ".join(f"{dtype.name}{list(shape)}{' weak' if weak else ''}{f' on {sharding}' if sharding else ''}"
                      for shape, dtype, weak, sharding in signature)
    return f"arguments {structure} of types ({avals})"


def _check_outputs(fun: Callable[..., Any], result: Any) -> None:
    for path, leaf in tree_flatten_with_path(result)[0]:
        try:
            aval_of(leaf)
        except TypeError:
            raise TypeError(
                f"jit: {getattr(fun, '__name__', fun)} returned {leaf!r} of type {type(leaf).__name__} at output"
                f"{keystr(path) or ' (the whole result)'}, which is not an array or a number; return only arrays, "
                "numbers and pytrees of them from a jitted function."
            ) from None


def _as_output(value: Any, mesh: Mesh, committed: bool) -> Any:
    if not isinstance(value, (np.ndarray, np.generic, bool, int, float, complex)):
        return value
    host, weak = host_value(value)
    return from_host(host, sharding_for(mesh, replicated(host.ndim)), weak, committed)


def _as_compiled_output(value: Any) -> Any:
    """A result over Auto mesh axes, its spec as JAX's compiled programs report one: without trailing replicated
    dimensions (P('X',) for P('X', None)); results typed over Explicit axes keep their type's spec."""
    sharding = getattr(value, "sharding", None) if isinstance(value, Array) else None
    if not isinstance(sharding, NamedSharding) or not sharding.spec or sharding.spec[-1] is not None \
            or any(t is not AxisType.Auto for t in sharding.mesh.axis_types):
        return value
    spec = sharding.spec
    parts = list(spec)
    while parts and parts[-1] is None:
        parts.pop()
    canonical = NamedSharding(sharding.mesh, PartitionSpec(*parts, unreduced=spec.unreduced, reduced=spec.reduced),
                              memory_kind=sharding.memory_kind)
    return Array(value.shape, value.dtype, canonical, value.local_buffers(), value.weak_type)


def _is_placement(target: Any) -> bool:
    return target is None or isinstance(target, (Sharding, PartitionSpec))


def _apply_shardings(tree: Any, shardings: Any, what: str) -> Any:
    """`tree` placed as jit's `what` (in_shardings or out_shardings) says: one Sharding or PartitionSpec for all of
    it, or a tree of them that is a prefix of `tree` (None leaves a subtree as it is); a PartitionSpec is a leaf,
    on the mesh set with set_mesh/use_mesh."""
    if what == "in_shardings" and isinstance(shardings, list):
        shardings = tuple(shardings)  # one per positional argument, as a list or a tuple
    targets, structure = tree_flatten(shardings, is_leaf=_is_placement)
    try:
        parts = structure.flatten_up_to(tree)
    except ValueError as error:
        values = "positional arguments" if what == "in_shardings" else "outputs"
        raise ValueError(f"jit {what} {structure} does not match the {values} {tree_flatten(tree)[1]}: give one "
                         f"Sharding or PartitionSpec for all of them, or a tree of them that is a prefix of their "
                         f"tree ({error}).") from None
    placed = [part if target is None else device_put(part, _on_context_mesh(target, what))
              for target, part in zip(targets, parts)]
    return tree_unflatten(structure, placed)


def _on_context_mesh(target: Any, what: str) -> Any:
    """A PartitionSpec as a NamedSharding on the mesh in context; other targets as they are."""
    if not isinstance(target, PartitionSpec):
        return target
    mesh = current_mesh()
    if mesh is None:
        raise RuntimeError(f"jit got the PartitionSpec {target!r} in {what} but no mesh is in context to place it on; "
                           "call it inside `with jax.set_mesh(mesh):` (or use_mesh), or pass "
                           "NamedSharding(mesh, spec) instead.")
    return NamedSharding(mesh, target)


def jit(fun: Callable[..., Any] | None = None, *, in_shardings: Any = None, out_shardings: Any = None,
        static_argnums: Any = (), static_argnames: Any = (), donate_argnums: Any = (), donate_argnames: Any = (),
        keep_unused: bool = False, device: Any = None, backend: Any = None, inline: bool = False) -> Any:
    """Trace `fun` once per argument signature (shapes, dtypes, shardings, static values) and reuse it."""
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 keep_unused=keep_unused, device=device, backend=backend, inline=inline)
    if not callable(fun):
        raise TypeError(f"jit needs a function; got {type(fun).__name__}.")
    static_argnums, static_argnames = _static_arguments(fun, _as_tuple(static_argnums), _as_tuple(static_argnames))
    donate_argnums, donate_argnames = _donated_arguments(fun, _as_tuple(donate_argnums), _as_tuple(donate_argnames))
    return Jitted(fun, in_shardings, out_shardings, static_argnums, static_argnames, donate_argnums, donate_argnames)


def _donated_arguments(fun: Callable[..., Any], argnums: tuple[int, ...],
                       argnames: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """donate_argnums and donate_argnames, each completed with the other through `fun`'s signature (as in JAX)."""
    names, _ = _positional_parameters(fun)
    argnums = tuple(sorted(set(argnums) | {names.index(n) for n in argnames if n in names}))
    argnames = tuple(sorted(set(argnames) | {names[i] for i in argnums if 0 <= i < len(names)}))
    return argnums, argnames


def _static_arguments(fun: Callable[..., Any], argnums: tuple[int, ...],
                      argnames: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """static_argnums and static_argnames, each completed with the other through `fun`'s signature (as in JAX).
    Negative argnums count from the end: of the signature, or of each call's arguments if `fun` takes *args."""
    names, fixed = _positional_parameters(fun)
    if fixed:
        count = len(names)
        outside = [i for i in argnums if not -count <= i < count]
        if outside:
            raise ValueError(
                f"jit: static_argnums={argnums} names argument {outside[0]}, but {getattr(fun, '__name__', fun)} "
                f"takes only {count} positional arguments; number them from 0 (or from -1 for the last)."
            )
        argnums = tuple(i % count for i in argnums)
    argnums = tuple(sorted(set(argnums) | {names.index(n) for n in argnames if n in names}))
    argnames = tuple(dict.fromkeys(argnames + tuple(names[i] for i in argnums if 0 <= i < len(names))))
    return argnums, argnames


def _positional_parameters(fun: Callable[..., Any]) -> tuple[list[str], bool]:
    """The names of `fun`'s positional parameters, and whether they are all it takes by position (no *args)."""
    try:
        parameters = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return [], False
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names, not any(p.kind is p.VAR_POSITIONAL for p in parameters)


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """Ask for `x` to be laid out as `shardings` (a reshard when run eagerly): one Sharding or PartitionSpec for
    every array, or a tree of them whose structure is that of `x` or a prefix of it."""
    from ..primitives import array_primitives as P

    def is_target(s: Any) -> bool:
        return isinstance(s, (Sharding, PartitionSpec))

    targets, target_structure = tree_flatten(shardings, is_leaf=is_target)
    for target in targets:
        if not is_target(target):
            raise TypeError(f"with_sharding_constraint needs Shardings or PartitionSpecs; got {target!r} of type "
                            f"{type(target).__name__}.")
    try:
        parts = target_structure.flatten_up_to(x)
    except ValueError:
        leaves, structure = tree_flatten(x)
        raise ValueError(
            f"with_sharding_constraint got {len(targets)} shardings shaped {target_structure} for {len(leaves)} "
            f"arrays shaped {structure}, and the trees do not match; pass one sharding, or a tree of shardings with "
            "the structure of the arrays' tree (or a prefix of it)."
        ) from None
    constrained = [tree_map(lambda leaf: P.sharding_constraint.bind(leaf, sharding=target), part)
                   for target, part in zip(targets, parts)]
    return tree_unflatten(target_structure, constrained)
