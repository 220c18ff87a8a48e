"""Shardings: which part of a global array each device holds.

A shard's part is an index box: one (start, stop) pair per dimension. A dimension of
size n split into k shards gives shard i the rows [i*c, min((i+1)*c, n)) with
c = ceil(n / k), the rule of torch.chunk: when k does not divide n the last shards
are shorter (possibly empty), and every element still lives on exactly the devices
that hold its shard.
"""
from __future__ import annotations

import enum
import functools
import math
from typing import Any, Iterable, Sequence

from ..runtime import devices as device_table
from ..runtime.devices import Device
from .mesh import AbstractMesh, Mesh, current_mesh

Box = tuple[tuple[int, int], ...]


class UnreducedKind(enum.Enum):
    """How an unreduced value's partial results combine."""
    sum = 1
    max = 2
    min = 3


class PartitionSpec(tuple):
    """For each array dimension: None (replicated), a mesh axis name, or a tuple of names. `unreduced`: mesh axes
    over which the array holds partial sums; `reduced`: axes it is replicated over, whose cotangents are summed."""

    def __new__(cls, *partitions: Any, unreduced: Any = frozenset(), reduced: Any = frozenset(),
                unreduced_kind: UnreducedKind | None = None) -> "PartitionSpec":
        for entry in partitions:
            names = entry if isinstance(entry, tuple) else (entry,)
            if not all(n is None or isinstance(n, str) for n in names) or (isinstance(entry, tuple) and None in entry):
                raise TypeError(
                    f"PartitionSpec entries must be None, a mesh axis name or a tuple of names; got {entry!r}."
                )
        spec = super().__new__(cls, partitions)
        spec.unreduced = _axis_set(unreduced, "unreduced")
        spec.reduced = _axis_set(reduced, "reduced")
        used = {n for entry in partitions for n in (entry if isinstance(entry, tuple) else (entry,)) if n is not None}
        for name, axes in (("unreduced", spec.unreduced), ("reduced", spec.reduced)):
            if used & axes:
                raise ValueError(f"partitions cannot overlap with {name} axes passed to PartitionSpec. Got partitions: "
                                 f"{partitions} and {name} axes: {axes}")
        if spec.unreduced & spec.reduced:
            raise ValueError(f"`unreduced` and `reduced` argument to PartitionSpec cannot overlap. Got unreduced: "
                             f"{spec.unreduced} and reduced: {spec.reduced}")
        if unreduced_kind is not None and not spec.unreduced:
            raise ValueError(f"`unreduced_kind` should be `None` when `unreduced` is an empty set. Got "
                             f"unreduced_kind={unreduced_kind!r} and unreduced={spec.unreduced}")
        spec.unreduced_kind = (unreduced_kind or UnreducedKind.sum) if spec.unreduced else None
        return spec

    partitions = property(lambda self: tuple(self))

    @classmethod
    def from_entries(cls, entries: Sequence[Sequence[str]], **axis_sets: Any) -> "PartitionSpec":
        """The spec whose dimension d is split over the mesh axes `entries[d]` (a type's per-dimension axes)."""
        return cls(*[None if not axes else axes[0] if len(axes) == 1 else tuple(axes) for axes in entries],
                     **axis_sets)

    def __repr__(self) -> str:
        entries = [repr(p) for p in self]
        for name, axes in (("unreduced", self.unreduced), ("reduced", self.reduced)):
            if axes:
                entries.append(f"{name}={{{', '.join(repr(a) for a in sorted(axes))}}}")
        if self.unreduced:   # after reduced, as JAX 0.12
            entries.append(f"unreduced_kind={self.unreduced_kind.name}")
        return "PartitionSpec(" + ", ".join(entries) + ("," if len(self) == 1 and len(entries) == 1 else "") + ")"

    def update(self, **changes: Any) -> "PartitionSpec":
        """A copy with `partitions`, `unreduced` or `reduced` replaced."""
        fields = {"partitions": tuple(self), "unreduced": self.unreduced, "reduced": self.reduced,
                  "unreduced_kind": self.unreduced_kind, **changes}
        kind = fields["unreduced_kind"] if fields["unreduced"] else None
        return PartitionSpec(*fields["partitions"], unreduced=fields["unreduced"], reduced=fields["reduced"],
                             unreduced_kind=kind)

    def normalized(self) -> tuple[tuple[str, ...], ...]:
        """Each entry as a tuple of axis names, trailing replicated dimensions dropped."""
        entries = [() if p is None else (p if isinstance(p, tuple) else (p,)) for p in self]
        while entries and not entries[-1]:
            entries.pop()
        return tuple(entries)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionSpec):
            return (self.normalized(), self.unreduced, self.reduced, self.unreduced_kind) == \
                (other.normalized(), other.unreduced, other.reduced, other.unreduced_kind)
        if isinstance(other, tuple):
            return not self.unreduced and not self.reduced and self.normalized() == PartitionSpec(*other).normalized()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash((self.normalized(), self.unreduced, self.reduced))

    def __reduce__(self):
        return (_rebuild_spec, (tuple(self), self.unreduced, self.reduced, self.unreduced_kind))


