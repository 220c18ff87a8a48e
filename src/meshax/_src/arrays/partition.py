"""Where eager operations run: the mesh chosen for an operation, specs of inputs on it, and placing inputs."""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from ..runtime import devices as device_table
from .array import Array
from ..core.core import ShapedArray, aval_of
from ..sharding.mesh import Mesh
from ..sharding.placement_rules import Spec, replicated
from ..sharding.shardings import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding
from .transfer import from_host, reshard

SINGLE_AXIS = "_single"


@functools.lru_cache(maxsize=4096)
def spec_of(sharding: NamedSharding, ndim: int) -> Spec:
    """Each of `ndim` dimensions' mesh axes under `sharding` (memoized: every eager operation asks)."""
    axes = sharding.spec.normalized()
    return tuple(axes) + ((),) * (ndim - len(axes))


def to_partition_spec(spec: Spec) -> PartitionSpec:
    entries = [None if not e else (e[0] if len(e) == 1 else e) for e in spec]
    while entries and entries[-1] is None:
        entries.pop()
    return PartitionSpec(*entries)


@functools.lru_cache(maxsize=None)
def _single_device(device: Any) -> NamedSharding:
    """The one-device mesh of `device` and its sharding (built once per device: every eager operation asks)."""
    return NamedSharding(Mesh([device], (SINGLE_AXIS,)), PartitionSpec())


def as_named(sharding: Sharding) -> NamedSharding:
    if isinstance(sharding, SingleDeviceSharding):
        return _single_device(sharding.device)
    assert isinstance(sharding, NamedSharding), sharding
    return sharding


def sharding_for(mesh: Mesh, spec: Spec) -> Sharding:
    """The output sharding: single-device arrays stay SingleDeviceSharding."""
    if mesh.axis_names == (SINGLE_AXIS,):
        return SingleDeviceSharding(mesh.flat_devices[0])
    return named_sharding(mesh, spec)


def named_sharding(mesh: Mesh, spec: Spec) -> NamedSharding:
    """NamedSharding(mesh, spec) for a spec of per-dimension axis tuples (memoized: shardings are immutable)."""
    try:
        return _named_sharding(mesh, spec)
    except TypeError:  # a spec built of lists: not hashable
        return NamedSharding(mesh, to_partition_spec(spec))


@functools.lru_cache(maxsize=4096)
def _named_sharding(mesh: Mesh, spec: Spec) -> NamedSharding:
    return NamedSharding(mesh, to_partition_spec(spec))


def choose_mesh(args: Sequence[Any]) -> Mesh:
    """The mesh of the committed Array input over the most devices (first on ties); else that of the first
    uncommitted Array (every process has its own copy); else the default device."""
    best: NamedSharding | None = None
    for arg in sorted((a for a in args if isinstance(a, Array)), key=lambda a: not a.committed):
        named = as_named(arg.sharding)
        if best is None or (arg.committed and named.mesh.size > best.mesh.size):
            best = named
    if best is None:
        return _single_device(device_table.default_device()).mesh
    return best.mesh


def current_specs(args: Sequence[Any], mesh: Mesh) -> list[Spec]:
    """Each input's spec on `mesh` (replicated for host values and Arrays on other meshes)."""
    specs = []
    for arg in args:
        aval = aval_of(arg)
        if isinstance(arg, Array):
            named = as_named(arg.sharding)
            if named.mesh == mesh:
                specs.append(spec_of(named, aval.ndim))
                continue
        specs.append(replicated(aval.ndim))
    return specs


def place(arg: Any, mesh: Mesh, spec: Spec, aval: ShapedArray) -> Array:
    """`arg` laid out on `mesh` as `spec`: resharded if an Array, sliced locally if a host value."""
    if isinstance(arg, Array):
        current = as_named(arg.sharding)
        if current.mesh == mesh and spec_of(current, aval.ndim) == spec:
            return arg
        return reshard(arg, named_sharding(mesh, spec))
    return from_host(np.asarray(arg, dtype=aval.dtype), named_sharding(mesh, spec), aval.weak_type)
