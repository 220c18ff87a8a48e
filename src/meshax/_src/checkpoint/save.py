"""save and async_save: every process writes the shards it owns, one writer per replica set."""
from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..runtime import devices as device_table
from ..runtime.distributed import live_processes
from ..arrays.array import Array
from ..runtime.channels import Channel
from ..sharding.shardings import Box, unique_boxes
from . import agreement, checksums, commit, metadata, zarr_io
from .metadata import LeafInfo


@dataclass
class _LeafPlan:
    """What the job writes for one leaf: the array's geometry and this process's chunks."""

    info: LeafInfo
    shape: tuple[int, ...] = ()
    dtype: np.dtype | None = None
    chunks: tuple[int, ...] = ()
    local: list[tuple[Box, np.ndarray]] = field(default_factory=list)


def _owned_boxes(array: Array) -> list[tuple[Box, np.ndarray]]:
    """The boxes this process writes: those whose replica set's first device is here."""
    here = device_table.process_index()
    order = {d: i for i, d in enumerate(array.sharding._device_list)}
    buffers = array.local_buffers()
    owned = []
    for box, devices in unique_boxes(array.sharding.device_boxes(array.shape).items()).items():
        first = min(devices, key=order.__getitem__)
        if first.process_index == here and all(b > a for a, b in box):
            owned.append((box, buffers[first]))
    return owned


def _plan_leaf(keys: tuple[tuple[str, int], ...], value: Any) -> _LeafPlan:
    kind = metadata.leaf_kind(value)
    if kind == "None":
        return _LeafPlan(LeafInfo(keys, kind))
    if isinstance(value, Array) and value.committed:
        shard = tuple(value.sharding.shard_shape(value.shape))
        plan = _LeafPlan(LeafInfo(keys, kind, shard), value.shape, value.dtype,
                         zarr_io.chunk_shape_of(value.shape, shard), _owned_boxes(value))
        return plan
    # Host data (NumPy, scalars, uncommitted arrays): every process holds it whole; process 0 writes (a copy of) it.
    writer = device_table.process_index() == 0
    host = np.array(value, copy=True) if writer else np.asarray(value)
    if host.dtype.kind not in "biufcV":
        name = ".".join(k for k, _ in keys)
        raise TypeError(f"leaf '{name}' is a {type(value).__name__} of dtype {host.dtype}, which a checkpoint cannot "
                        "hold; save arrays, numbers and None only (keep other values out of the saved pytree).")
    whole = tuple((0, n) for n in host.shape)
    local = [(whole, host)] if writer and host.size else []
    return _LeafPlan(LeafInfo(keys, kind, host.shape), host.shape, host.dtype,
                     zarr_io.chunk_shape_of(host.shape, host.shape), local)


