"""A fast path for eager evaluation on one device: a jaxpr run as plain NumPy calls.

When every input of a jitted program (or of a loop) lives on the same single device, the
eager interpreter's work per operation (choosing a mesh, the sharding rule, placing inputs,
wrapping outputs) buys nothing: the program is evaluated by calling each primitive's NumPy
implementation directly, and only the final results become Arrays. The values are the same
as the eager path's (the same implementations, the same dtype of every intermediate).
Inputs on a one-device mesh (NamedSharding) take it too once the eager path has run the
same call (primitive, parameters, inputs' shapes, types and shardings): its results'
shardings are remembered (`learn`) and given to the fast path's results (a 1x1 training
step's dispatch: 2.2 -> 0.8 ms). A shard_map over a one-device mesh of this process runs here too
(`run_alone`): that device's block of every value is all of it, and each collective over its axes has
the value JAX gives on one device (`alone_rules`); its results land on the mesh (`placing`), so it takes
this path only once the eager path has taught their shardings. Programs with primitives this cannot run
(other collectives, shard_maps over several devices, resharding) take the ordinary path.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, Sequence

import numpy as np

from ..arrays.array import Array, array_template, from_template, read_only
from ..runtime import devices as device_table
from ..core.core import Primitive, abstract_eval, aval_of, impl_rules
from ..core.jaxpr import Jaxpr
from ..sharding.mesh import current_mesh
from ..sharding.shardings import SingleDeviceSharding
from .fusion import executable
from .numpy_program import NumpyProgram, program_of

# primitives with a jaxpr parameter: how to run them here (evaluator, *args, **params) -> outputs
structured_rules: dict[Primitive, Callable[..., list[Any]]] = {}
# of those, the ones whose rule takes only some calls: params -> whether it takes this one (its programs checked too)
structured_applies: dict[Primitive, Callable[[dict[str, Any]], bool]] = {}
# of those, the ones whose results land where their parameters say (a shard_map's mesh), not on the inputs' device
placing: set[Primitive] = set()
# collectives over mesh axes of one device (a shard_map body on a one-device mesh), as NumPy: (evaluator, *args,
# **params) -> outputs; only programs run by `run_alone` have them
alone_rules: dict[Primitive, Callable[..., list[Any]]] = {}


def one_device(args: Sequence[Any]) -> Any:
    """The device of this process that every Array among `args` is on, if there is one (else None); this process's
    default device where `args` hold no Array (NumPy values and Python scalars, which land there)."""
    device = None
    for arg in args:
        if isinstance(arg, Array):
            devices = arg.sharding.device_set
            if len(devices) != 1 or (device is not None and device not in devices):
                return None
            device = next(iter(devices))
    if device is None:
        return device_table.default_device()
    if device.process_index != device_table.process_index():
        return None
    return device


def _call_key(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> tuple:
    """What the shardings of a call's results depend on: the primitive, its parameters, each input's type and
    sharding, and the mesh in use (`set_mesh`); hashing it raises TypeError where a parameter cannot be a key."""
    return (primitive, current_mesh(), tuple((name, _by_identity(value)) for name, value in params.items()),
            tuple((a.shape, a.dtype, a.weak_type, a.sharding, a.committed) if isinstance(a, Array) else
                  (type(a), aval_of(a)) for a in args))


def _by_identity(value: Any) -> Any:
    """A parameter as part of a key: jaxprs (not hashable) by identity."""
    if isinstance(value, Jaxpr):
        return ("jaxpr", id(value))
    return tuple(map(_by_identity, value)) if isinstance(value, tuple) else value


class _Learned:
    """What the eager path taught about one call: each result's (sharding, committed); the call's parameters
    (their jaxprs kept alive, so that their ids in the key stay theirs); and, once the fast path needed them, the
    results' types (the key fixes them: it holds every input's type and the parameters)."""

    __slots__ = ("placements", "params", "avals")

    def __init__(self, placements: list[tuple[Any, bool]], params: dict[str, Any]) -> None:
        self.placements, self.params, self.avals = placements, params, None


_learned: dict[tuple, _Learned] = {}  # call key -> what the eager path taught about the call
MAX_LEARNED = 1024


def _learned_call(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> _Learned | None:
    """What `learn` remembered for this call, or None (its key hashed once: a tiny training step's 23 inputs'
    shardings took a third of this lookup when hashed twice)."""
    try:
        return _learned.get(_call_key(primitive, args, params))
    except TypeError:  # a parameter that cannot be a key
        return None


def learn(primitive: Primitive, args: Sequence[Any], params: dict[str, Any], outputs: Any) -> None:
    """Remember the shardings of the results the eager path gave for a call whose inputs share one device that
    is not a SingleDeviceSharding (the next such call takes the fast path)."""
    device = one_device(args)
    if device is None or all(isinstance(a.sharding, SingleDeviceSharding) for a in args if isinstance(a, Array)):
        return
    outs = outputs if primitive.multiple_results else [outputs]
    if not all(isinstance(o, Array) and o.sharding.device_set == {device} for o in outs):
        return
    key = _call_key(primitive, args, params)
    try:
        hash(key)
    except TypeError:
        return
    if len(_learned) >= MAX_LEARNED:
        _learned.clear()
    _learned[key] = _Learned([(o.sharding, o.committed) for o in outs], params)


def _jaxprs(params: dict[str, Any]) -> list[Jaxpr]:
    found = [v for v in params.values() if isinstance(v, Jaxpr)]
    return found + [j for v in params.values() if isinstance(v, tuple) for j in v if isinstance(j, Jaxpr)]


def supported(jaxpr: Jaxpr, alone: bool = False) -> bool:
    """Whether every equation (recursively) has a NumPy implementation or a structured rule here that takes it and
    places its result nowhere in particular (no `out_sharding`); with `alone`, collectives over axes of one device
    too (a shard_map body on a one-device mesh). Remembered on the jaxpr."""
    attribute = "_numpy_supported_alone" if alone else "_numpy_supported"
    known = getattr(jaxpr, attribute, None)
    if known is None:
        known = all(_takes(eq.primitive, eq.params, alone) for eq in jaxpr.equations)
        setattr(jaxpr, attribute, known)
    return known


def _takes(primitive: Primitive, params: dict[str, Any], alone: bool) -> bool:
    if alone and primitive in alone_rules:
        return True
    if primitive in structured_rules:
        applies = structured_applies.get(primitive)
        return applies(params) if applies is not None else all(supported(j, alone) for j in _jaxprs(params))
    return (primitive in impl_rules and primitive.name != "sharding_constraint"
            and params.get("out_sharding") is None and params.get("sharding") is None)


def places(jaxpr: Jaxpr) -> bool:
    """Whether an equation of `jaxpr` (recursively) places its results (`placing`; remembered on the jaxpr)."""
    known = getattr(jaxpr, "_numpy_places", None)
    if known is None:
        known = jaxpr._numpy_places = any(eq.primitive in placing or any(places(j) for j in _jaxprs(eq.params))
                                          for eq in jaxpr.equations)
    return known


def host(value: Any) -> np.ndarray:
    """An input as the NumPy value an implementation receives (a host scalar in its JAX dtype)."""
    if isinstance(value, Array):
        (buffer,) = value.local_buffers().values()
        return buffer
    if type(value) is np.ndarray and value.dtype in _OWN_TYPES:  # a program's constant, most often
        return value
    return np.asarray(value, dtype=aval_of(value).dtype)


# the dtypes that a NumPy array keeps as its JAX type whatever jax_enable_x64 says
_OWN_TYPES = frozenset(map(np.dtype, ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
                                      "float32", "complex64")))


def program(jaxpr: Jaxpr) -> NumpyProgram:
    """`jaxpr`'s executable program (simplified, elementwise chains fused) as NumPy calls, made once."""
    return program_of(executable(jaxpr), structured_rules, run)


