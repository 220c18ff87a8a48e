"""Meshes: an n-dimensional array of devices with a name per axis."""
from __future__ import annotations

import enum
import math
import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from ..config import config
from ..runtime import devices as device_table
from ..runtime.devices import Device


class AxisType(enum.Enum):
    """How a mesh axis is treated by sharding propagation (Auto is the default)."""

    Auto = "Auto"
    Explicit = "Explicit"
    Manual = "Manual"

    def __repr__(self) -> str:
        return self.name


def _axis_names(axis_names: str | Sequence[str]) -> tuple[str, ...]:
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"mesh axis names must be strings; got {name!r} in {names!r}.")
    if len(set(names)) != len(names):
        raise ValueError(f"mesh axis names must be distinct; got {names!r}.")
    return names


def _axis_types(axis_types: Any, count: int) -> tuple[AxisType, ...]:
    if axis_types is None:
        return (AxisType.Auto,) * count
    types = (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types)
    if len(types) != count or not all(isinstance(t, AxisType) for t in types):
        raise ValueError(f"axis_types={axis_types!r} must be {count} AxisType values, one per mesh axis.")
    return types


class _AxisTypeQueries:
    """Whether every axis of a mesh is of one type (`are_all_axes_explicit`, `_auto`, `_manual`)."""

    axis_types: tuple

    are_all_axes_explicit = property(lambda self: all(t is AxisType.Explicit for t in self.axis_types))
    are_all_axes_auto = property(lambda self: all(t is AxisType.Auto for t in self.axis_types))
    are_all_axes_manual = property(lambda self: all(t is AxisType.Manual for t in self.axis_types))


class Mesh(_AxisTypeQueries):
    """Devices arranged in a grid whose axes have names; usable as a context manager."""

    def __init__(self, devices: Any, axis_names: str | Sequence[str], axis_types: Any = None) -> None:
        self.devices: np.ndarray = np.array(devices, dtype=object)
        self.axis_names = _axis_names(axis_names)
        if self.devices.ndim != len(self.axis_names):
            raise ValueError(
                f"a mesh of {self.devices.ndim}-d devices {self.devices.shape} needs {self.devices.ndim} axis "
                f"names; got {self.axis_names!r}."
            )
        if self.devices.size == 0:
            raise ValueError("a mesh needs at least one device; got an empty device array.")
        flat_devices = list(self.devices.flat)
        if not all(isinstance(d, Device) for d in flat_devices):
            raise TypeError("Mesh devices must be meshax devices (from meshax.devices()).")
        if len({d.id for d in flat_devices}) != len(flat_devices):
            raise ValueError(f"a mesh may hold each device once; got device ids {[d.id for d in flat_devices]}.")
        self.axis_types = _axis_types(axis_types, len(self.axis_names))
        self.shape = OrderedDict(zip(self.axis_names, self.devices.shape))
        self._flat = flat_devices
        self._position = {d.id: np.unravel_index(i, self.devices.shape) for i, d in enumerate(flat_devices)}
        self._key = (tuple(d.id for d in flat_devices), self.devices.shape, self.axis_names, self.axis_types)
        self._hash = hash(self._key)  # meshes key many caches: hash once

    # ---- description ------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.devices.size

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    @property
    def shape_tuple(self) -> tuple[tuple[str, int], ...]:
        return tuple(self.shape.items())

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def flat_devices(self) -> list[Device]:
        """The devices in mesh (row-major) order."""
        return list(self._flat)

    @property
    def local_devices(self) -> list[Device]:
        return list(self.local_device_tuple())

    def local_device_tuple(self) -> tuple[Device, ...]:
        """This process's devices of the mesh, in mesh order (kept: every eager operation asks)."""
        here = device_table.process_index()
        cached = self.__dict__.get("_local")
        if cached is None or cached[0] != here:
            cached = self._local = (here, tuple(d for d in self._flat if d.process_index == here))
        return cached[1]

    @property
    def is_multi_process(self) -> bool:
        return len({d.process_index for d in self._flat}) > 1

    @property
    def process_indices(self) -> list[int]:
        """The processes owning devices of this mesh, ascending."""
        return sorted({d.process_index for d in self._flat})

    @property
    def local_mesh(self) -> "Mesh":
        """The sub-mesh of this process's devices (they must form a sub-grid)."""
        here = device_table.process_index()
        mask = np.vectorize(lambda d: d.process_index == here, otypes=[bool])(self.devices)
        if not mask.any():
            raise ValueError(f"process {here} owns no device of {self!r}, so it has no local mesh.")
        ranges = [np.flatnonzero(mask.any(axis=tuple(a for a in range(mask.ndim) if a != axis)))
                  for axis in range(mask.ndim)]
        box = np.ix_(*ranges)
        if not mask[box].all() or mask.sum() != mask[box].size:
            raise ValueError(
                f"process {here}'s devices do not form a contiguous block of {self!r}; "
                "use a mesh where each process's devices form a sub-grid (meshax.make_mesh orders them so)."
            )
        return Mesh(self.devices[box], self.axis_names, self.axis_types)

    def coordinates(self, device: Device) -> tuple[int, ...]:
        """The position of `device` in the mesh grid."""
        return tuple(int(i) for i in self._position[device.id])

    def contains(self, device: Device) -> bool:
        return device.id in self._position

    def axis_size(self, name: str) -> int:
        if name not in self.shape:
            raise ValueError(f"axis name {name!r} is not in the mesh, whose axes are {self.axis_names!r}.")
        return self.shape[name]

    # ---- identity ---------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and other._key == self._key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        """As seed 003 prints a mesh: its device ids and axis names."""
        ids = np.array2string(self.device_ids, separator=", ", prefix="array(")
        types = "" if all(t is AxisType.Auto for t in self.axis_types) else \
            f", axis_types=({', '.join(t.name for t in self.axis_types)}{',' if len(self.axis_types) == 1 else ''})"
        return f"Mesh(device_ids=array({ids}), axis_names={self.axis_names!r}{types})"

    def short_repr(self) -> str:
        """As seed 001 prints a mesh inside a sharding: Mesh('a': 8, 'b': 2)."""
        sizes = ", ".join(f"'{name}': {size}" for name, size in self.shape.items())
        if any(t is not AxisType.Auto for t in self.axis_types):
            types = ", ".join(t.name for t in self.axis_types)
            return f"Mesh({sizes}, axis_types=({types}{',' if len(self.axis_types) == 1 else ''}))"
        return f"Mesh({sizes})"

    # ---- context manager: the mesh for bare PartitionSpecs -----------------------------

    def __enter__(self) -> "Mesh":
        _context.stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _context.stack.pop()