def _rebuild_spec(partitions: tuple, unreduced: frozenset, reduced: frozenset,
                  unreduced_kind: UnreducedKind | None = None) -> PartitionSpec:
    return PartitionSpec(*partitions, unreduced=unreduced, reduced=reduced, unreduced_kind=unreduced_kind)


def _axis_set(axes: Any, what: str) -> frozenset:
    """`axes` (a name or a collection of names) as a frozenset of mesh axis names."""
    names = frozenset((axes,) if isinstance(axes, str) else axes)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"PartitionSpec({what}=...) takes mesh axis names; got {axes!r}.")
    return names


def chunk_bounds(size: int, parts: int, index: int) -> tuple[int, int]:
    """Rows of part `index` when `size` rows are split into `parts` (torch.chunk's rule)."""
    step = -(-size // parts) if parts else size
    return min(index * step, size), min((index + 1) * step, size)


def box_to_index(box: Box, sharded: Sequence[bool]) -> tuple[slice, ...]:
    """JAX's index form: slice(None) for unsharded dimensions, slice(start, stop) otherwise."""
    return tuple(slice(start, stop) if cut else slice(None) for (start, stop), cut in zip(box, sharded))


class Sharding:
    """Base of all shardings: a device assignment plus the box each device holds."""

    memory_kind = "device"

    # Subclasses provide: _device_list, _boxes(shape), _sharded_dims(shape), _replica_ids(shape), key.

    @property
    def device_set(self) -> set[Device]:
        return set(self._device_list)

    @property
    def num_devices(self) -> int:
        return len(self._device_list)

    @property
    def addressable_devices(self) -> set[Device]:
        here = device_table.process_index()
        return {d for d in self._device_list if d.process_index == here}

    @property
    def is_fully_addressable(self) -> bool:
        here = device_table.process_index()
        return all(d.process_index == here for d in self._device_list)

    @property
    def process_indices(self) -> list[int]:
        """The processes owning devices of this sharding, ascending."""
        return sorted({d.process_index for d in self._device_list})

    def device_boxes(self, shape: Sequence[int]) -> dict[Device, Box]:
        """Each device's index box for an array of `shape`, in device-assignment order."""
        return self._boxes(tuple(shape))

    def devices_indices_map(self, shape: Sequence[int]) -> dict[Device, tuple[slice, ...]]:
        shape = tuple(shape)
        sharded = self._sharded_dims(shape)
        return {d: box_to_index(b, sharded) for d, b in self._boxes(shape).items()}

    def addressable_devices_indices_map(self, shape: Sequence[int]) -> dict[Device, tuple[slice, ...]]:
        here = device_table.process_index()
        return {d: i for d, i in self.devices_indices_map(shape).items() if d.process_index == here}

    def replica_ids(self, shape: Sequence[int]) -> dict[Device, int]:
        return self._replica_ids(tuple(shape))

    def shard_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The shape of the largest shard (all shards when the split is even)."""
        boxes = self._boxes(tuple(shape)).values()
        return tuple(max(stop - start for start, stop in dims) for dims in zip(*boxes)) if shape else ()

    def is_equivalent_to(self, other: "Sharding", ndim: int) -> bool:
        shape = (1,) * ndim
        return self._device_list == other._device_list and self._boxes(shape) == other._boxes(shape)

    def __eq__(self, other: object) -> bool:
        return other is self or (type(other) is type(self) and other.key == self.key)

    def __hash__(self) -> int:  # kept: a jitted call's cache key hashes every argument's sharding
        found = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = hash(self.key)
        return found

    def __getstate__(self) -> dict[str, Any]:  # the kept hash is this process's (string hashes are salted)
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


def _mesh_in_use_for(abstract: AbstractMesh) -> Mesh:
    """The mesh in use whose axes (names and sizes) are `abstract`'s: a sharding over an abstract mesh is one over
    the devices of the mesh in use."""
    mesh = current_mesh()
    if mesh is None or (tuple(mesh.shape.items()) != tuple(abstract.shape.items())):
        raise ValueError(f"NamedSharding over {abstract} needs the mesh with those axes in use: create it inside "
                         f"`with jax.set_mesh(mesh):` (the mesh in use is {mesh}).")
    return mesh


class NamedSharding(Sharding):
    """Shards an array over `mesh` as `spec` says: dimension i is split over the axes in spec[i]."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec | Sequence[Any] | None = None, *,
                 memory_kind: str | None = None) -> None:
        if isinstance(mesh, AbstractMesh):
            mesh = _mesh_in_use_for(mesh)
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding needs a meshax Mesh as its first argument; got {type(mesh).__name__}.")
        spec = PartitionSpec() if spec is None else spec
        if not isinstance(spec, PartitionSpec):
            if not isinstance(spec, (tuple, list)):
                raise TypeError(f"NamedSharding spec must be a PartitionSpec; got {spec!r}.")
            spec = PartitionSpec(*spec)
        self.mesh = mesh
        self.spec = spec
        if spec.unreduced_kind not in (None, UnreducedKind.sum):
            raise NotImplementedError(f"unreduced_kind={spec.unreduced_kind.name} is not supported: meshax's unreduced "
                                      "arrays hold partial sums (unreduced_kind=sum).")
        if memory_kind not in (None, "device"):
            raise ValueError(f"memory_kind={memory_kind!r} is not supported; CPU devices have one memory, 'device'.")
        self._axes = spec.normalized()
        used = [name for entry in self._axes for name in entry] + sorted(spec.reduced) + sorted(spec.unreduced)
        for name in used:
            mesh.axis_size(name)  # raises naming the axis and the mesh's axes
        if len(set(used)) != len(used):
            raise ValueError(f"{spec!r} uses a mesh axis more than once; each axis may shard one dimension.")
        self._device_list = mesh.flat_devices
        self.key = (mesh, self._axes, spec.unreduced)  # unreduced: each device holds a partial sum

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh.short_repr()}, spec={self.spec!r}, memory_kind={self.memory_kind})"

    def check_rank(self, ndim: int, what: str = "the array") -> None:
        if len(self.spec) > ndim:
            raise ValueError(
                f"{self.spec!r} has {len(self.spec)} entries but {what} has rank {ndim}; "
                "a PartitionSpec may not be longer than the array's rank."
            )

    def shards_per_dim(self, ndim: int) -> tuple[int, ...]:
        """How many pieces each of `ndim` dimensions is cut into."""
        axes = self._axes + ((),) * (ndim - len(self._axes))
        return tuple(math.prod(self.mesh.shape[a] for a in entry) for entry in axes)

    def _sharded_dims(self, shape: tuple[int, ...]) -> tuple[bool, ...]:
        return tuple(n > 1 for n in self.shards_per_dim(len(shape)))

    def shard_coordinates(self, device: Device, ndim: int) -> tuple[int, ...]:
        """Which piece of each dimension `device` holds."""
        position = dict(zip(self.mesh.axis_names, self.mesh.coordinates(device)))
        axes = self._axes + ((),) * (ndim - len(self._axes))
        coordinates = []
        for entry in axes:
            index = 0
            for name in entry:
                index = index * self.mesh.shape[name] + position[name]
            coordinates.append(index)
        return tuple(coordinates)

    def _boxes(self, shape: tuple[int, ...]) -> dict[Device, Box]:
        return _named_boxes(self, shape)

    def _replica_ids(self, shape: tuple[int, ...]) -> dict[Device, int]:
        used = {name for entry in self._axes for name in entry}
        free = [name for name in self.mesh.axis_names if name not in used]
        ids = {}
        for device in self._device_list:
            position = dict(zip(self.mesh.axis_names, self.mesh.coordinates(device)))
            index = 0
            for name in free:
                index = index * self.mesh.shape[name] + position[name]
            ids[device] = index
        return ids

    @property
    def is_fully_replicated(self) -> bool:
        return all(self.mesh.shape[name] == 1 for entry in self._axes for name in entry)

    @property
    def addressable_devices(self) -> set[Device]:
        return set(self.mesh.local_devices)

    def with_spec(self, spec: PartitionSpec) -> "NamedSharding":
        return NamedSharding(self.mesh, spec)


