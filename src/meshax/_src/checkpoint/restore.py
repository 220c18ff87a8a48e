"""restore: each process reads only the chunks its devices need, onto any sharding."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..runtime import devices as device_table
from ..arrays.array import Array
from ..sharding.shardings import Sharding, unique_boxes
from ..arrays.transfer import _array_from_boxes
from . import agreement, checksums, commit, metadata, zarr_io
from .metadata import LeafInfo


def _opener(path: str, fields: dict[str, Any], sums: checksums.ChunkChecksums | None) -> Any:
    if fields.get("use_ocdbt"):
        from .ocdbt import OcdbtLeaf

        return lambda name: OcdbtLeaf(path, name, bool(fields.get("use_zarr3")))
    return lambda name: zarr_io.ArraySource(os.path.join(path, name), name, sums)


def _describe(target: Any) -> tuple[Any, tuple[int, ...] | None, np.dtype | None]:
    """(sharding or None for host NumPy, expected shape, wanted dtype) of one target leaf."""
    if isinstance(target, Sharding):
        return target, None, None
    if isinstance(target, Array):
        return target.sharding, target.shape, target.dtype
    if type(target).__name__ == "ShapeDtypeStruct":
        return target.sharding, target.shape, target.dtype
    if target is None:
        return None, None, None
    value = np.asarray(target)
    return None, value.shape, value.dtype


def _read_leaf(path: str, leaf: LeafInfo, opener: Any, target: Any) -> Any:
    if leaf.kind == "None":
        return None
    stored = opener(leaf.name)
    sharding, shape, dtype = _describe(target)
    if shape is not None and tuple(shape) != stored.shape:
        raise ValueError(
            f"checkpoint {path}: leaf '{leaf.name}' has shape {stored.shape} but the target asks for {tuple(shape)}; "
            "pass a target of the saved shape."
        )
    dtype = stored.dtype if dtype is None else np.dtype(dtype)
    try:
        if sharding is None:
            whole = tuple((0, n) for n in stored.shape)
            value = stored.read_box(whole).astype(dtype, copy=False)
            return value.item() if leaf.kind == "scalar" and target is None else value
        here = device_table.process_index()
        start = here / device_table.process_count()  # processes begin at different chunks (see read_boxes)
        boxes = unique_boxes((d, b) for d, b in sharding.device_boxes(stored.shape).items() if d.process_index == here)
        filled = {box: value.astype(dtype, copy=False) for box, value in stored.read_boxes(list(boxes), start).items()}
    except (ValueError, FileNotFoundError) as error:
        raise ValueError(f"checkpoint {path}: cannot read leaf '{leaf.name}': {error}") from None
    except Exception as error:  # a codec failure: checksum mismatch, truncated chunk
        raise ValueError(
            f"checkpoint {path}: leaf '{leaf.name}' has a corrupt chunk ({type(error).__name__}: {error}); "
            "restore another checkpoint."
        ) from None
    return _array_from_boxes(stored.shape, dtype, sharding, filled, False)


def _match(path: str, leaves: list[LeafInfo], target: Any) -> tuple[list[tuple[LeafInfo, Any]], Any]:
    """Pair each target leaf with the saved leaf of the same key path; mismatches raise naming the leaves."""
    pairs, structure = metadata.flatten(target)
    saved = {leaf.name: leaf for leaf in leaves}
    wanted = {".".join(k for k, _ in keys) for keys, _ in pairs}
    missing = sorted(wanted - saved.keys())
    extra = sorted(saved.keys() - wanted)
    if missing or extra:
        raise ValueError(
            f"checkpoint {path} does not match the target tree: leaves missing from the checkpoint {missing}, "
            f"saved leaves the target lacks {extra}; pass a target with the saved structure (or target=None)."
        )
    return [(saved[".".join(k for k, _ in keys)], value) for keys, value in pairs], structure


def _spanned_processes(target: Any) -> list[int]:
    """The processes that the target's shardings span: those that must restore together."""
    from ..tree.tree_util import tree_leaves

    ranks: set[int] = set()
    for leaf in tree_leaves(target, is_leaf=lambda x: isinstance(x, Sharding)):
        sharding = _describe(leaf)[0] if leaf is not None else None
        if sharding is not None:
            ranks.update(sharding.process_indices)
    return sorted(ranks)


def _open(path: str, step: int | None) -> tuple[str, list[LeafInfo], Any]:
    """(the directory holding the pytree, its leaves, their opener)."""
    path = commit.check_committed(path)
    item = os.path.join(path, "default")  # a step of a CheckpointManager (meshax's or Orbax's): its single item
    if not os.path.exists(os.path.join(path, metadata.METADATA)) and os.path.isdir(item):
        path = item
    leaves, fields = metadata.read_pytree_metadata(path)
    sums = None if fields.get("use_ocdbt") else checksums.load(path, step)
    return path, leaves, _opener(path, fields, sums)


def restore(path: Any, target: Any = None) -> Any:
    """Read the checkpoint at `path` (meshax's or Orbax's) onto the layout of `target`.

    `target` is a pytree of Arrays, ShapeDtypeStructs with `sharding=`, or Shardings (shape and
    dtype then come from the checkpoint); leaves with no sharding, NumPy leaves, or
    `target=None` give host NumPy arrays. Each process reads only the chunks its devices need,
    checking each chunk whole against its checksums. Processes whose target arrays span other
    processes must restore the same path onto the same tree: otherwise all of them raise, naming
    the difference."""
    return restore_step(path, target, None)


def restore_step(path: Any, target: Any, step: int | None) -> Any:
    """`restore`, where `step` is the step the checkpoint must hold (CheckpointManager), which the processes
    restoring together must all ask for."""
    path = os.path.abspath(os.fspath(path))
    ranks = _spanned_processes(target) if target is not None else []
    proposal = agreement.Proposal("restore", path, step)
    try:
        folder, leaves, opener = _open(path, step)
        proposal.path = folder
        pairs, structure = _match(folder, leaves, target) if target is not None else (None, None)
        if pairs is not None:
            proposal.leaves = [agreement.describe_leaf(leaf.name, value, False) for leaf, value in pairs]
    except Exception as error:  # every process restoring together fails, this one with its own error
        proposal.problem = error
    if device_table.process_index() in ranks:
        agreement.agree(proposal, ranks)
    elif proposal.problem is not None:
        raise proposal.problem
    if pairs is None:
        return metadata.build_tree(leaves, [_read_leaf(folder, leaf, opener, None) for leaf in leaves])
    from ..tree.tree_util import tree_unflatten

    return tree_unflatten(structure, [_read_leaf(folder, leaf, opener, value) for leaf, value in pairs])