class _MeshContext(threading.local):
    def __init__(self) -> None:
        self.stack: list[Mesh] = []


_context = _MeshContext()
_global_mesh: list[Mesh | None] = [None]  # set by set_mesh outside a `with`


def current_mesh() -> Mesh | None:
    """The innermost mesh entered with `with mesh:` / `use_mesh` / `with set_mesh(...)`, else the global one."""
    return _context.stack[-1] if _context.stack else _global_mesh[0]


def use_mesh(mesh: Mesh) -> Mesh:
    """Context manager making `mesh` the mesh for bare PartitionSpecs (as `with mesh:`)."""
    return mesh


class set_mesh:  # noqa: N801 - JAX's name
    """Make `mesh` the mesh of bare PartitionSpecs, shard_map and jax.typeof: globally from now on, or for the body
    of a `with` statement (the previous mesh comes back after it)."""

    def __init__(self, mesh: Mesh) -> None:
        if not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh needs a Mesh; got {mesh!r} of type {type(mesh).__name__}.")
        self.mesh = mesh
        self.previous = _global_mesh[0]
        _global_mesh[0] = mesh

    def __enter__(self) -> Mesh:
        return self.mesh

    def __exit__(self, *exc: Any) -> None:
        _global_mesh[0] = self.previous


class use_abstract_mesh:  # noqa: N801 - JAX's name
    """`with use_abstract_mesh(abstract_mesh):` the mesh in use seen with `abstract_mesh`'s axes (names, sizes,
    types): its devices, in order, reshaped. The number of devices cannot change."""

    def __init__(self, abstract_mesh: "AbstractMesh") -> None:
        if not isinstance(abstract_mesh, AbstractMesh):
            raise TypeError(f"use_abstract_mesh needs an AbstractMesh; got {abstract_mesh!r}.")
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"use_abstract_mesh({abstract_mesh}) needs a mesh in use: call it inside "
                             "`jax.set_mesh(mesh)`.")
        if abstract_mesh.size != mesh.devices.size:
            raise ValueError(f"use_abstract_mesh cannot change the size of the mesh. Got new mesh: {abstract_mesh} "
                             f"with size={abstract_mesh.size} and current mesh: {mesh} with size={mesh.devices.size}")
        self.mesh = Mesh(mesh.devices.reshape(abstract_mesh.axis_sizes), abstract_mesh.axis_names,
                         abstract_mesh.axis_types)
        self.mesh.abstract_device = abstract_mesh.abstract_device

    def __enter__(self) -> None:
        _context.stack.append(self.mesh)

    def __exit__(self, *exc: Any) -> None:
        _context.stack.pop()


class AbstractMesh(_AxisTypeQueries):
    """A mesh's axis names, sizes and types, without devices (as jax.sharding.AbstractMesh)."""

    def __init__(self, axis_sizes: Sequence[int], axis_names: Sequence[str], axis_types: Any = None, *,
                 abstract_device: Any = None) -> None:
        self.abstract_device = abstract_device  # the kind of device ("cpu") for the abstract view of a real mesh
        self.axis_sizes = tuple(int(n) for n in axis_sizes)
        self.axis_names = _axis_names(axis_names)
        self.axis_types = _axis_types(axis_types, len(self.axis_names))

    shape = property(lambda self: OrderedDict(zip(self.axis_names, self.axis_sizes)))
    size = property(lambda self: math.prod(self.axis_sizes))
    empty = property(lambda self: not self.axis_names)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AbstractMesh) and (self.axis_sizes, self.axis_names, self.axis_types) == \
            (other.axis_sizes, other.axis_names, other.axis_types)

    def __hash__(self) -> int:
        return hash((self.axis_sizes, self.axis_names, self.axis_types))

    def __repr__(self) -> str:
        types = ", ".join(t.name for t in self.axis_types) + ("," if len(self.axis_types) == 1 else "")
        if self.empty:
            return "AbstractMesh((), axis_types=())"
        sizes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        device = "" if self.abstract_device is None else \
            f", device_kind={self.abstract_device}, num_cores=None, platform={self.abstract_device}"
        return f"AbstractMesh({sizes}, axis_types=({types}){device})"


