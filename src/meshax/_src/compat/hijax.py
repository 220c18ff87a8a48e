"""jax.experimental.hijax for the alias: the names a library defines high-level ("hijax") types with.

flax's `nnx.Variable` module defines its hijax variant at import time (subclasses of `HiPrimitive` and
`MutableHiType`, `register_hitype`, `aval_method`), and uses it only when `flax_hijax_variable` is on (it is
off by default). meshax has no high-level types: these definitions can all be made, and binding a
`HiPrimitive` raises NotImplementedError with the fix.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from meshax._src.core.core import ShapedArray
from meshax._src.transforms.sharding_in_types import RefType as AbstractRef
from meshax.extend.core import Effect, Primitive
from meshax.interpreters.ad import Zero, instantiate_zeros, is_undefined_primal

__all__ = ["AbstractRef", "AbstractValue", "AvalMutableQDD", "AvalQDD", "HiPrim", "HiPrimitive", "HiType", "MutableHiType",
           "ShapedArray", "Zero", "aval_method", "aval_property", "control_flow_allowed_effects",
           "instantiate_zeros", "is_undefined_primal", "register_hitype"]

AbstractValue = ShapedArray  # meshax has one kind of abstract value


class EffectTypeSet:
    """A set of effect types (`add_type`, `contains`, `filter_in`, `filter_not_in`)."""

    def __init__(self) -> None:
        self._effect_types: set[type] = set()

    def add_type(self, effect_type: type[Effect]) -> None:
        """Put `effect_type` (and so its subclasses) in the set."""
        self._effect_types.add(effect_type)

    def contains(self, effect: Effect) -> bool:
        """Whether `effect` is an instance of one of the set's types."""
        return isinstance(effect, tuple(self._effect_types))

    def filter_in(self, effects: Iterable[Effect]) -> list[Effect]:
        """The effects of `effects` the set contains."""
        return [e for e in effects if self.contains(e)]

    def filter_not_in(self, effects: Iterable[Effect]) -> list[Effect]:
        """The effects of `effects` the set does not contain."""
        return [e for e in effects if not self.contains(e)]


control_flow_allowed_effects = EffectTypeSet()  # effects allowed inside cond/scan/while bodies


class HiType:
    """The abstract value of a high-level type (subclassed by libraries; meshax has none of its own)."""


class MutableHiType(HiType):
    """The abstract value of a mutable high-level type."""


class AvalQDD:
    """An abstract value with its quasi-dynamic data."""

    def __init__(self, aval: Any, qdd: Any) -> None:
        self.aval, self.qdd = aval, qdd


class AvalMutableQDD:
    """An abstract value with its mutable quasi-dynamic data."""

    def __init__(self, aval: Any, mutable_qdd: Any) -> None:
        self.aval, self.mutable_qdd = aval, mutable_qdd


class aval_method(tuple):  # noqa: N801 - JAX's name
    """A method of a high-level type's abstract value, called with the traced value."""

    def __new__(cls, fun: Callable[..., Any]) -> "aval_method":
        return super().__new__(cls, (fun,))

    fun = property(lambda self: self[0])


class aval_property(tuple):  # noqa: N801 - JAX's name
    """A property of a high-level type's abstract value, read on the traced value."""

    def __new__(cls, fget: Callable[[Any], Any]) -> "aval_property":
        return super().__new__(cls, (fget,))

    fget = property(lambda self: self[0])


_hitypes: dict[type, Callable[[Any], Any]] = {}


def register_hitype(val_cls: type, typeof_fn: Callable[[Any], Any]) -> None:
    """Record `typeof_fn` as the abstract-value function of the high-level type `val_cls`."""
    _hitypes[val_cls] = typeof_fn


class HiPrimitive(Primitive):
    """A primitive on high-level types: it can be defined, but meshax cannot bind it."""

    def bind(self, *args: Any, **params: Any) -> Any:
        raise NotImplementedError(
            f"the hijax primitive {self.name!r} cannot run: meshax does not implement high-level (hijax) types; "
            "use the library's array-based mode instead (for flax, leave `flax_hijax_variable` off).")



class HiPrim:
    """JAX 0.12's form of a high-level primitive (flax 0.12.12 subclasses it, setting `in_avals`, `out_aval` and
    `params` before `super().__init__()`): it can be defined and made, and calling it raises NotImplementedError."""

    def __init__(self) -> None:
        self.params = getattr(self, "params", {})

    def __call__(self, *args: Any) -> Any:
        raise NotImplementedError(
            f"the hijax primitive {type(self).__name__} cannot run: meshax does not implement high-level (hijax) "
            "types; use the library's array-based mode instead (for flax, leave `flax_hijax_variable` off).")
