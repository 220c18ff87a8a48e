"""What a type (ShapedArray) says of its layout, as JAX's types do: `typeof(x).sharding` (a NamedSharding over
the abstract mesh in use, its spec the Explicit axes splitting each dimension) and `typeof(x).manual_axis_type`
(inside shard_map: the manual axes the value varies over)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.core import layout_views
from .mesh import AbstractMesh, get_abstract_mesh
from .shardings import PartitionSpec


@dataclass(frozen=True)
class ManualAxisType:
    """The manual mesh axes a value varies over (and those it is unreduced/reduced over: none in meshax)."""

    varying: frozenset = frozenset()
    unreduced: frozenset = frozenset()
    reduced: frozenset = frozenset()


class TypeSharding:
    """A type's sharding: a spec over an abstract mesh (no devices), printed as JAX prints it."""

    def __init__(self, mesh: AbstractMesh, spec: PartitionSpec) -> None:
        self.mesh = mesh
        self.spec = spec

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TypeSharding) and (self.mesh, self.spec) == (other.mesh, other.spec)

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def sharding_of(aval: Any) -> TypeSharding:
    """The sharding `aval`'s type carries: its Explicit axes per dimension, on the abstract mesh in use."""
    mesh = get_abstract_mesh()
    if mesh.empty and aval.mesh is not None:
        explicit = aval.mesh
        mesh = AbstractMesh(tuple(explicit.shape.values()), explicit.axis_names, explicit.axis_types,
                            abstract_device="cpu")
    if mesh.empty:
        return TypeSharding(mesh, PartitionSpec(unreduced=aval.unreduced, reduced=aval.reduced))
    entries = list(aval.explicit) or [()] * len(aval.shape)
    spec = PartitionSpec.from_entries(entries, unreduced=aval.unreduced, reduced=aval.reduced)
    return TypeSharding(mesh, spec)


def manual_axis_type_of(aval: Any) -> ManualAxisType:
    return ManualAxisType(varying=frozenset(aval.vma))



layout_views.update(sharding=sharding_of, manual_axis_type=manual_axis_type_of)