def program_alone(jaxpr: Jaxpr) -> NumpyProgram:
    """`program` for a shard_map body on a one-device mesh: its collectives as `alone_rules` say."""
    return program_of(executable(jaxpr), _with_alone_rules, run_alone, "_numpy_program_alone")


def run(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list[np.ndarray]:
    """Evaluate `jaxpr` on NumPy values (its `program`)."""
    return program(jaxpr)(consts, args)


def run_alone(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list[np.ndarray]:
    """`run` for a shard_map body on a one-device mesh: its collectives as `alone_rules` say."""
    return program_alone(jaxpr)(consts, args)


_with_alone_rules = collections.ChainMap(alone_rules, structured_rules)
# each evaluator a structured rule is given -> the programs it runs (a loop's body compiled into its loop)
programs: dict[Callable[..., list[Any]], Callable[[Jaxpr], NumpyProgram]] = {run: program, run_alone: program_alone}


def as_arrays(values: Sequence[np.ndarray], templates: Sequence[tuple[dict[str, Any], np.dtype]],
              device: Any) -> list[Array]:
    """The results as read-only Arrays on `device`, each of its (array_template, dtype) (`_templates`)."""
    return [from_template(template, {device: read_only(np.asarray(value, dtype))})
            for value, (template, dtype) in zip(values, templates)]


def _templates(avals: Sequence[Any], placements: Sequence[tuple[Any, bool]]) -> list[tuple[dict[str, Any], np.dtype]]:
    return [(array_template(a.shape, a.dtype, sharding, a.weak_type, committed), np.dtype(a.dtype))
            for a, (sharding, committed) in zip(avals, placements)]


def try_primitive(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
    """A call-like primitive (jit, a loop...) run through NumPy when its inputs share one device (on a one-device
    mesh: once the eager path has taught the results' shardings); else None."""
    call = direct_call(primitive, args, params)
    if call is None:
        return None
    outs = call(args)
    return outs if primitive.multiple_results else outs[0]


def direct_call(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]
                ) -> Callable[[Sequence[Any]], list[Array]] | None:
    """How `try_primitive` runs calls like this one (the primitive and parameters, inputs of the same types,
    shardings and commitment, under the same mesh): a function of the inputs giving the results as Arrays, all the
    checks done once; None where such calls run otherwise."""
    device = one_device(args)
    programs = _jaxprs(params)
    if device is None or not _takes(primitive, params, alone=False):
        return None
    if not programs and not any(isinstance(a, Array) for a in args):
        return None  # host values into a function not traced yet (custom_jvp/vjp): it runs as Python, eagerly
    single = (primitive not in placing and not any(places(j) for j in programs)
              and all(isinstance(a.sharding, SingleDeviceSharding) for a in args if isinstance(a, Array)))
    if single:
        avals = abstract_eval(primitive, [aval_of(a) for a in args], params)
        committed = any(isinstance(a, Array) and a.committed for a in args)
        placements = [(SingleDeviceSharding(device), committed)] * len(avals)
    else:
        learned = _learned_call(primitive, args, params)
        if learned is None:
            return None  # the eager path runs it, and learns its results' shardings
        if learned.avals is None:
            learned.avals = abstract_eval(primitive, [aval_of(a) for a in args], params)
        avals, placements = learned.avals, learned.placements
    rule = structured_rules[primitive]
    templates = _templates(avals, placements)

    def call(inputs: Sequence[Any]) -> list[Array]:
        return as_arrays(rule(run, *[host(a) for a in inputs], **params), templates, device)

    # for jit_fast.FastCall: how the results' values become Arrays
    call.templates, call.device = [template for template, _ in templates], device
    return call
