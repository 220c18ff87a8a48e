"""What a type (ShapedArray) says of its layout, as JAX's types do: `typeof(x).sharding` (a NamedSharding over
the abstract mesh in use, its spec the Explicit axes splitting each dimension) and `typeof(x).manual_axis_type`
(inside shard_map: the manual axes the value varies over)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..core.core import layout_views
from .mesh import AbstractMesh, Mesh, get_abstract_mesh
from .shardings import NamedSharding, PartitionSpec, UnreducedKind


def _axis_set(what: str, value: Any) -> frozenset:
    if isinstance(value, str):
        return frozenset({value})
    try:
        return frozenset(value)
    except TypeError:
        raise TypeError(f"ManualAxisType {what}= must be a set of mesh axis names; got {value!r}.") from None


@dataclass(frozen=True)
class ManualAxisType:
    """How a value inside shard_map relates to the manual mesh axes: the axes it varies over, and those it is an
    unreduced (partial) or reduced result over."""
    varying: frozenset = frozenset()
    unreduced: frozenset = frozenset()
    reduced: frozenset = frozenset()
    unreduced_kind: UnreducedKind | None = None

    def __init__(self, *, varying: Any = frozenset(), unreduced: Any = frozenset(), reduced: Any = frozenset(),
                 unreduced_kind: UnreducedKind | None = None) -> None:
        varying, unreduced = _axis_set("varying", varying), _axis_set("unreduced", unreduced)
        reduced = _axis_set("reduced", reduced)
        for (a, x), (b, y) in [(("varying", varying), ("unreduced", unreduced)),
                               (("varying", varying), ("reduced", reduced))]:
            if x & y:
                raise ValueError(f"{a} and {b} cannot have common mesh axes. Got {a}={x} and {b}={y}")
        if unreduced and unreduced_kind is None:
            unreduced_kind = UnreducedKind.sum
        for name, value in (("varying", varying), ("unreduced", unreduced), ("reduced", reduced),
                            ("unreduced_kind", unreduced_kind)):
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return (f"ManualAxisType(varying={self.varying}, unreduced={self.unreduced}, reduced={self.reduced}, "
                f"unreduced_kind={self.unreduced_kind})")

    def update(self, **kwargs: Any) -> "ManualAxisType":
        """A copy with the given fields replaced."""
        fields = dict(varying=self.varying, unreduced=self.unreduced, reduced=self.reduced,
                      unreduced_kind=self.unreduced_kind)
        fields.update(kwargs)
        return ManualAxisType(**fields)

    @property
    def empty(self) -> bool:
        return not (self.varying or self.unreduced or self.reduced)

    @property
    def vur(self) -> frozenset:
        """Every axis the value varies, is unreduced or reduced over."""
        return self.varying | self.unreduced | self.reduced


class TypeSharding:
    """A type's sharding: a spec over an abstract mesh (no devices), printed as JAX prints it."""

    memory_kind = None
    replicated_axes = frozenset()

    def __init__(self, mesh: AbstractMesh, spec: PartitionSpec) -> None:
        self.mesh = mesh
        self.spec = spec

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TypeSharding) and (self.mesh, self.spec) == (other.mesh, other.spec)

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"

    def update(self, **changes: Any) -> Any:
        """A copy with `mesh` and/or `spec` replaced (a concrete Mesh gives a NamedSharding on it)."""
        unknown = set(changes) - {"mesh", "spec", "memory_kind"}
        if unknown:
            raise TypeError(f"NamedSharding.update takes mesh=, spec= or memory_kind=; got {sorted(unknown)}.")
        mesh = self.mesh if changes.get("mesh") is None else changes["mesh"]
        spec = self.spec if changes.get("spec") is None else changes["spec"]
        spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
        if isinstance(mesh, Mesh):
            return NamedSharding(mesh, spec)
        for entry in spec.normalized():
            for name in entry:
                if name not in mesh.axis_names:
                    raise ValueError(f"Resource axis: {name} of {spec!r} is not found in mesh: {mesh.axis_names}.")
        return TypeSharding(mesh, spec)

    @property
    def num_devices(self) -> int:
        return self.mesh.size

    @property
    def is_fully_replicated(self) -> bool:
        return all(self.mesh.shape[name] == 1 for entry in self.spec.normalized() for name in entry)

    @property
    def device_set(self) -> set:
        raise ValueError("device_set is not implemented for `jax.sharding.AbstractMesh`.")

    def shard_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Each dimension of `shape` divided by the mesh axes splitting it."""
        entries = self.spec.normalized() + ((),) * (len(shape) - len(self.spec.normalized()))
        return tuple(n // math.prod(self.mesh.shape[a] for a in entry) for n, entry in zip(shape, entries))


def sharding_of(aval: Any) -> TypeSharding:
    """The sharding `aval`'s type carries: its Explicit axes per dimension (None for each dimension none splits),
    on the abstract mesh in use (the empty mesh without one)."""
    mesh = get_abstract_mesh()
    if mesh.empty and aval.mesh is not None:
        explicit = aval.mesh
        mesh = AbstractMesh(tuple(explicit.shape.values()), explicit.axis_names, explicit.axis_types,
                            abstract_device="cpu")
    entries = list(aval.explicit) or [()] * len(aval.shape)
    spec = PartitionSpec.from_entries(entries, unreduced=aval.unreduced, reduced=aval.reduced)
    return TypeSharding(mesh, spec)


def manual_axis_type_of(aval: Any) -> ManualAxisType:
    return ManualAxisType(varying=frozenset(aval.vma))



layout_views.update(sharding=sharding_of, manual_axis_type=manual_axis_type_of)