@functools.lru_cache(maxsize=4096)
def _named_boxes(sharding: NamedSharding, shape: tuple[int, ...]) -> dict[Device, Box]:
    sharding.check_rank(len(shape))
    parts = sharding.shards_per_dim(len(shape))
    boxes = {}
    for device in sharding._device_list:
        coordinates = sharding.shard_coordinates(device, len(shape))
        boxes[device] = tuple(chunk_bounds(size, n, i) for size, n, i in zip(shape, parts, coordinates))
    return boxes


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device: Device, *, memory_kind: str | None = None) -> None:
        if not isinstance(device, Device):
            raise TypeError(f"SingleDeviceSharding needs a meshax Device; got {device!r}.")
        self.device = device
        self._device_list = [device]
        self.key = device.id

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self.device!r})"  # as seed 003 prints it

    def _boxes(self, shape: tuple[int, ...]) -> dict[Device, Box]:
        return {self.device: tuple((0, n) for n in shape)}

    def _sharded_dims(self, shape: tuple[int, ...]) -> tuple[bool, ...]:
        return (False,) * len(shape)

    def _replica_ids(self, shape: tuple[int, ...]) -> dict[Device, int]:
        return {self.device: 0}

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def as_named(self) -> NamedSharding:
        from .mesh import Mesh

        return NamedSharding(Mesh([self.device], ("_single",)), PartitionSpec())


def to_sharding(target: Any) -> Sharding:
    """A Sharding from a Sharding, a Device, or a PartitionSpec under a `with mesh:` block."""
    if isinstance(target, Sharding):
        return target
    if isinstance(target, Device):
        return SingleDeviceSharding(target)
    if isinstance(target, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(
                f"a bare {target!r} needs a mesh: wrap it as NamedSharding(mesh, spec) or use it inside `with mesh:`."
            )
        return NamedSharding(mesh, target)
    raise TypeError(f"expected a Sharding, a Device or a PartitionSpec; got {type(target).__name__}: {target!r}.")


def unique_boxes(boxes: Iterable[tuple[Device, Box]]) -> dict[Box, list[Device]]:
    """Group devices by the box they hold (replicas together), keeping first-seen order."""
    groups: dict[Box, list[Device]] = {}
    for device, box in boxes:
        groups.setdefault(box, []).append(device)
    return groups


P = PartitionSpec  # JAX 0.10's short name (jax.P)