class _Save:
    """One save of a pytree to `path`, in the order every process follows.

    Creating it (on the calling thread) checks the path and has every process agree on path, step and tree
    (agreement.py), raising on all of them otherwise; `run` then writes and commits. `skip` (agreed through
    `latest`, the newest step each process sees): agree, then write nothing (CheckpointManager's refusals)."""

    def __init__(self, path: Any, pytree: Any, force: bool, timeout: float, item: str | None = None,
                 after_commit: Callable[[], None] | None = None, *, step: int | None = None,
                 latest: int | None = None, skip: bool = False) -> None:
        self.path = os.path.abspath(os.fspath(path))  # the directory that the commit's rename creates
        self.item = item  # the pytree's folder inside it (CheckpointManager's steps), or None for path itself
        self.after_commit = after_commit
        self.step = step
        self.start_ns = time.time_ns()
        proposal = agreement.Proposal("save", self.path, step, latest=latest)
        try:
            pairs, _ = metadata.flatten(pytree)
            self.plans = [_plan_leaf(keys, value) for keys, value in pairs]
            names = [p.info.name for p in self.plans]
            if len(set(names)) != len(names):
                raise ValueError(f"two leaves of the pytree have the same checkpoint name among {names}; "
                                 "rename a key.")
            proposal.leaves = [agreement.describe_leaf(p.info.name, value, True)
                               for p, (_, value) in zip(self.plans, pairs)]
            if not skip:
                commit.check_path(self.path, force, writer=device_table.process_index() == 0)
        except Exception as error:  # every process fails, this one with its own error
            proposal.problem = error
        self.save_id = agreement.agree(proposal)
        self.skipped = skip
        if skip:
            return
        self.tmp = commit.prepare(self.path)
        self.folder = self.tmp if item is None else os.path.join(self.tmp, item)
        self.agreement = commit.Agreement(self.path, timeout)

    def run(self) -> None:
        """Write this process's shards and commit; a save that fails leaves nothing behind (process 0 removes
        the temporary directory, so that the space it took is free for the next save, as Orbax does)."""
        try:
            self._write_and_commit()
        except BaseException:
            if device_table.process_index() == 0:
                shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    def _write_and_commit(self) -> None:
        here = device_table.process_index()
        arrays = [p for p in self.plans if p.dtype is not None]
        if here == 0:
            os.makedirs(self.folder, exist_ok=True)
            for plan in arrays:
                zarr_io.write_metadata(os.path.join(self.folder, plan.info.name), plan.shape, plan.dtype, plan.chunks)
        self.agreement.wait("created")
        written, crcs = [], {}
        files = [os.path.join(self.folder, p.info.name, "zarr.json") for p in arrays] if here == 0 else []
        for plan in arrays:
            if not plan.local:
                continue
            folder = os.path.join(self.folder, plan.info.name)
            for box, data in plan.local:
                index = tuple(start // c for (start, _), c in zip(box, plan.chunks))
                path, crc = zarr_io.write_chunk(folder, index, data, plan.chunks)
                files.append(path)
                crcs.setdefault(plan.info.name, {})[checksums.chunk_key(index)] = crc
            written.append((plan.info.name, plan.info.write_shape))
        files.append(checksums.write_process_file(self.folder, here, self.step, self.save_id, crcs))
        if here == 0:
            files.append(checksums.write_save_file(self.folder, self.step, self.save_id, list(live_processes())))
        zarr_io.sync(files, self.tmp)  # every shard of this process is on disk before it says so
        metadata.write_array_metadatas(self.folder, here, written)
        self.agreement.wait("written")
        if here == 0:
            metadata.write_pytree_metadata(self.folder, [p.info for p in self.plans], self.start_ns)
            if self.item is not None:
                metadata.write_checkpoint_metadata(self.tmp, self.start_ns, {self.item: metadata.HANDLER})
            commit.commit(self.tmp, self.path)
            if self.after_commit is not None:
                self.after_commit()
        self.agreement.wait("committed")


def save(path: Any, pytree: Any, *, force: bool = False, timeout: float = 300.0) -> None:
    """Write `pytree` to the directory `path` as an Orbax-readable checkpoint; call it on every process.

    Each process writes only the shards it owns (the first device of each replica set);
    the checkpoint appears at `path` only once every process has finished. Processes passing
    different paths or trees (or any process unable to save) make every process raise, naming the
    difference, before anything is written. `force=True` replaces an existing checkpoint, which
    stays restorable until the new one is committed."""
    _wait_for_pending()
    _Save(path, pytree, force, timeout).run()


class AsyncSave:
    """A save running in a background thread; `wait()` blocks until it is committed.

    The thread is not a daemon: a program that ends while it runs waits for the commit."""

    def __init__(self, job: _Save) -> None:
        self.path = job.path
        self._error: BaseException | None = None
        self._reported = False  # whether wait() raised the error
        # Its barriers interleave with the training's collectives differently on each process: they go in a
        # history of their own (the thread uses no MPI).
        channel = Channel("checkpoint-save")
        self._thread = threading.Thread(target=self._run, args=(job, channel), name="meshax-checkpoint-save")
        self._thread.start()
        # A program that ends meanwhile waits for the commit before the interpreter's exit shuts the thread
        # pools down, not after. The thread then starts no thread of its own (zarr_io: Python 3.12.1 refuses).
        threading._register_atexit(self._finish_at_exit)  # type: ignore[attr-defined]

    def _finish_at_exit(self) -> None:
        """The program ended: wait for the commit, and say why the save failed if it did and nobody asked."""
        self._thread.join()
        if self._error is not None and not self._reported:
            self._reported = True
            lines = traceback.format_exception(type(self._error), self._error, self._error.__traceback__)
            sys.stderr.write(f"meshax: the asynchronous save to {self.path}, which the program's end waited for, "
                             f"failed:\n{''.join(lines)}")
            sys.stderr.flush()

    def _run(self, job: _Save, channel: Channel) -> None:
        try:
            with channel.active():
                job.run()
        except BaseException as error:  # reported by wait()
            self._error = error

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the save to commit (at most `timeout` s); re-raises its error."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the asynchronous save to {self.path} did not finish within {timeout:g} s.")
        if self._error is not None:
            self._reported = True
            raise self._error


def async_save(path: Any, pytree: Any, *, force: bool = False, timeout: float = 300.0) -> AsyncSave:
    """Start saving `pytree` to `path` in the background and return a handle whose `wait()` commits it.

    meshax arrays are immutable, so training may go on meanwhile; host (NumPy) leaves are copied."""
    global _pending
    _wait_for_pending()
    _pending = AsyncSave(_Save(path, pytree, force, timeout))
    return _pending


_pending: AsyncSave | None = None


def _wait_for_pending() -> None:
    """Let the previous async_save commit first: saves run one at a time, in the same order everywhere."""
    global _pending
    if _pending is not None:
        pending, _pending = _pending, None
        pending.wait()
