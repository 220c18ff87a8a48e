"""Exported <-> bytes: the fields, trees, shardings and program of an Exported (and of its VJPs) in the blob
format of wire.py."""
from __future__ import annotations

from typing import Any

from ..core.core import abstract_eval
from ..core.jaxpr import ClosedJaxpr, Jaxpr
from ..sharding.shardings import NamedSharding
from .exported import (CALLING_CONVENTION_VERSION, MINIMUM_CALLING_CONVENTION_VERSION, DisabledSafetyCheck,
                       Exported, writers)
from .program import decode_aval, decode_program, encode_aval, encode_program, host_value, program_codec
from .trees import decode_tree, encode_tree
from .wire import BlobError, Codec, pack, unpack


def serialize(exported: Exported, vjp_order: int = 0) -> bytearray:
    """The blob of `exported` and of its VJPs up to order `vjp_order`."""
    if vjp_order < 0:
        raise ValueError(f"serialize: vjp_order must be 0 or more; got {vjp_order}.")
    codec = _codec([])
    return pack(_encode(codec, exported, vjp_order), codec.buffers)


def deserialize(blob: bytearray) -> Exported:
    """The Exported that `serialize` wrote into `blob`; ValueError for a foreign, damaged or newer blob."""
    header, buffers = unpack(blob)
    return _decode(_codec(buffers), header)


def _encode(codec: Codec, exported: Exported, vjp_order: int) -> dict[str, Any]:
    if exported._program is None:
        raise ValueError(f"serialize: the Exported {exported.fun_name} has no program to write.")
    if vjp_order > 0 and not exported.has_vjp():
        raise ValueError(f"serialize: vjp_order={vjp_order} asks for the VJP of {exported.fun_name}, which was "
                         f"deserialized without it; serialize it with vjp_order=0, or export the function again.")
    return {
        "fun_name": exported.fun_name,
        "in_tree": encode_tree(exported.in_tree),
        "out_tree": encode_tree(exported.out_tree),
        "in_avals": [encode_aval(codec, a) for a in exported.in_avals],
        "out_avals": [encode_aval(codec, a) for a in exported.out_avals],
        "in_shardings": [codec.encode(s, "an input sharding") for s in exported._in_named_shardings],
        "out_shardings": [codec.encode(s, "an output sharding") for s in exported._out_named_shardings],
        "nr_devices": exported.nr_devices,
        "platforms": list(exported.platforms),
        "disabled_checks": [str(c) for c in exported.disabled_safety_checks],
        "calling_convention_version": exported.calling_convention_version,
        "module_kept_var_idx": list(exported.module_kept_var_idx),
        "program": encode_program(codec, exported._program),
        "consts": [codec.encode(host_value(c, v.aval), "a captured constant")
                   for c, v in zip(exported._consts, exported._program.invars)],
        "vjp": _encode(codec, exported.vjp(), vjp_order - 1) if vjp_order > 0 else None,
    }


def _decode(codec: Codec, data: dict[str, Any]) -> Exported:
    if not isinstance(data, dict):
        raise BlobError("deserialize: the blob's header is not an Exported; it is corrupt.")
    try:
        version = data["calling_convention_version"]
        if not MINIMUM_CALLING_CONVENTION_VERSION <= version <= CALLING_CONVENTION_VERSION:
            raise BlobError(f"deserialize: the blob has calling convention version {version}, and this meshax "
                            f"supports versions {MINIMUM_CALLING_CONVENTION_VERSION} to "
                            f"{CALLING_CONVENTION_VERSION}; export the function again.")
        in_tree, out_tree = trees_from(data)
        program = decode_program(codec, data["program"])
        consts = tuple(codec.decode(c) for c in data["consts"])
        # as in JAX, a deserialized Exported's types are strong (weak types are not serialized)
        in_avals = tuple(decode_aval(codec, a).update(weak_type=False) for a in data["in_avals"])
        out_avals = tuple(decode_aval(codec, a).update(weak_type=False) for a in data["out_avals"])
        _check_program(program, consts, in_avals, out_avals)
        in_shardings = _shardings(codec, data["in_shardings"], in_avals, in_tree)
        out_shardings = _shardings(codec, data["out_shardings"], out_avals, out_tree)
        vjp = _decode(codec, data["vjp"]) if data["vjp"] is not None else None
        return Exported(
            fun_name=str(data["fun_name"]), in_tree=in_tree, in_avals=in_avals, out_tree=out_tree,
            out_avals=out_avals,
            _in_named_shardings=in_shardings, _out_named_shardings=out_shardings,
            in_shardings_hlo=(None,) * len(in_avals), out_shardings_hlo=(None,) * len(out_avals),
            nr_devices=int(data["nr_devices"]), platforms=tuple(data["platforms"]), ordered_effects=(),
            unordered_effects=(), disabled_safety_checks=tuple(_check(c) for c in data["disabled_checks"]),
            mlir_module_serialized=_text(program, consts).encode(), calling_convention_version=version,
            module_kept_var_idx=tuple(data["module_kept_var_idx"]), uses_global_constants=False,
            _get_vjp=None if vjp is None else (lambda _: vjp), _program=program, _consts=consts)
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as error:
        if isinstance(error, BlobError):
            raise
        raise BlobError(f"deserialize: the blob is malformed ({error!r}); it is corrupt or was not written by "
                        "meshax.export.") from None


