"""Atomic commit of a checkpoint written by many processes, the barriers it needs, and crash recovery.

Every process writes into `<path>.meshax-checkpoint-tmp`; once all of them have said
(through the coordinator's barriers) that their shards are on disk, process 0 writes the
pytree metadata and renames the directory to `<path>`, the single step that commits it.
A save that dies half-way leaves only the temporary directory, which restore ignores and
the next save to that path (or CheckpointManager) removes.

Replacing a checkpoint (force=True) first renames it to `<path>.meshax-checkpoint-old` and
deletes that only after the new one is committed. A crash between the two renames leaves only
the old one: restore reads it there, and the next save renames it back before anything else.
"""
from __future__ import annotations

import itertools
import os
import shutil

from ..runtime import devices as device_table
from .metadata import CHECKPOINT_METADATA, METADATA
from .zarr_io import sync_dir

TMP_SUFFIX = ".meshax-checkpoint-tmp"
_OLD_SUFFIX = ".meshax-checkpoint-old"
_saves = itertools.count()


def temporary_path(path: str) -> str:
    return path + TMP_SUFFIX


def old_path(path: str) -> str:
    return path + _OLD_SUFFIX


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


def _is_checkpoint(directory: str) -> bool:
    return any(os.path.isfile(os.path.join(directory, *name)) for name in
               ((METADATA,), (CHECKPOINT_METADATA,), ("default", METADATA)))


def committed(path: str) -> str | None:
    """The directory holding the committed checkpoint `path`: itself, or its old copy when a replacing save died
    between its two renames; None when there is none."""
    if os.path.isdir(path):
        return path
    old = old_path(path)
    return old if os.path.isdir(old) and _is_checkpoint(old) else None


def _cannot_save(path: str, why: str, fix: str, error: type[Exception] = ValueError) -> Exception:
    return error(f"cannot save a checkpoint to {path}: {why}; {fix}.")


def check_path(path: str, force: bool, writer: bool) -> None:
    """Raise a clear error (what is wrong, and the fix) unless this process may save to `path`; `writer`: the
    process that creates, replaces and commits it (process 0) also checks what is there already."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise _cannot_save(path, "it is a file", "choose a directory path (save() creates the directory)",
                           FileExistsError)
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise _cannot_save(path, f"{ancestor} is a file, not a directory", "choose a path inside a directory",
                           NotADirectoryError)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise _cannot_save(path, f"this process may not create files in {ancestor} (read-only or no write "
                           "permission)", "choose a writable directory or change its permissions", PermissionError)
    existing = committed(path) if writer else None
    if existing is not None and not force:
        raise ValueError(f"the checkpoint {path} already exists; pass force=True to overwrite it or choose "
                         "another path.")
    if existing is not None and os.listdir(existing) and not _is_checkpoint(existing):
        raise _cannot_save(path, "the directory exists and is not a checkpoint (force=True replaces only "
                           "checkpoints, never other data)", "choose another path")


def recover(path: str) -> None:
    """Undo what a crashed save left at `path` (process 0): move a lone old copy back, drop leftovers."""
    old = old_path(path)
    if os.path.isdir(old):
        if os.path.isdir(path):
            shutil.rmtree(old, ignore_errors=True)  # the new checkpoint was committed; the old one is garbage
        elif _is_checkpoint(old):
            os.rename(old, path)  # died between the renames: the old checkpoint is the committed one
            sync_dir(os.path.dirname(path) or ".")
    shutil.rmtree(temporary_path(path), ignore_errors=True)


def prepare(path: str) -> str:
    """Recover `path` from any crashed save and give a fresh temporary directory (process 0 creates it)."""
    tmp = temporary_path(path)
    if device_table.process_index() == 0:
        recover(path)
        try:
            os.makedirs(tmp)
        except OSError as error:
            raise _cannot_save(path, f"creating {tmp} failed ({error.strerror or error})",
                               "choose a writable directory", type(error)) from None
    return tmp


def commit(tmp: str, path: str) -> None:
    """Make the finished `tmp` visible as `path` with one rename (process 0 only); a checkpoint it replaces
    stays whole (renamed aside) until then."""
    sync_dir(tmp)
    old = old_path(path)
    if os.path.exists(path):
        shutil.rmtree(old, ignore_errors=True)
        os.rename(path, old)
    os.rename(tmp, path)
    sync_dir(os.path.dirname(path) or ".")
    shutil.rmtree(old, ignore_errors=True)


def recover_directory(directory: str) -> list[str]:
    """Recover every checkpoint directly under `directory` from crashed saves (process 0); returns the names of
    the leftovers it handled."""
    if not os.path.isdir(directory):
        return []
    names = [name for name in sorted(os.listdir(directory)) if is_temporary(name)]
    for name in names:
        base = name[:-len(TMP_SUFFIX)] if name.endswith(TMP_SUFFIX) else name[:-len(_OLD_SUFFIX)]
        recover(os.path.join(directory, base))
    return names


def check_committed(path: str) -> str:
    """The directory holding the committed checkpoint `path` (see `committed`); raise a clear error if none."""
    existing = committed(path)
    if existing is not None:
        return existing
    if os.path.isdir(temporary_path(path)):
        raise FileNotFoundError(
            f"the checkpoint {path} was never committed: its save was interrupted (the partial data is in "
            f"{temporary_path(path)}); restore an earlier checkpoint.")
    raise FileNotFoundError(f"no checkpoint at {path}; check the path (save() creates it).")
