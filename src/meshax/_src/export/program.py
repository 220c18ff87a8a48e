"""A jaxpr as serializable data, and back: variables by number, avals, literals, equations by primitive name.

Equations whose parameters hold Python functions (custom_jvp / custom_vjp calls, checkpoint with its policy) are
written as plain calls of their primal program, as jax.export serializes the primal computation: the custom rules
are not kept (an Exported serialized with vjp_order > 0 carries its VJP, traced with them, as its own program).
Host callbacks can't be serialized (NotImplementedError, as in JAX).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.core import Primitive, ShapedArray, abstract_eval_rules, impl_rules
from ..core.jaxpr import ClosedJaxpr, Equation, Jaxpr, Literal, Var
from ..interpreters.staging import inline_rules, staging_rules
from ..sharding.mesh import AbstractMesh, AxisType, Mesh
from ..sharding.shardings import NamedSharding, PartitionSpec
from ..transforms.callbacks import pure_callback_p
from ..transforms.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from ..transforms.debugging import debug_callback_p
from ..transforms.jit import jit_p
from ..transforms.remat import remat_p
from .wire import BlobError, Codec, register_enum

_PRIMAL_CALLS = (custom_jvp_call_p, custom_vjp_call_p, remat_p)  # serialized as jit calls of their primal program
_HOST_CALLBACKS = (pure_callback_p, debug_callback_p)
_PRIMITIVES: dict[str, Primitive] = {}


def _load_primitive_modules() -> None:
    """Import every module that defines primitives, so that a fresh process knows them all by name."""
    from ... import lax, nn, numpy, random, scipy  # noqa: F401
    from ..lax import composite_ops, lax_ops
    from ..nn.image import ResizeMethod
    from ..transforms import checkify, pmap, shard_map  # noqa: F401

    for cls in (AxisType, composite_ops.Precision, composite_ops.GatherScatterMode, lax_ops.RoundingMethod,
                ResizeMethod):
        register_enum(cls)


def primitive_named(name: str) -> Primitive:
    """meshax's primitive called `name`; BlobError if there is none."""
    if name not in _PRIMITIVES:  # first use, or a primitive of a module imported since: look again
        if not _PRIMITIVES:
            _load_primitive_modules()
        for table in (abstract_eval_rules, impl_rules, inline_rules, staging_rules):
            for primitive in table:
                _PRIMITIVES.setdefault(primitive.name, primitive)
    try:
        return _PRIMITIVES[name]
    except KeyError:
        raise BlobError(f"deserialize: the blob uses the primitive {name!r}, which this meshax does not have; "
                        "serialize it again with this meshax version.") from None


