"""multihost_utils: moving host values between processes and converting host-local and global arrays."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import devices as device_table
from .placement import host_value, make_array_from_process_local_data
from .array import Array
from ..sharding.mesh import Mesh
from ..sharding.shardings import NamedSharding, PartitionSpec
from .transfer import box_shape, global_value
from ..tree.tree_util import prefix_leaves, tree_flatten, tree_unflatten

BARRIER_TIMEOUT_SECONDS = 300.0


def _runtime():
    from ..runtime.distributed import runtime

    rt = runtime()
    return rt if rt is not None and rt.num_processes > 1 else None


def _everyone():
    """The group of every live process (runtime/recovery.py: a job that survives losses goes on without the dead)."""
    from ..runtime.distributed import live_processes

    rt = _runtime()
    return None if rt is None else rt.process_group(live_processes())


def _check_same_shapes(values: list[np.ndarray], what: str) -> None:
    group = _everyone()
    if group is None:
        return
    signatures = group.allgather_object([(v.shape, v.dtype.str) for v in values])
    for process, signature in enumerate(signatures):
        if signature != signatures[0]:
            raise ValueError(
                f"{what}: process {process} passed values of shapes/dtypes {signature}, but process 0 passed "
                f"{signatures[0]}; every process must pass the same shapes."
            )


def _host_array(leaf: Any) -> np.ndarray:
    return np.asarray(leaf) if isinstance(leaf, Array) else host_value(leaf)[0]


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Host values stacked (or concatenated, tiled) over processes; a global Array gives its global value."""
    leaves, structure = tree_flatten(in_tree)
    spanning = [isinstance(leaf, Array) and not leaf.is_fully_addressable for leaf in leaves]
    host = [_host_array(leaf) for leaf, spans in zip(leaves, spanning) if not spans]
    _check_same_shapes(host, "process_allgather")
    group = _everyone()
    results = []
    for leaf, spans in zip(leaves, spanning):
        if spans:
            results.append(global_value(leaf))
            continue
        value = _host_array(leaf)
        stacked = value[None] if group is None else group.allgather(value)
        results.append(np.concatenate(list(stacked), axis=0) if tiled and value.ndim else stacked)
    return tree_unflatten(structure, results)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Every process gets the source process's values (process 0's by default)."""
    group = _everyone()
    leaves, structure = tree_flatten(in_tree)
    values = [_host_array(leaf) for leaf in leaves]
    if group is None:
        return tree_unflatten(structure, values)
    here = device_table.process_index()
    flags = group.allgather_object(here == 0 if is_source is None else bool(is_source))
    if not any(flags):
        raise ValueError("broadcast_one_to_all: no process has is_source=True; exactly one must.")
    root = flags.index(True)
    layout = group.broadcast_object([(v.shape, v.dtype.str) for v in values], root=root)
    received = []
    for index, (shape, dtype) in enumerate(layout):
        buffer = np.require(values[index], requirements="C") if here == root else np.empty(shape, np.dtype(dtype))
        received.append(group.broadcast(buffer, root=root))
    return tree_unflatten(structure, received)


def sync_global_devices(name: str, timeout: float = BARRIER_TIMEOUT_SECONDS) -> None:
    """Wait until every process reaches the barrier `name`; on timeout, name the absent processes."""
    rt = _runtime()
    if rt is None:
        return
    from ..runtime.client import CoordinatorError

    try:
        rt.client.barrier(f"sync_global_devices:{name}", timeout=timeout)
    except CoordinatorError as error:
        raise TimeoutError(f"sync_global_devices({name!r}) failed: {error}") from None


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Raise AssertionError on every process unless all processes passed equal values."""
    leaves, _ = tree_flatten(in_tree)
    values = [_host_array(leaf) for leaf in leaves]
    group = _everyone()
    if group is None:
        return
    everyone = group.allgather_object(values)
    differing = [
        process for process, theirs in enumerate(everyone)
        if len(theirs) != len(values) or not all(
            a.shape == b.shape and np.array_equal(a, b, equal_nan=True) for a, b in zip(theirs, everyone[0]))
    ]
    if differing:
        raise AssertionError(
            f"{fail_message} Values differ between processes: processes {differing} disagree with process 0.".strip()
        )


def _specs_for(pspecs: Any, inputs: Any) -> list[PartitionSpec]:
    """One PartitionSpec per leaf of `inputs`: `pspecs` is one for all or a tree of them that is a prefix of
    theirs (None: replicated)."""
    try:
        specs = prefix_leaves(pspecs, inputs, is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)
    except ValueError as error:
        raise ValueError(f"pspecs {pspecs!r} are not a prefix of the inputs' tree {tree_flatten(inputs)[1]}: give "
                         f"one PartitionSpec, or a tree of them that is a prefix of theirs ({error}).") from None
    return [spec or PartitionSpec() for spec in specs]


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Mesh, pspecs: Any) -> Any:
    """Global Arrays from each process's host-local values; dimensions sharded across processes grow."""
    leaves, structure = tree_flatten(local_inputs)
    specs = _specs_for(pspecs, local_inputs)
    global_mesh.local_mesh  # raises unless each process's devices form a contiguous block
    outputs = [
        leaf if isinstance(leaf, Array) and not leaf.is_fully_addressable
        else make_array_from_process_local_data(NamedSharding(global_mesh, spec), leaf)
        for leaf, spec in zip(leaves, specs)
    ]
    return tree_unflatten(structure, outputs)


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Mesh, pspecs: Any) -> Any:
    """Each process's part of global Arrays, as Arrays over the local mesh (no data moves)."""
    leaves, structure = tree_flatten(global_inputs)
    specs = _specs_for(pspecs, global_inputs)
    local_mesh = global_mesh.local_mesh
    return tree_unflatten(structure, [_host_local(leaf, local_mesh, spec) for leaf, spec in zip(leaves, specs)])


def _host_local(array: Array, local_mesh: Mesh, spec: PartitionSpec) -> Array:
    here = device_table.process_index()
    boxes = {d: b for d, b in array.sharding.device_boxes(array.shape).items() if d.process_index == here}
    block = tuple((min(b[i][0] for b in boxes.values()), max(b[i][1] for b in boxes.values()))
                  for i in range(array.ndim))
    local_sharding = NamedSharding(local_mesh, spec)
    local_shape = box_shape(block)
    expected = local_sharding.device_boxes(local_shape)
    for device, box in boxes.items():
        shifted = tuple((a - o, b - o) for (a, b), (o, _) in zip(box, block))
        if expected.get(device) != shifted:
            raise ValueError(
                f"the array's sharding {array.sharding} does not match {spec!r} over the global mesh; "
                "pass the PartitionSpec the array was sharded with."
            )
    buffers = array.local_buffers()
    return Array(local_shape, array.dtype, local_sharding, {d: buffers[d] for d in boxes}, array.weak_type)
