"""What a type (ShapedArray) says of its layout, as JAX's types do: `typeof(x).sharding` (a NamedSharding over
the abstract mesh in use, its spec the Explicit axes splitting each dimension) and `typeof(x).manual_axis_type`
(inside shard_map: the manual axes the value varies over)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..core.core import layout_views
from .mesh import AbstractMesh, Mesh, get_abstract_mesh
from .shardings import NamedSharding, PartitionSpec


@dataclass(frozen=True)
class ManualAxisType:
    """The manual mesh axes a value varies over (and those it is unreduced/reduced over: none in meshax)."""

    varying: frozenset = frozenset()
    unreduced: frozenset = frozenset()
    reduced: frozenset = frozenset()


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
