"""meshax.Array: a global array whose shards live on the devices of many processes.

A process holds NumPy buffers for its own devices only; replicas on one process share
one read-only buffer. Values can be read where this process's shards cover the whole
array (fully addressable, or replicated onto this process).
"""
from __future__ import annotations

import gc
import math
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..runtime import devices as device_table
from ..runtime.devices import Device
from ..sharding.explicit_types import array_aval
from ..sharding.mesh import retyping
from ..sharding.shardings import Box, Sharding, SingleDeviceSharding, unique_boxes
from ..core.dtypes import issubdtype
from .formats import Format, row_major

NOT_ADDRESSABLE = (
    "Fetching value for `jax.Array` that spans non-addressable (non process local) devices is not possible. "
    "You can use `jax.experimental.multihost_utils.process_allgather` to print the global array or use "
    "`.addressable_shards` method of jax.Array to inspect the addressable (process local) shards."
)


@dataclass(frozen=True)
class Shard:
    """One device's piece of an Array: where it sits in the global array, and (if local) its data."""

    device: Device
    index: tuple[slice, ...]
    replica_id: int
    data: "Array | None"


def read_only(buffer: np.ndarray) -> np.ndarray:
    if buffer.flags.writeable:
        buffer = buffer.view()
        buffer.flags.writeable = False
    return buffer


def array_template(shape: Sequence[int], dtype: Any, sharding: Sharding, weak_type: bool, committed: bool
                   ) -> dict[str, Any]:
    """An Array's fields but its buffers, as Array() makes them and `from_template` copies them (the outputs of one
    jitted signature share theirs). Uncommitted arrays (made by meshax.numpy without a device) count as host data:
    every process has its own copy, so placing one on a sharding slices it locally, as JAX does with the default
    device. `_value` is the assembled value once read, `_aval` the type once asked (every operation on the Array
    asks), `_views` the shard Arrays sharing these buffers (deleted with it)."""
    return {"_shape": tuple(map(int, shape)), "_dtype": np.dtype(dtype), "_sharding": sharding, "weak_type": weak_type,
            "committed": committed, "_value": None, "_aval": None, "_views": None}


def from_template(template: dict[str, Any], buffers: dict[Device, np.ndarray]) -> "Array":
    """Array(...) of a template's metadata, already normalized (a jitted call's outputs: 0.9 -> 0.6 us each)."""
    array = object.__new__(Array)
    fields = template.copy()
    fields["_buffers"] = buffers
    array.__dict__ = fields
    return array


def live_arrays() -> list["Array"]:
    """Every Array alive and not deleted in this process, found among the objects the garbage collector tracks (no
    registry to keep up at each Array's making: a tiny jitted step makes dozens)."""
    return [obj for obj in gc.get_objects()
            if isinstance(obj, Array) and hasattr(obj, "_buffers") and not obj.is_deleted()]


class _DeletedBuffers:
    """Stands in for a deleted Array's buffers: every use raises JAX's error naming the Array's type."""

    def __init__(self, message: str) -> None:
        self._message = message

    def _refuse(self, *_: Any) -> Any:
        raise RuntimeError(self._message)

    __getitem__ = __iter__ = __len__ = __contains__ = __bool__ = _refuse

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(self.__dict__.get("_message", "Array has been deleted."))


# How an Array of partial sums (PartitionSpec(unreduced=...)) is summed and resharded: with collectives, which sit
# above this module; arrays/partial_sums.py installs them (arrays/placement.py imports it).
partial_sum_rules: dict[str, Callable[..., Any]] = {}