# ---- axis types as auto_axes/explicit_axes retype them for the code they wrap ------------------------------------


class _Retyped(threading.local):
    def __init__(self) -> None:
        self.types: dict[str, AxisType] = {}


_retyped = _Retyped()


class retyped_axes:
    """Context manager treating the named mesh axes as `axis_type` (Auto inside auto_axes, Explicit inside
    explicit_axes) for the code run inside it."""

    def __init__(self, axes: Sequence[str], axis_type: AxisType) -> None:
        self.changes = {name: axis_type for name in axes}

    def __enter__(self) -> None:
        self.previous = dict(_retyped.types)
        _retyped.types.update(self.changes)

    def __exit__(self, *exc: Any) -> None:
        _retyped.types = self.previous


def retyping() -> frozenset:
    """The axis types that auto_axes/explicit_axes put in force here, as (axis name, type) pairs (empty, the
    common case, without building a set)."""
    types = _retyped.types
    return frozenset(types.items()) if types else _NOT_RETYPED


_NOT_RETYPED: frozenset = frozenset()


def explicit_names(mesh: Any) -> frozenset:
    """The mesh axes that are Explicit here (the mesh's own types, as retyped by auto_axes/explicit_axes)."""
    if not isinstance(mesh, Mesh):
        return frozenset()
    types = _retyped.types
    if not types:  # the mesh's own (asked for by every eager operation: remembered)
        own = mesh.__dict__.get("_explicit_names")
        if own is None:
            own = mesh._explicit_names = frozenset(n for n, t in zip(mesh.axis_names, mesh.axis_types)
                                                   if t is AxisType.Explicit)
        return own
    return frozenset(n for n, t in zip(mesh.axis_names, mesh.axis_types)
                     if types.get(n, t) is AxisType.Explicit)


def get_abstract_mesh() -> AbstractMesh:
    """The abstract view of the mesh in use (inside shard_map its manual axes are Manual); empty without one."""
    from ..core.core import axis_mesh, manual_axes

    mesh = axis_mesh() or current_mesh()
    if mesh is None:
        return AbstractMesh((), ())
    manual, explicit = set(manual_axes()), explicit_names(mesh)
    types = tuple(AxisType.Manual if n in manual else AxisType.Explicit if n in explicit
                  else AxisType.Auto if t is AxisType.Explicit else t for n, t in zip(mesh.axis_names, mesh.axis_types))
    device = mesh.__dict__.get("abstract_device", "cpu")  # None for the view of use_abstract_mesh's own
    return AbstractMesh(tuple(mesh.shape.values()), mesh.axis_names, types, abstract_device=device)


def make_mesh(axis_shapes: Sequence[int], axis_names: str | Sequence[str], axis_types: Any = None, *,
              devices: Sequence[Device] | None = None) -> Mesh:
    """A mesh of `axis_shapes` over `devices` (by default the first devices, as many as the shape holds), each
    process's devices contiguous. Axis types default to Auto (the seeds'; JAX 0.10 defaults to Explicit, as meshax
    does with the option `meshax_explicit_axes_by_default` / `MESHAX_EXPLICIT_AXES_BY_DEFAULT=1`)."""
    shape = tuple(int(s) for s in axis_shapes)
    names = _axis_names(axis_names)
    if len(shape) != len(names):
        raise ValueError(f"make_mesh got {len(shape)} axis sizes {shape} but {len(names)} axis names {names!r}.")
    chosen = list(device_table.devices() if devices is None else devices)
    if devices is None and math.prod(shape) < len(chosen):
        chosen = sorted(chosen, key=lambda d: d.id)[:math.prod(shape)]
    if math.prod(shape) != len(chosen):
        fix = "." if devices is not None else f", or {device_table.more_devices_hint(math.prod(shape))}."
        raise ValueError(
            f"make_mesh: axis sizes {shape} hold {math.prod(shape)} devices but {len(chosen)} devices were given; "
            f"make the product of the axis sizes equal the number of devices{fix}"
        )
    if devices is None:
        chosen.sort(key=lambda d: (d.process_index, d.id))
    grid = np.empty(len(chosen), dtype=object)
    grid[:] = chosen
    if axis_types is None and config.read("meshax_explicit_axes_by_default"):
        axis_types = (AxisType.Explicit,) * len(shape)
    return Mesh(grid.reshape(shape), names, axis_types)
