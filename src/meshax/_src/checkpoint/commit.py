"""Atomic commit of a checkpoint written by many processes, and the agreement it needs.

Every process writes into `<path>.meshax-checkpoint-tmp`; once all of them have said
(through the coordinator's barriers) that their shards are on disk, process 0 writes the
pytree metadata and renames the directory to `<path>`, the single step that commits it.
A save that dies half-way leaves only the temporary directory, which restore ignores and
the next save to that path (or CheckpointManager) removes.
"""
from __future__ import annotations

import itertools
import os
import shutil

from .. import devices as device_table
from .zarr_io import sync_dir

TMP_SUFFIX = ".meshax-checkpoint-tmp"
_OLD_SUFFIX = ".meshax-checkpoint-old"
_saves = itertools.count()


def temporary_path(path: str) -> str:
    return path + TMP_SUFFIX


def is_temporary(name: str) -> bool:
    return name.endswith((TMP_SUFFIX, _OLD_SUFFIX))


class Agreement:
    """The barriers of one save among all processes of the job (none in a job of one process)."""

    def __init__(self, path: str, timeout: float) -> None:
        from ..runtime.distributed import runtime

        rt = runtime()
        self.client = rt.client if rt is not None and rt.num_processes > 1 else None
        self.path = path
        self.timeout = timeout
        self.sequence = next(_saves)  # every process saves in the same order, so the names agree

    def wait(self, stage: str) -> None:
        """Block until every process reached `stage` of this save; a timeout names the missing ones."""
        if self.client is None:
            return
        from ..runtime.client import CoordinatorError

        try:
            self.client.barrier(f"meshax-checkpoint-{self.sequence}-{stage}", self.timeout)
        except CoordinatorError as error:
            raise TimeoutError(
                f"saving the checkpoint {self.path}: not every process reached '{stage}' within "
                f"{self.timeout:g} s ({str(error).rstrip('.')}); every process must call save() with the same path."
            ) from None


def prepare(path: str, force: bool) -> str:
    """Check `path` may be written and give a fresh temporary directory (process 0 creates it)."""
    if os.path.exists(path) and not force:
        raise ValueError(
            f"the checkpoint {path} already exists; pass force=True to overwrite it or choose another path."
        )
    tmp = temporary_path(path)
    if device_table.process_index() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
    return tmp


def commit(tmp: str, path: str) -> None:
    """Make the finished `tmp` visible as `path` with one rename (process 0 only)."""
    sync_dir(tmp)
    old = path + _OLD_SUFFIX
    if os.path.exists(path):
        shutil.rmtree(old, ignore_errors=True)
        os.rename(path, old)
    os.rename(tmp, path)
    sync_dir(os.path.dirname(path) or ".")
    shutil.rmtree(old, ignore_errors=True)


def remove_partial(directory: str) -> list[str]:
    """Delete the leftovers of interrupted saves directly under `directory`; returns their names."""
    if not os.path.isdir(directory):
        return []
    removed = [name for name in sorted(os.listdir(directory)) if is_temporary(name)]
    for name in removed:
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    return removed


def check_committed(path: str) -> None:
    """Raise a clear error unless `path` is a committed checkpoint directory."""
    if os.path.isdir(path):
        return
    if os.path.isdir(temporary_path(path)):
        raise FileNotFoundError(
            f"the checkpoint {path} was never committed: its save was interrupted (the partial data is in "
            f"{temporary_path(path)}); restore an earlier checkpoint."
        )
    raise FileNotFoundError(f"no checkpoint at {path}; check the path (save() creates it).")
