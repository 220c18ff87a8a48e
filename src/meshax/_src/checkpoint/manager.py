"""CheckpointManager: numbered step directories under one folder, keeping the last few."""
from __future__ import annotations

import functools
import os
import shutil
from typing import Any

from ..runtime import devices as device_table
from . import commit, metadata
from .restore import restore_step
from .save import AsyncSave, _Save

ITEM = "default"  # the item folder inside a step, as Orbax's CheckpointManager names a single item


class CheckpointManager:
    """Saves pytrees as `directory/<step>/default` (Orbax's layout), keeping the newest `max_to_keep` steps.

    Only committed steps count: a step whose save was interrupted is invisible and is removed by
    the next save; a step whose replacement (`overwrite=True`) was interrupted stays the old one."""

    def __init__(self, directory: Any, max_to_keep: int | None = None, *, timeout: float = 300.0) -> None:
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"max_to_keep must be at least 1 (or None to keep every step); got {max_to_keep}.")
        self.directory = os.path.abspath(os.fspath(directory))
        self.max_to_keep = max_to_keep
        self.timeout = timeout
        self._pending: AsyncSave | None = None
        if device_table.process_index() == 0:  # leftovers of saves a crash cut short take space: free it (Orbax too)
            commit.recover_directory(self.directory)

    def all_steps(self) -> list[int]:
        """The committed steps, oldest first (a step whose replacement died half-way counts, as its old copy)."""
        if not os.path.isdir(self.directory):
            return []
        names = {name.split(".", 1)[0] for name in os.listdir(self.directory)}
        return sorted(int(name) for name in names if name.isdigit() and self._is_step(self._step_path(int(name))))

    @staticmethod
    def _is_step(path: str) -> bool:
        folder = commit.committed(path)
        return folder is not None and os.path.isfile(os.path.join(folder, ITEM, metadata.METADATA))

    def latest_step(self) -> int | None:
        steps = self.all_steps()
        return steps[-1] if steps else None

    def _step_path(self, step: int) -> str:
        return os.path.join(self.directory, str(int(step)))

    def save(self, step: int, pytree: Any, *, asynchronous: bool = False,
             overwrite: bool = False) -> bool | AsyncSave:
        """Save `pytree` as `step` on every process. Returns True once committed, or with `asynchronous=True` the
        running save (its `wait()` commits it); returns False, saving nothing, when `step` is not above the
        latest saved step, as Orbax's CheckpointManager does.

        `overwrite=True` saves such a step anyway, going back in time: it replaces the step if saved (the old
        one stays restorable until the new one is committed) and, once committed, deletes every step above it,
        so that `step` is the latest (a job killed during those deletions leaves the rest: save again with
        overwrite=True). Processes must pass the same step and tree and see the same steps, or all raise."""
        self.wait_until_finished()
        step = int(step)
        latest = self.latest_step()
        skip = not overwrite and latest is not None and step <= latest
        after = functools.partial(self._after_commit, step, overwrite)
        job = _Save(self._step_path(step), pytree, overwrite, self.timeout, item=ITEM, after_commit=after,
                    step=step, latest=latest, skip=skip)
        if job.skipped:
            return False
        if asynchronous:
            self._pending = AsyncSave(job)
            return self._pending
        job.run()
        return True

    def _after_commit(self, step: int, overwrite: bool) -> None:
        """Process 0, once `step` is committed: with `overwrite`, delete the steps above it; then delete the oldest
        steps beyond max_to_keep, and the leftovers of crashed saves."""
        commit.recover_directory(self.directory)
        steps = self.all_steps()
        doomed = [s for s in steps if overwrite and s > step]
        kept = [s for s in steps if s not in doomed]
        if self.max_to_keep is not None:
            doomed += kept[:-self.max_to_keep]
        for old in doomed:
            shutil.rmtree(self._step_path(old), ignore_errors=True)

    def wait_until_finished(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.wait()

    def restore(self, step: int | None = None, target: Any = None) -> Any:
        """Restore `step` (the latest when None) onto `target`'s layout, as `restore` does; processes restoring
        arrays together must ask for the same step (or all for the latest, and see the same one)."""
        self.wait_until_finished()
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"{self.directory} holds no committed checkpoint to restore.")
        folder = commit.committed(self._step_path(step)) or self._step_path(step)  # or the old copy of a crash
        path = os.path.join(folder, ITEM)
        return restore_step(path, target, int(step))

    def close(self) -> None:
        self.wait_until_finished()

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
