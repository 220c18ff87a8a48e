"""jax.export's Exported: a jitted function's traced program with its types, trees and shardings, which
`serialize` writes to bytes and `deserialize` reads back, and `call` runs (eagerly, under jit and grad).

meshax has no compiler and no StableHLO: the exported program is meshax's jaxpr, and `mlir_module()` is its text.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from ..arrays.array import Array
from ..arrays.placement import device_put
from ..core.core import Primitive, ShapedArray, Tracer, abstract_eval_rules, aval_of, keeps_own_vma, vma_rules
from ..core.jaxpr import Jaxpr
from ..interpreters.batching import batching_rules
from ..interpreters.numpy_eval import host, structured_rules
from ..interpreters.staging import inline_rules
from ..primitives.array_primitives import convert_element_type
from ..sharding.shardings import NamedSharding
from ..transforms.custom_derivatives import custom_vjp
from ..transforms.jit import jit_p, with_sharding_constraint
from ..tree.tree_util import tree_flatten, tree_unflatten
from .shardings import on_mesh

CALLING_CONVENTION_VERSION = 10  # the versions JAX 0.12 reads and writes
MINIMUM_CALLING_CONVENTION_VERSION = 9
writers: list[Callable[["Exported", int], bytearray]] = []  # the blob writer, installed by serialize.py


class DisabledSafetyCheck:
    """A safety check that `export` should skip (as jax.export.DisabledSafetyCheck): `platform()` lets a
    function exported for other platforms run on CPU."""

    def __init__(self, name: str) -> None:
        self._name = name

    @classmethod
    def platform(cls) -> "DisabledSafetyCheck":
        return cls("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> "DisabledSafetyCheck":
        return cls(f"custom_call:{target_name}")

    def is_custom_call(self) -> str | None:
        return self._name[len("custom_call:"):] if self._name.startswith("custom_call:") else None

    def __str__(self) -> str:
        return self._name

    __repr__ = __str__

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DisabledSafetyCheck) and self._name == other._name

    def __hash__(self) -> int:
        return hash(self._name)


@dataclasses.dataclass(frozen=True)
class Exported:
    """A function exported by `export`: its program, input and output types, trees and shardings."""

    fun_name: str
    in_tree: Any
    in_avals: tuple[ShapedArray, ...]
    out_tree: Any
    out_avals: tuple[ShapedArray, ...]
    _in_named_shardings: tuple[NamedSharding | None, ...]
    _out_named_shardings: tuple[NamedSharding | None, ...]
    in_shardings_hlo: tuple[None, ...]
    out_shardings_hlo: tuple[None, ...]
    nr_devices: int
    platforms: tuple[str, ...]
    ordered_effects: tuple[Any, ...]
    unordered_effects: tuple[Any, ...]
    disabled_safety_checks: Sequence[DisabledSafetyCheck]
    mlir_module_serialized: bytes
    calling_convention_version: int
    module_kept_var_idx: tuple[int, ...]
    uses_global_constants: bool
    _get_vjp: Callable[["Exported"], "Exported"] | None
    _program: Jaxpr = dataclasses.field(repr=False, compare=False, default=None)  # consts come first as inputs
    _consts: tuple = dataclasses.field(repr=False, compare=False, default=())

    def __str__(self) -> str:
        return f"Exported(fun_name={self.fun_name}, in_avals={self.in_avals}, out_avals={self.out_avals})"

    def mlir_module(self, serialized: bool = True) -> str:
        """The exported program's text. meshax has no MLIR: this is the meshax jaxpr that `call` runs."""
        return self.mlir_module_serialized.decode()

    def in_shardings_jax(self, mesh: Any = None) -> tuple[Any, ...]:
        """The inputs' shardings as NamedShardings (on `mesh` where given: same axis names and sizes)."""
        return tuple(on_mesh(s, mesh) for s in self._in_named_shardings)

    def out_shardings_jax(self, mesh: Any) -> tuple[Any, ...]:
        """The outputs' shardings as NamedShardings on `mesh` (same axis names and sizes)."""
        return tuple(on_mesh(s, mesh) for s in self._out_named_shardings)

    def has_vjp(self) -> bool:
        """Whether `vjp()` (and so differentiating `call`) is available."""
        return self._get_vjp is not None

    def vjp(self) -> "Exported":
        """The exported VJP: a function of (*flat primal inputs, *flat output cotangents) to the flat input
        cotangents."""
        if self._get_vjp is None:
            raise ValueError("No VJP is available")
        return self._get_vjp(self)

    def serialize(self, vjp_order: int = 0) -> bytearray:
        """The bytes of this Exported (and of its VJPs up to order `vjp_order`), for `deserialize`."""
        return writers[0](self, vjp_order)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run the exported program on arguments of the exported types (eagerly, or inside jit or grad)."""
        _check_platform(self)
        leaves, tree = tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise ValueError(f"The invocation args and kwargs must have the same pytree structure as when the "
                             f"function '{self.fun_name}' was exported, but they have structure {tree} instead of "
                             f"{self.in_tree}.")
        _check_device_count(self, leaves)
        leaves = [_checked_arg(self, i, x, aval) for i, (x, aval) in enumerate(zip(leaves, self.in_avals))]
        outputs = _differentiable_call(self, leaves)
        outputs = [_as_exported(o, a, s) for o, a, s in zip(outputs, self.out_avals, self._out_named_shardings)]
        return tree_unflatten(self.out_tree, outputs)


def _check_platform(exported: Exported) -> None:
    if "cpu" not in exported.platforms and DisabledSafetyCheck.platform() not in exported.disabled_safety_checks:
        raise ValueError(f"Function '{exported.fun_name}' was exported for platforms '{exported.platforms}' but it "
                         "is used on '('cpu',)'.")


def _as_exported(value: Any, aval: ShapedArray, sharding: NamedSharding | None) -> Any:
    """An output as the Exported declares it: strongly typed where its type is (a deserialized Exported's types
    are, as in JAX), placed as its sharding says."""
    if aval_of(value).weak_type and not aval.weak_type:
        value = convert_element_type.bind(value, new_dtype=aval.dtype, weak_type=False)
    return value if sharding is None else with_sharding_constraint(value, sharding)


def _check_device_count(exported: Exported, leaves: list[Any]) -> None:
    """An eager call of a program exported for several devices needs arguments placed on that many devices."""
    if exported.nr_devices == 1 or any(isinstance(x, Tracer) for x in leaves):
        return
    counts = [len(x.sharding.device_set) for x in leaves if isinstance(x, Array) and x.committed]
    if exported.nr_devices not in counts:
        raise ValueError(f"Function {exported.fun_name} was exported for {exported.nr_devices} devices and is "
                         f"called in a context with {max(counts, default=1)} devices, which is not allowed; place "
                         f"its arguments on {exported.nr_devices} devices (device_put with the shardings of "
                         "in_shardings_jax(mesh)).")


def _checked_arg(exported: Exported, index: int, x: Any, aval: ShapedArray) -> Any:
    """The argument `x`, checked against the exported type (dtype, rank, shape) and placed as exported."""
    try:
        got = aval_of(x)
    except TypeError:
        raise TypeError(f"Exported function '{exported.fun_name}' got args[{index}] = {x!r} of type "
                        f"{type(x).__name__}; pass arrays or numbers.") from None
    if got.dtype != aval.dtype:
        raise ValueError(f"Dtype mismatch for args[{index}]: expected {aval.dtype} and called with {got.dtype}")
    if len(got.shape) != len(aval.shape):
        raise ValueError(f"Rank mismatch for args[{index}]: expected {aval.shape} and called with {got.shape}")
    if got.shape != aval.shape:
        raise ValueError(f"Shape mismatch for args[{index}]: expected {aval.shape} and called with {got.shape}")
    sharding = exported._in_named_shardings[index]
    if sharding is not None and not isinstance(x, Tracer):
        x = device_put(x, sharding)
    return x


call_exported_p = Primitive("call_exported", multiple_results=True)
abstract_eval_rules[call_exported_p] = lambda *avals, exported: list(exported._program.out_avals)
vma_rules[call_exported_p] = keeps_own_vma
inline_rules[call_exported_p] = lambda *args, exported: jit_p.bind(
    *exported._consts, *args, jaxpr=exported._program, name=exported.fun_name)
structured_rules[call_exported_p] = lambda run, *args, exported: run(
    exported._program, (), [host(c) for c in exported._consts] + list(args))


def _no_batching(values: Any, dims: Any, *, exported: Exported) -> Any:
    raise NotImplementedError("Batching rule for 'call_exported' not implemented: as in jax.export, an Exported's "
                              "call can't be vmapped; export the vmapped function instead.")


batching_rules[call_exported_p] = _no_batching


def _differentiable_call(exported: Exported, leaves: list[Any]) -> list[Any]:
    """`call_exported` on flat inputs, differentiated by the exported VJP (ValueError where there is none). Integer
    and boolean inputs are not differentiated: the custom_vjp function takes the others."""
    floating = [np.issubdtype(a.dtype, np.inexact) for a in exported.in_avals]

    def merged(floats: Sequence[Any], others: Sequence[Any]) -> list[Any]:
        floats, others = iter(floats), iter(others)
        return [next(floats) if f else next(others) for f in floating]

    others = [x for x, f in zip(leaves, floating) if not f]

    def run(*floats: Any) -> list[Any]:
        return list(call_exported_p.bind(*merged(floats, others), exported=exported))

    def fwd(*floats: Any) -> tuple[list[Any], tuple]:
        return run(*floats), (floats, others)

    def bwd(residuals: tuple, cotangents: list[Any]) -> tuple:
        if not exported.has_vjp():
            raise ValueError("No VJP is available")
        floats, kept = residuals
        in_cts = exported.vjp().call(*merged(floats, kept), *cotangents)
        return tuple(ct for ct, f in zip(in_cts, floating) if f)

    function = custom_vjp(run)
    function.defvjp(fwd, bwd)
    return function(*[x for x, f in zip(leaves, floating) if f])
