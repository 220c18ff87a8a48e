"""Before a save (or a restore onto arrays spanning processes) the processes agree on what they do.

Every process describes its call (path, step, each leaf's shape, dtype and layout, host values'
checksums, and anything that stops it) and the processes exchange the descriptions on the calling
thread, through the job's process group, before any file is touched. Unless all describe the same
call, every process raises, naming the difference and which processes hold which side of it: a
checkpoint is never committed from processes that wrote different things.
"""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

import crc32c
import numpy as np

from ..arrays.array import Array
from ..sharding.shardings import Sharding


@dataclass
class Proposal:
    """What one process asks for."""

    action: str  # "save" or "restore", for messages
    path: str
    step: int | None = None
    leaves: list[tuple[str, str, str]] = field(default_factory=list)  # (name, description, layout digest)
    problem: BaseException | None = None  # what stops this process (raised on it, reported by the others)
    latest: Any = None  # CheckpointManager.save: the newest committed step this process sees


def _sharding_layout(sharding: Sharding, shape: tuple[int, ...] | None) -> str:
    devices = sharding._device_list
    if shape is None:
        return repr([d.id for d in devices])
    boxes = sharding.device_boxes(shape)
    return repr([(d.id, boxes[d]) for d in devices])


def describe_leaf(name: str, value: Any, compare_values: bool) -> tuple[str, str, str]:
    """(name, readable description, digest of what must match exactly) of a leaf to save or a restore target;
    with `compare_values`, host values (which process 0 alone writes) must be equal too."""
    if value is None:
        return name, "None", ""
    if isinstance(value, Sharding):
        return name, f"sharding {value!r}", _sharding_layout(value, None)
    if isinstance(value, Array) and value.committed or type(value).__name__ == "ShapeDtypeStruct":
        shape, sharding = tuple(value.shape), getattr(value, "sharding", None)
        text = f"{np.dtype(value.dtype).name}{list(shape)}"
        if sharding is None:
            return name, f"{text} on the host", ""
        return name, f"{text} with {sharding!r}", _sharding_layout(sharding, shape)
    host = np.asarray(value)
    text = f"host {host.dtype.name}{list(host.shape)}"
    if not compare_values or host.dtype.kind not in "biufcV":
        return name, text, ""
    return name, text, f"crc32c {crc32c.crc32c(np.ascontiguousarray(host).reshape(-1).view(np.uint8))}"


def _digest(leaves: list[tuple[str, str, str]]) -> str:
    return hashlib.sha256(repr(leaves).encode()).hexdigest()


def _processes(ranks: list[int]) -> str:
    return f"process {ranks[0]}" if len(ranks) == 1 else f"processes {ranks}"


def _sides(values: list[Any], ranks: list[int], show: Any = repr) -> str:
    """'processes [0, 1] <a>, process 2 <b>': which processes hold which value."""
    groups: dict[Any, list[int]] = {}
    for value, rank in zip(values, ranks):
        groups.setdefault(value, []).append(rank)
    return ", ".join(f"{_processes(members)} {show(value)}" for value, members in groups.items())


def _group(ranks: list[int] | None) -> Any:
    from ..runtime.distributed import live_processes, runtime

    rt = runtime()
    if rt is None or rt.num_processes < 2:
        return None
    ranks = list(live_processes()) if ranks is None else ranks
    return rt.process_group(ranks) if len(ranks) > 1 else None


def agree(proposal: Proposal, ranks: list[int] | None = None) -> str:
    """Check that every process of `ranks` (all by default; call it on each of them) proposes the same; raise on
    every one of them otherwise. Returns an id of this save or restore, the same on every process."""
    group = _group(ranks)
    token = secrets.token_hex(8)
    if group is None:
        if proposal.problem is not None:
            raise proposal.problem
        return token
    problem = None if proposal.problem is None else f"{type(proposal.problem).__name__}: {proposal.problem}"
    mine = (proposal.path, proposal.step, proposal.latest, _digest(proposal.leaves), problem, token)
    everyone = group.allgather_object(mine)
    members = list(group.ranks)
    where = f"{proposal.action} of {proposal.path}"
    failed = [(rank, theirs[4]) for rank, theirs in zip(members, everyone) if theirs[4] is not None]
    if proposal.problem is not None:
        raise proposal.problem
    if failed:
        details = "; ".join(f"process {rank}: {text}" for rank, text in failed)
        raise ValueError(f"the {where} cannot proceed because {_processes([r for r, _ in failed])} failed "
                         f"({details}); fix that and call it again on every process.")
    for position, what, fix in ((1, "step", "pass the same step"), (0, "checkpoint path", "pass the same path"),
                                (2, "newest committed step in the directory",
                                 "every process must see the same directory (a shared file system)")):
        values = [theirs[position] for theirs in everyone]
        if len(set(values)) > 1:
            raise ValueError(f"the processes disagree on the {what} of the {proposal.action}: "
                             f"{_sides(values, members)}; {fix} on every process.")
    if len({theirs[3] for theirs in everyone}) > 1:
        trees = group.allgather_object(proposal.leaves)  # every process is here: they all saw the digests differ
        raise ValueError(f"the processes disagree on the tree of the {where}: {_tree_difference(trees, members)}; "
                         f"every process must pass the same tree (structure, shapes, dtypes, shardings, host values).")
    return everyone[0][5]


def _tree_difference(trees: list[list[tuple[str, str, str]]], ranks: list[int]) -> str:
    """The first difference between the processes' leaf lists, in words."""
    names = [tuple(name for name, _, _ in tree) for tree in trees]
    if len(set(names)) > 1:
        reference = set(names[0])
        for rank, theirs in zip(ranks, names):
            if set(theirs) != reference:
                missing, extra = sorted(reference - set(theirs)), sorted(set(theirs) - reference)
                return (f"process {rank}'s tree lacks the leaves {missing} and has {extra} compared with process "
                        f"{ranks[0]}'s" if missing or extra else f"process {rank} orders its leaves differently")
    for position, (name, _, _) in enumerate(trees[0]):
        entries = [tree[position][1:] for tree in trees]
        if len(set(entries)) > 1:
            if len({text for text, _ in entries}) > 1:
                return f"leaf '{name}': {_sides([text for text, _ in entries], ranks, str)}"
            what = "values" if entries[0][1].startswith("crc32c") else "device layouts"
            groups: dict[str, list[int]] = {}
            for (_, digest), rank in zip(entries, ranks):
                groups.setdefault(digest, []).append(rank)
            return (f"leaf '{name}' ({entries[0][0]}) holds different {what} on "
                    f"{' and '.join(_processes(members) for members in groups.values())}")
    return "their leaves differ"