class _ProgramWriter:
    """Numbers the variables of one jaxpr (nested jaxprs get their own writer)."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.ids: dict[int, int] = {}

    def bind(self, var: Var) -> list[Any]:
        self.ids[var.id] = len(self.ids)
        return [self.ids[var.id], encode_aval(self.codec, var.aval)]

    def atom(self, x: Any, where: str) -> Any:
        if isinstance(x, Literal):
            return {"literal": [self.codec.encode(x.value, where), encode_aval(self.codec, x.aval)]}
        try:
            return self.ids[x.id]
        except KeyError:
            raise ValueError(f"export: {where} reads a variable the program never defines; the jaxpr is "
                             "malformed.") from None

    def jaxpr(self, jaxpr: Jaxpr) -> dict[str, Any]:
        return {"constvars": [self.bind(v) for v in jaxpr.constvars],
                "invars": [self.bind(v) for v in jaxpr.invars],
                "eqns": [self.equation(eq) for eq in jaxpr.equations],
                "outvars": [self.atom(v, "an output") for v in jaxpr.outvars],
                "consts": [self.codec.encode(host_value(c, v.aval), "a captured constant")
                           for c, v in zip(jaxpr.consts, jaxpr.constvars)]}

    def equation(self, eq: Equation) -> list[Any]:
        primitive, params = eq.primitive, eq.params
        if primitive in _HOST_CALLBACKS:
            raise NotImplementedError(f"serialization of host_callbacks is not yet implemented: the program calls "
                                      f"{primitive.name}, whose Python function can't be written into the blob; "
                                      "export a function without host callbacks (as in jax.export).")
        if primitive in _PRIMAL_CALLS:
            name = getattr(getattr(params.get("call"), "fun", None), "__name__", primitive.name)
            primitive, params = jit_p, {"jaxpr": params["jaxpr"], "name": name}
        where = f"the parameter {{}} of {primitive.name}"
        inputs = [self.atom(x, f"an input of {primitive.name}") for x in eq.inputs]
        encoded = {k: self.codec.encode(v, where.format(k)) for k, v in params.items()}
        return [primitive.name, inputs, [self.bind(v) for v in eq.outputs], encoded]


def host_value(value: Any, aval: ShapedArray) -> np.ndarray:
    """A captured constant as a NumPy array of its type's dtype (an Array is gathered from its devices; a NumPy
    int64 constant becomes the int32 its type says when x64 is off)."""
    return np.asarray(value, dtype=aval.dtype)


class _ProgramReader:
    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.vars: dict[int, Var] = {}

    def bind(self, data: list[Any]) -> Var:
        number, aval = data
        var = self.vars[number] = Var(decode_aval(self.codec, aval))
        return var

    def atom(self, data: Any) -> Any:
        if isinstance(data, dict) and "literal" in data:
            value, aval = data["literal"]
            return Literal(self.codec.decode(value), decode_aval(self.codec, aval))
        try:
            return self.vars[data]
        except (KeyError, TypeError):
            raise BlobError(f"deserialize: the program reads an undefined variable {data!r}; the blob is "
                            "corrupt.") from None

    def jaxpr(self, data: dict[str, Any]) -> Jaxpr:
        try:
            constvars = [self.bind(v) for v in data["constvars"]]
            invars = [self.bind(v) for v in data["invars"]]
            equations = [self.equation(*eq) for eq in data["eqns"]]
            outvars = [self.atom(v) for v in data["outvars"]]
            consts = [self.codec.decode(c) for c in data["consts"]]
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as error:
            if isinstance(error, BlobError):
                raise
            raise BlobError(f"deserialize: the program in the blob is malformed ({error!r}); it is corrupt.") \
                from None
        return Jaxpr(constvars, invars, equations, outvars, consts)

    def equation(self, name: str, inputs: list[Any], outputs: list[Any], params: dict[str, Any]) -> Equation:
        primitive = primitive_named(name)
        inputs = [self.atom(x) for x in inputs]
        decoded = {k: self.codec.decode(v) for k, v in params.items()}
        return Equation(primitive, inputs, [self.bind(v) for v in outputs], decoded)


def encode_aval(codec: Codec, aval: ShapedArray) -> dict[str, Any]:
    data = {"shape": list(aval.shape), "dtype": codec.encode(np.dtype(aval.dtype))}
    if aval.weak_type:
        data["weak"] = True
    for name in ("vma", "unreduced", "reduced"):
        if getattr(aval, name):
            data[name] = sorted(getattr(aval, name))
    if aval.explicit:
        data["explicit"] = codec.encode(aval.explicit)
        data["mesh"] = codec.encode(aval.mesh)
    return data


def decode_aval(codec: Codec, data: dict[str, Any]) -> ShapedArray:
    try:
        shape = tuple(int(n) for n in data["shape"])
        if any(n < 0 for n in shape):
            raise ValueError(f"negative dimension in {shape}")
        return ShapedArray(shape, codec.decode(data["dtype"]), bool(data.get("weak", False)),
                           frozenset(data.get("vma", ())), codec.decode(data.get("explicit", {"tuple": []})),
                           codec.decode(data.get("mesh")), frozenset(data.get("unreduced", ())),
                           frozenset(data.get("reduced", ())))
    except (KeyError, IndexError, TypeError, ValueError) as error:
        if isinstance(error, BlobError):
            raise
        raise BlobError(f"deserialize: a type in the blob is malformed ({error!r}); it is corrupt.") from None


# ---- meshes and shardings ----


def _encode_mesh(codec: Codec, mesh: Mesh) -> dict[str, Any]:
    return {"shape": list(mesh.devices.shape), "names": list(mesh.axis_names),
            "devices": [d.id for d in mesh.devices.flat], "types": [t.name for t in mesh.axis_types]}


def _decode_mesh(codec: Codec, data: dict[str, Any]) -> Mesh:
    from ..runtime.devices import devices

    by_id = {d.id: d for d in devices()}
    missing = [i for i in data["devices"] if i not in by_id]
    if missing:
        raise BlobError(f"deserialize: the exported program runs on a mesh of devices {data['devices']}, and this "
                         f"job has no devices {missing}; run it in a job with {len(data['devices'])} devices or "
                         "more (MESHAX_NUM_CPU_DEVICES, or more processes).")
    grid = np.array([by_id[i] for i in data["devices"]], dtype=object).reshape(data["shape"])
    return Mesh(grid, tuple(data["names"]), tuple(AxisType[t] for t in data["types"]))


def _encode_abstract_mesh(codec: Codec, mesh: AbstractMesh) -> dict[str, Any]:
    return {"sizes": list(mesh.axis_sizes), "names": list(mesh.axis_names), "types": [t.name for t in mesh.axis_types]}


def _decode_abstract_mesh(codec: Codec, data: dict[str, Any]) -> AbstractMesh:
    return AbstractMesh(tuple(data["sizes"]), tuple(data["names"]), tuple(AxisType[t] for t in data["types"]))


def _encode_spec(codec: Codec, spec: PartitionSpec) -> list[Any]:
    return [codec.encode(tuple(spec)), sorted(spec.unreduced), sorted(spec.reduced)]


def _decode_spec(codec: Codec, data: list[Any]) -> PartitionSpec:
    return PartitionSpec(*codec.decode(data[0]), unreduced=frozenset(data[1]), reduced=frozenset(data[2]))


def _encode_sharding(codec: Codec, sharding: NamedSharding) -> list[Any]:
    return [_encode_mesh(codec, sharding.mesh), _encode_spec(codec, sharding.spec)]


def _decode_sharding(codec: Codec, data: list[Any]) -> NamedSharding:
    return NamedSharding(_decode_mesh(codec, data[0]), _decode_spec(codec, data[1]))


def _encode_closed(codec: Codec, closed: ClosedJaxpr) -> dict[str, Any]:
    return _ProgramWriter(codec).jaxpr(closed.jaxpr)


def program_codec(buffers: list[Any] | None = None) -> Codec:
    """A codec that also knows jaxprs, meshes, partition specs and named shardings."""
    return Codec(buffers, {
        "jaxpr": (Jaxpr, lambda c, j: _ProgramWriter(c).jaxpr(j), lambda c, d: _ProgramReader(c).jaxpr(d)),
        "closed_jaxpr": (ClosedJaxpr, _encode_closed, lambda c, d: ClosedJaxpr(_ProgramReader(c).jaxpr(d))),
        "aval": (ShapedArray, encode_aval, decode_aval),
        "named_sharding": (NamedSharding, _encode_sharding, _decode_sharding),
        "pspec": (PartitionSpec, _encode_spec, _decode_spec),
        "mesh": (Mesh, _encode_mesh, _decode_mesh),
        "abstract_mesh": (AbstractMesh, _encode_abstract_mesh, _decode_abstract_mesh),
    })


def encode_program(codec: Codec, jaxpr: Jaxpr) -> dict[str, Any]:
    return _ProgramWriter(codec).jaxpr(jaxpr)


def decode_program(codec: Codec, data: dict[str, Any]) -> Jaxpr:
    return _ProgramReader(codec).jaxpr(data)