def _shardings(codec: Codec, data: list[Any], avals: tuple, tree: Any) -> tuple[NamedSharding | None, ...]:
    """One NamedSharding or None per value of `tree`, checked."""
    shardings = tuple(codec.decode(s) for s in data)
    if len(shardings) != len(avals) or tree.num_leaves != len(avals) or \
            not all(s is None or isinstance(s, NamedSharding) for s in shardings):
        raise BlobError("deserialize: the blob's trees, types and shardings disagree; it is corrupt.")
    return shardings


def trees_from(data: dict[str, Any]) -> tuple[Any, Any]:
    return decode_tree(data["in_tree"]), decode_tree(data["out_tree"])


def _check(name: str) -> DisabledSafetyCheck:
    return DisabledSafetyCheck(str(name))


def _check_program(program: Jaxpr, consts: tuple, in_avals: tuple, out_avals: tuple) -> None:
    """The program's inputs and outputs agree with the blob's types, and its equations type-check."""
    inputs = [(v.aval.shape, v.aval.dtype) for v in program.invars]
    expected = [(c.shape, c.dtype) for c in consts] + [(a.shape, a.dtype) for a in in_avals]
    outputs = [(v.aval.shape, v.aval.dtype) for v in program.outvars]
    if inputs != expected or outputs != [(a.shape, a.dtype) for a in out_avals]:
        raise BlobError("deserialize: the blob's program does not take and return the types the blob declares; it "
                        "is corrupt.")
    _type_check(program)


_MANUAL_BODIES = ("shard_map", "pmap")  # their bodies' collectives need the mesh axes: checked when they run


def _type_check(jaxpr: Jaxpr) -> None:
    """Each equation's primitive, abstractly evaluated on its inputs' types, gives its outputs' types (in nested
    programs too): a forged blob with a valid checksum fails here, not when it runs."""
    for index, eq in enumerate(jaxpr.equations):
        try:
            avals = abstract_eval(eq.primitive, [x.aval for x in eq.inputs], eq.params)
            agree = [(a.shape, a.dtype) for a in avals] == [(v.aval.shape, v.aval.dtype) for v in eq.outputs]
        except Exception as error:  # noqa: BLE001 - any failure of a forged equation is a malformed blob
            raise BlobError(f"deserialize: equation {index} of the program ({eq.primitive.name}) does not "
                            f"type-check ({type(error).__name__}: {error}); the blob is corrupt.") from None
        if not agree:
            raise BlobError(f"deserialize: equation {index} of the program ({eq.primitive.name}) does not give the "
                            "types the blob declares for its outputs; the blob is corrupt.")
        if eq.primitive.name not in _MANUAL_BODIES:
            for inner in _inner_programs(eq.params.values()):
                _type_check(inner)


def _inner_programs(values: Any) -> list[Jaxpr]:
    found = []
    for value in values:
        if isinstance(value, ClosedJaxpr):
            value = value.jaxpr
        if isinstance(value, Jaxpr):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            found += _inner_programs(value)
    return found


def _text(program: Jaxpr, consts: tuple) -> str:
    count = len(consts)
    return str(Jaxpr(program.invars[:count], program.invars[count:], program.equations, program.outvars,
                     list(consts)))



def _codec(buffers: list[Any]) -> Codec:
    """The program codec, knowing also Exported values (a program that calls an Exported holds it inline)."""
    codec = program_codec(buffers)
    codec.extra["exported"] = (Exported, lambda c, e: _encode(c, e, 0), _decode)
    return codec


writers.append(serialize)