class Array:
    """A (possibly process-spanning) array: shape, dtype, sharding and this process's shards."""

    __array_priority__ = 100

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, sharding: Sharding,
                 buffers: dict[Device, np.ndarray], weak_type: bool = False, committed: bool = True) -> None:
        self.__dict__.update(array_template(shape, dtype, sharding, weak_type, committed))
        self._buffers = buffers

    # ---- metadata -----------------------------------------------------------------------

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)

    @property
    def aval(self) -> Any:
        """The Array's type, remembered where the mesh's own axis types are in force (auto_axes/explicit_axes
        retype them: there it is made afresh)."""
        if retyping():
            return array_aval(self._shape, self._dtype, self.weak_type, self._sharding)
        aval = self._aval
        if aval is None or aval.weak_type != self.weak_type:
            aval = self._aval = array_aval(self._shape, self._dtype, self.weak_type, self._sharding)
        return aval

    sharding = property(lambda self: self._sharding)
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: math.prod(self._shape))
    nbytes = property(lambda self: self.size * self._dtype.itemsize)
    itemsize = property(lambda self: self._dtype.itemsize)

    @property
    def format(self) -> Format:
        """How the buffers are laid out (row-major: NumPy's order) and where they live."""
        return Format(row_major(len(self._shape)), self._sharding)

    @property
    def is_fully_addressable(self) -> bool:
        return self._sharding.is_fully_addressable

    @property
    def is_fully_replicated(self) -> bool:
        return self._sharding.is_fully_replicated

    def devices(self) -> set[Device]:
        self._check_alive()
        return set(self._sharding.device_set)

    @property
    def device(self) -> Any:
        """The device of a single-device array, else the sharding."""
        self._check_alive()
        if len(self._sharding.device_set) == 1:
            return next(iter(self._sharding.device_set))
        return self._sharding

    def local_buffers(self) -> dict[Device, np.ndarray]:
        """This process's buffers by device (replicas share one object); read-only."""
        self._check_alive()
        return self._buffers

    def local_boxes(self) -> dict[Box, np.ndarray]:
        """One buffer per distinct local shard box."""
        boxes = self._sharding.device_boxes(self._shape)
        return {box: self._buffers[devices[0]] for box, devices in
                unique_boxes((d, boxes[d]) for d in self._buffers).items()}

    # ---- deletion (jax.Array.delete; jit deletes donated arguments) ---------------------------------------

    def delete(self) -> None:
        """Free this Array's buffers; any later read raises RuntimeError (deleting twice is allowed)."""
        if self._deleted:
            return
        self._buffers = _DeletedBuffers(f"Array has been deleted with shape={self._type_text()}.")
        self._value = None
        for ref in self._views or ():
            view = ref()
            if view is not None:
                view.delete()

    @property
    def _deleted(self) -> bool:
        return isinstance(self._buffers, _DeletedBuffers)

    def is_deleted(self) -> bool:
        return self._deleted

    def _check_alive(self) -> None:
        if self._deleted:
            self._buffers._refuse()

    def _type_text(self) -> str:
        """The type as JAX's deleted-Array error names it: float32[8@i,2] (no weak-type mark)."""
        return str(self.aval).lstrip("~")

    # ---- shards -----------------------------------------------------------------------------

    def _shards(self, devices: list[Device]) -> list[Shard]:
        self._check_alive()
        index_map = self._sharding.devices_indices_map(self._shape)
        replica = self._sharding.replica_ids(self._shape)
        return [Shard(d, index_map[d], replica[d], self._view(d) if d in self._buffers else None) for d in devices]

    def _view(self, device: Device) -> "Array":
        """Device `device`'s buffer as a one-device Array, deleted when this Array is."""
        view = single_device_array(self._buffers[device], device, self.weak_type)
        self._views = [ref for ref in self._views or () if ref() is not None] + [weakref.ref(view)]
        return view

    @property
    def addressable_shards(self) -> list[Shard]:
        here = device_table.process_index()
        return self._shards([d for d in self._sharding._device_list if d.process_index == here])

    @property
    def global_shards(self) -> list[Shard]:
        return self._shards(list(self._sharding._device_list))

    def addressable_data(self, index: int) -> "Array":
        return self.addressable_shards[index].data

    # ---- values -----------------------------------------------------------------------------

    def has_value(self) -> bool:
        """True when this process's shards cover the whole array."""
        covered = sum(math.prod(stop - start for start, stop in box) for box in self.local_boxes())
        return bool(self._buffers) and covered == self.size

    def _read(self) -> np.ndarray:
        if self._value is None:
            if not self.has_value():
                raise RuntimeError(NOT_ADDRESSABLE)
            if getattr(getattr(self._sharding, "spec", None), "unreduced", None):  # partial sums: add them up
                self._value = partial_sum_rules["summed"](self)._read()
                return self._value
            self._value = read_only(_assemble(self._shape, self._dtype, self.local_boxes()))
        return self._value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self._read()
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        return value.copy() if copy else value

    def block_until_ready(self) -> "Array":
        if self._deleted:
            raise RuntimeError("INVALID_ARGUMENT: BlockHostUntilReady() called on deleted or donated buffer")
        return self

    def copy_to_host_async(self) -> None:
        self._check_alive()

    def item(self, *args: int) -> Any:
        return self._read().item(*args)

    def tolist(self) -> Any:
        return self._read().tolist()

    def __float__(self) -> float:
        return float(self._read())

    def __int__(self) -> int:
        return int(self._read())

    def __index__(self) -> int:
        if not issubdtype(self._dtype, np.integer):
            raise TypeError(f"only integer arrays can be used as an index; this one is {self._dtype}.")
        return int(self._read())

    def __complex__(self) -> complex:
        return complex(self._read())

    def __bool__(self) -> bool:
        return bool(self._read())

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of unsized object (a 0-d meshax.Array)")
        return self._shape[0]

    def __format__(self, spec: str) -> str:
        self._check_alive()
        if self.ndim == 0 and self.has_value():
            return format(self._read()[()], spec)
        return format(str(self), spec)

    def __str__(self) -> str:
        return str(self._read()) if self.has_value() else repr(self)

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        if not self.has_value():
            return f"Array(shape={self._shape}, dtype={self._dtype.name}{weak})"
        if self.size == 0:
            return f"Array([], shape={self._shape}, dtype={self._dtype.name}{weak})"
        text = np.array2string(self._read(), separator=", ", prefix="Array(")
        return f"Array({text}, dtype={self._dtype.name}{weak})"

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError(
            "meshax arrays are immutable; instead of x[idx] = y use x = x.at[idx].set(y)."
        )

    def __reduce__(self):
        return (_from_host_for_pickle, (np.asarray(self), self.weak_type))


def _from_host_for_pickle(value: np.ndarray, weak_type: bool) -> Array:
    device = device_table.default_device()
    return Array(value.shape, value.dtype, SingleDeviceSharding(device), {device: read_only(value)}, weak_type)


def single_device_array(buffer: np.ndarray, device: Device, weak_type: bool = False) -> Array:
    """An Array on one device wrapping `buffer` without copying."""
    return Array(buffer.shape, buffer.dtype, SingleDeviceSharding(device), {device: buffer}, weak_type)


def _assemble(shape: tuple[int, ...], dtype: np.dtype, pieces: dict[Box, np.ndarray]) -> np.ndarray:
    """The whole array from disjoint boxes that cover it; a single covering buffer is returned as is."""
    for box, buffer in pieces.items():
        if all(stop - start == n for (start, stop), n in zip(box, shape)):
            return buffer
    result = np.empty(shape, dtype)
    for box, buffer in pieces.items():
        result[tuple(slice(start, stop) for start, stop in box)] = buffer
    return result

