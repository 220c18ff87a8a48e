"""Public entry points for placing data: device_put, device_get and the make_array_from_* family."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..runtime import devices as device_table
from . import partial_sums  # noqa: F401  (installs the rules of Arrays of partial sums)
from .array import Array, read_only
from .formats import Format, sharding_of_format
from ..core.core import Tracer, define_primitive
from ..runtime.devices import Device
from ..core.dtypes import canonicalize_dtype, dtype_of
from ..sharding.shardings import Box, NamedSharding, Sharding, SingleDeviceSharding, to_sharding, unique_boxes
from ..runtime.history import note, ordered
from ..runtime.watch import user_site_key
from .transfer import _array_from_boxes, box_shape, from_host, global_value, placement, reshard
from ..tree.tree_util import tree_flatten, tree_map, tree_unflatten


# A layout constraint on a traced value (device_put and with_sharding_constraint under tracing). Its rules for each
# interpreter are registered with the other primitives (lax/primitives.py).
sharding_constraint = define_primitive("sharding_constraint", None, lambda x, *, sharding: x, None)


def host_value(x: Any) -> tuple[np.ndarray, bool]:
    """`x` as a NumPy array of its JAX dtype (64-bit narrowed unless x64), and whether it is weakly typed."""
    dtype, weak = dtype_of(x)
    return np.asarray(x, dtype=dtype), weak


def _put_one(x: Any, target: Any) -> Any:
    target = sharding_of_format(target, x)
    if isinstance(x, Tracer):  # under jit: the traced value is constrained to the target layout
        return x if target is None else sharding_constraint.bind(x, sharding=to_sharding(target))
    if target is None:
        if isinstance(x, Array):
            return x
        sharding: Sharding = SingleDeviceSharding(device_table.default_device())
    else:
        sharding = to_sharding(target)
    if isinstance(x, Array) and (x.committed or x.sharding == sharding):
        return reshard(x, sharding)
    if isinstance(x, Array):
        value, weak = np.asarray(x), x.weak_type
    else:
        try:
            value, weak = host_value(x)
        except TypeError:
            from ..runtime.watch import user_site

            dtype = f" with {x.dtype!r}, not a numeric dtype," if hasattr(x, "dtype") else ""
            raise TypeError(f"Argument {x!r:.100} of type {type(x)}{dtype} is not a valid JAX type: device_put "
                            f"(called at {user_site()}) places arrays, numbers and pytrees of them.") from None
    _check_host_data_agrees(value, sharding)
    return from_host(value, sharding, weak, committed=target is not None)  # no target: the default device, as JAX


def check_committed_devices(args: Sequence[Any], fun_name: str, arg_names: Sequence[str] | None = None) -> None:
    """Raise JAX's ValueError when two committed Arrays among `args` (the operands of `fun_name`, named
    `arg_names`, else args[i]) sit on different devices; uncommitted Arrays and host values go anywhere."""
    first = None
    for i, arg in enumerate(args):
        if not isinstance(arg, Array) or not arg.committed:
            continue
        devices = arg.sharding._device_list
        if first is None:
            first = (i, arg, devices)
        elif devices is not first[2] and list(devices) != list(first[2]):
            described = [_placed_argument(arg_names[j] if arg_names is not None else f"args[{j}]", array,
                                          [d.id for d in placed], fun_name)
                         for j, array, placed in (first, (i, arg, devices))]
            raise ValueError(f"Received incompatible devices for jitted computation. Got {described[0]} and "
                             f"{described[1]}")


def _placed_argument(name: str, array: Array, device_ids: list[int], fun_name: str) -> str:
    """An argument as JAX's incompatible-devices error describes it."""
    return (f"argument {name} of {fun_name} with shape {str(array.aval).lstrip('~')} and with device ids "
            f"{device_ids} on platform CPU")


