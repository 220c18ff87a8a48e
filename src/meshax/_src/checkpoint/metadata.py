"""The JSON files of an Orbax PyTree checkpoint, and pytrees to and from their flat leaf names.

A leaf's name is its key path joined by '.' (`params.0.w`), the name of its Zarr array;
`_METADATA` records each leaf's keys (key_type 1: sequence index, 2: dict key) and kind.
"""
from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..tree.registry import DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey
from ..tree.tree_util import tree_flatten_with_path

METADATA = "_METADATA"
CHECKPOINT_METADATA = "_CHECKPOINT_METADATA"
SHARDINGS = "_sharding"
HANDLER = "orbax.checkpoint._src.handlers.pytree_checkpoint_handler.PyTreeCheckpointHandler"
SEQUENCE, DICT = 1, 2


@dataclass(frozen=True)
class LeafInfo:
    """One leaf of a saved pytree: its key path, array name and kind ('jax.Array', 'np.ndarray', 'scalar', 'None')."""

    keys: tuple[tuple[str, int], ...]
    kind: str
    write_shape: tuple[int, ...] | None = None

    @property
    def name(self) -> str:
        return ".".join(k for k, _ in self.keys)


def _key_entry(key: Any) -> tuple[str, int]:
    if isinstance(key, SequenceKey):
        return str(key.idx), SEQUENCE
    if isinstance(key, DictKey):
        return str(key.key), DICT
    if isinstance(key, GetAttrKey):
        return key.name, DICT
    if isinstance(key, FlattenedIndexKey):
        return str(key.key), SEQUENCE
    return str(key), DICT


def flatten(tree: Any) -> tuple[list[tuple[tuple[tuple[str, int], ...], Any]], Any]:
    """[(keys, leaf)] of `tree` with None as a leaf, and its structure."""
    pairs, structure = tree_flatten_with_path(tree, is_leaf=lambda x: x is None)
    return [(tuple(_key_entry(k) for k in path), leaf) for path, leaf in pairs], structure


def tree_metadata(leaves: list[LeafInfo]) -> dict[str, Any]:
    """The `tree_metadata` of `_METADATA` (Orbax's keys are the tuple of names, printed by Python)."""
    out = {}
    for leaf in leaves:
        value: dict[str, Any] = {"value_type": leaf.kind, "skip_deserialize": leaf.kind == "None"}
        if leaf.write_shape is not None:
            value["write_shape"] = list(leaf.write_shape)
        out[str(tuple(k for k, _ in leaf.keys))] = {
            "key_metadata": [{"key": k, "key_type": t} for k, t in leaf.keys], "value_metadata": value}
    return out


def write_json(path: str, value: Any) -> None:
    with open(path, "w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())


def write_pytree_metadata(directory: str, leaves: list[LeafInfo], start_ns: int) -> None:
    """`_METADATA`, `_CHECKPOINT_METADATA` and `_sharding`, as Orbax's PyTreeCheckpointHandler writes them."""
    write_json(os.path.join(directory, METADATA), {
        "tree_metadata": tree_metadata(leaves), "use_ocdbt": False, "use_zarr3": True,
        "store_array_data_equal_to_fill_value": True, "custom_metadata": None})
    write_checkpoint_metadata(directory, start_ns, HANDLER)
    # Orbax restores an array without a target onto the sharding recorded here; one device is the only
    # layout valid in any job, so every array is recorded as on the first CPU device.
    single = json.dumps({"sharding_type": "SingleDeviceSharding", "device_str": "cpu:0"})
    write_json(os.path.join(directory, SHARDINGS), {
        base64.b64encode(leaf.name.encode()).decode(): single for leaf in leaves if leaf.kind == "jax.Array"})


def write_checkpoint_metadata(directory: str, start_ns: int, handlers: Any) -> None:
    write_json(os.path.join(directory, CHECKPOINT_METADATA), {
        "item_handlers": handlers, "metrics": {}, "performance_metrics": {}, "init_timestamp_nsecs": start_ns,
        "commit_timestamp_nsecs": time.time_ns(), "custom_metadata": {}})


def write_array_metadatas(directory: str, process: int, entries: list[tuple[str, tuple[int, ...]]]) -> None:
    """`array_metadatas/process_<i>`: the write and chunk shape of each array this process wrote."""
    folder = os.path.join(directory, "array_metadatas")
    os.makedirs(folder, exist_ok=True)
    write_json(os.path.join(folder, f"process_{process}"), {"array_metadatas": [
        {"array_metadata": {"param_name": name, "write_shape": list(shape), "chunk_shape": list(shape),
                            "ext_metadata": None}} for name, shape in entries]})


def read_pytree_metadata(directory: str) -> tuple[list[LeafInfo], dict[str, Any]]:
    """The leaves recorded in `directory/_METADATA` (in Orbax's order) and the file's other fields."""
    path = os.path.join(directory, METADATA)
    try:
        with open(path) as f:
            data = json.load(f)
        leaves = []
        for entry in data["tree_metadata"].values():
            keys = tuple((str(k["key"]), int(k["key_type"])) for k in entry["key_metadata"])
            value = entry["value_metadata"]
            shape = value.get("write_shape")
            leaves.append(LeafInfo(keys, value["value_type"], None if shape is None else tuple(shape)))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{directory} is not a checkpoint: it has no {METADATA} file; pass the directory that save() wrote."
        ) from None
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"the checkpoint's {path} is corrupt ({error!r}); it cannot be restored.") from None
    return leaves, data


def build_tree(leaves: list[LeafInfo], values: list[Any]) -> Any:
    """The nested dicts and lists that `leaves`' key paths describe, holding `values`."""
    root: dict[Any, Any] = {}
    kinds: dict[int, int] = {}
    for leaf, value in zip(leaves, values):
        node = root
        for depth, (key, kind) in enumerate(leaf.keys):
            kinds[id(node)] = kind
            if depth == len(leaf.keys) - 1:
                node[key] = value
            else:
                node = node.setdefault(key, {})

    def convert(node: Any) -> Any:
        if not isinstance(node, dict) or id(node) not in kinds:
            return node
        if kinds[id(node)] == SEQUENCE:
            return [convert(node[k]) for k in sorted(node, key=int)]
        return {k: convert(v) for k, v in node.items()}

    return convert(root) if leaves else {}


def leaf_kind(value: Any) -> str:
    """Orbax's value_type of a leaf being saved."""
    from ..arrays.array import Array

    if value is None:
        return "None"
    if isinstance(value, Array):
        return "jax.Array"
    if isinstance(value, (int, float, complex, bool, np.number, np.bool_)):
        return "scalar"
    return "np.ndarray"