def _check_host_data_agrees(value: np.ndarray, sharding: Sharding) -> None:
    """Host data placed on devices of several processes must have one shape and dtype everywhere, and go to
    the same layout over the same devices in the same order: a mesh built from another device order on one
    process fails here, naming each process's placement, instead of computing a wrong result. A user's own
    thread (a prefetching loader) places data without this check (history.ordered)."""
    from ..runtime.distributed import runtime

    processes = sharding.process_indices
    rt = runtime()
    if rt is None or rt.num_processes == 1 or len(processes) < 2 or rt.process_id not in processes \
            or not ordered():
        return
    rt.process_group(processes).check_same("device_put of host data",
                                           f"{(value.shape, value.dtype.str)} onto {placement(sharding)}")


def _note_placement(what: str, shape: tuple[int, ...], dtype: np.dtype, sharding: Sharding) -> None:
    """Record the creation of an array spanning several processes in their history: processes that build it
    with different shapes, dtypes or device orders are stopped at their next communication, which names it."""
    processes = sharding.process_indices
    if len(processes) > 1 and device_table.process_index() in processes:
        note(processes, f"{what} {shape} {np.dtype(dtype).str} {placement(sharding)}|{user_site_key()}", jit_call=False)


def device_put(x: Any, device: Any = None, *, src: Any = None, donate: bool = False, may_alias: Any = None) -> Any:
    """Place `x` (a pytree of host values or Arrays) on `device`: a Device, a Sharding, a PartitionSpec
    under `with mesh:`, or a pytree of those matching `x`. Resharding works between any two shardings;
    call it on every process that holds a source or destination device. Under jit, a traced value is
    constrained to that layout (as with_sharding_constraint does)."""
    leaves, structure = tree_flatten(x)
    if device is None or isinstance(device, (Device, Sharding, Format)) or type(device).__name__ == "PartitionSpec":
        targets = [device] * len(leaves)
    else:
        targets, target_structure = tree_flatten(device, is_leaf=lambda t: t is None or isinstance(t, Format))
        if target_structure != structure:
            raise ValueError(
                f"device_put: the tree of shardings {target_structure} does not match the tree of values {structure}."
            )
    return tree_unflatten(structure, [_put_one(leaf, target) for leaf, target in zip(leaves, targets)])


def device_get(x: Any) -> Any:
    """Host NumPy values of every Array in the pytree `x` (other leaves pass through).

    Unlike JAX, an Array spanning devices of other processes is gathered (a collective:
    every process must call device_get on it, as SPMD programs do) instead of raising."""

    def get(leaf: Any) -> Any:
        if not isinstance(leaf, Array):
            return leaf
        if leaf.is_fully_addressable:
            return np.asarray(leaf)
        return global_value(leaf)

    return tree_map(get, x)


def block_until_ready(x: Any) -> Any:
    """meshax computes eagerly, so every value is ready; returns `x`."""
    return x


def make_array_from_callback(shape: Sequence[int], sharding: Sharding,
                             data_callback: Callable[[tuple[slice, ...]], Any], dtype: Any = None) -> Array:
    """Build an Array by asking `data_callback(index)` for each distinct local shard."""
    shape = tuple(int(n) for n in shape)
    here = device_table.process_index()
    index_map = sharding.devices_indices_map(shape)
    boxes = sharding.device_boxes(shape)
    filled: dict[Box, np.ndarray] = {}
    for device, box in boxes.items():
        if device.process_index != here or box in filled:
            continue
        data = np.asarray(data_callback(index_map[device]))
        if data.shape != box_shape(box):
            raise ValueError(
                f"data_callback returned shape {data.shape} for index {index_map[device]} of device {device}, "
                f"but that shard has shape {box_shape(box)}."
            )
        filled[box] = data
    final = _common_dtype(filled.values(), dtype)
    filled = {box: np.asarray(data, final) for box, data in filled.items()}
    _note_placement("make_array_from_callback", shape, final, sharding)
    return _array_from_boxes(shape, final, sharding, filled, False)


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Sharding, arrays: Sequence[Any], *,
                                         dtype: Any = None) -> Array:
    """Assemble an Array from one single-device array per local device, without moving data."""
    shape = tuple(int(n) for n in shape)
    here = device_table.process_index()
    boxes = sharding.device_boxes(shape)
    local = [d for d in boxes if d.process_index == here]
    given: dict[Device, np.ndarray] = {}
    for array in arrays:
        if not isinstance(array, Array) or len(array.sharding.device_set) != 1:
            raise TypeError("make_array_from_single_device_arrays needs meshax Arrays that each live on one device.")
        device = next(iter(array.sharding.device_set))
        if device not in boxes or device.process_index != here:
            raise ValueError(f"an array lives on {device}, which is not a local device of {sharding}.")
        if array.shape != box_shape(boxes[device]):
            raise ValueError(
                f"the array on {device} has shape {array.shape} but its shard of {shape} has shape "
                f"{box_shape(boxes[device])}."
            )
        if device in given:
            raise ValueError(f"make_array_from_single_device_arrays got two arrays for device {device}.")
        given[device] = array.local_buffers()[device]
    missing = [d for d in local if d not in given]
    if missing:
        raise ValueError(f"make_array_from_single_device_arrays got no array for local devices {missing}.")
    if not given and dtype is None:
        raise ValueError("this process holds no shard of the array, so pass dtype= to say what it is.")
    final = _common_dtype(given.values(), dtype)
    buffers = {d: read_only(np.asarray(given[d], final)) for d in local}
    _note_placement("make_array_from_single_device_arrays", shape, final, sharding)
    return Array(shape, final, sharding, buffers)


def make_array_from_process_local_data(sharding: Sharding, local_data: Any,
                                       global_shape: Sequence[int] | None = None) -> Array:
    """Build an Array from the part of the global array that this process's devices hold."""
    data, _ = host_value(local_data)
    here = device_table.process_index()
    shape = tuple(global_shape) if global_shape is not None else _infer_global_shape(sharding, data.shape)
    boxes = {d: b for d, b in sharding.device_boxes(shape).items() if d.process_index == here}
    _note_placement("make_array_from_process_local_data", shape, data.dtype, sharding)
    if not boxes:
        return Array(shape, data.dtype, sharding, {})
    origin = tuple((min(b[i][0] for b in boxes.values()), max(b[i][1] for b in boxes.values()))
                   for i in range(len(shape)))
    if box_shape(origin) != data.shape:
        raise ValueError(
            f"process {here} passed local data of shape {data.shape}, but its devices hold the block "
            f"{[slice(a, b) for a, b in origin]} of the global shape {shape}, of shape {box_shape(origin)}."
        )
    filled = {
        box: np.array(data[tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(box, origin))], copy=True)
        for box in unique_boxes(boxes.items())
    }
    return _array_from_boxes(shape, data.dtype, sharding, filled, False)


def _infer_global_shape(sharding: Sharding, local_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Each dimension grows by the number of process-level blocks it is split into."""
    if not isinstance(sharding, NamedSharding):
        return local_shape
    sharding.check_rank(len(local_shape))
    here = device_table.process_index()
    parts = sharding.shards_per_dim(len(local_shape))
    local = [sharding.shard_coordinates(d, len(local_shape)) for d in sharding.mesh.local_devices]
    if not local:
        raise ValueError(f"process {here} holds no device of {sharding}; pass global_shape= explicitly.")
    shape = []
    for dim, size in enumerate(local_shape):
        held = len({c[dim] for c in local})
        shape.append(size * parts[dim] // held)
    return tuple(shape)


def _common_dtype(buffers: Any, dtype: Any) -> np.dtype:
    if dtype is not None:
        return canonicalize_dtype(dtype)
    kinds = {np.asarray(b).dtype for b in buffers}
    if len(kinds) > 1:
        raise ValueError(f"the shards have different dtypes {sorted(map(str, kinds))}; pass dtype= to choose one.")
    return canonicalize_dtype(kinds.pop())

