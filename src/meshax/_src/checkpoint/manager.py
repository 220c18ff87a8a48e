"""CheckpointManager: numbered step directories under one folder, keeping the last few."""
from __future__ import annotations

import os
import shutil
from typing import Any

from .. import devices as device_table
from . import commit, metadata
from .restore import restore
from .save import AsyncSave, _Save

ITEM = "default"  # the item folder inside a step, as Orbax's CheckpointManager names a single item


class CheckpointManager:
    """Saves pytrees as `directory/<step>/default` (Orbax's layout), keeping the newest `max_to_keep` steps.

    Only committed steps count: a step whose save was interrupted is invisible and is removed
    by the next save."""

    def __init__(self, directory: Any, max_to_keep: int | None = None, *, timeout: float = 300.0) -> None:
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"max_to_keep must be at least 1 (or None to keep every step); got {max_to_keep}.")
        self.directory = os.path.abspath(os.fspath(directory))
        self.max_to_keep = max_to_keep
        self.timeout = timeout
        self._pending: AsyncSave | None = None

    def all_steps(self) -> list[int]:
        """The committed steps, oldest first."""
        if not os.path.isdir(self.directory):
            return []
        return sorted(int(name) for name in os.listdir(self.directory)
                      if name.isdigit() and os.path.isfile(os.path.join(self.directory, name, ITEM,
                                                                        metadata.METADATA)))

    def latest_step(self) -> int | None:
        steps = self.all_steps()
        return steps[-1] if steps else None

    def _step_path(self, step: int) -> str:
        return os.path.join(self.directory, str(int(step)))

    def save(self, step: int, pytree: Any, *, asynchronous: bool = False) -> AsyncSave | None:
        """Save `pytree` as `step` on every process; with `asynchronous=True` return the running save."""
        self.wait_until_finished()
        if step in self.all_steps():
            raise ValueError(f"step {step} is already saved in {self.directory}; save a new step number.")
        if device_table.process_index() == 0:
            os.makedirs(self.directory, exist_ok=True)
            commit.remove_partial(self.directory)
        job = _Save(self._step_path(step), pytree, False, self.timeout, item=ITEM, after_commit=self._prune)
        if asynchronous:
            self._pending = AsyncSave(job)
            return self._pending
        job.run()
        return None

    def _prune(self) -> None:
        """Delete the oldest committed steps beyond max_to_keep (process 0, after a commit)."""
        if self.max_to_keep is None:
            return
        for step in self.all_steps()[:-self.max_to_keep]:
            shutil.rmtree(self._step_path(step), ignore_errors=True)

    def wait_until_finished(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.wait()

    def restore(self, step: int | None = None, target: Any = None) -> Any:
        """Restore `step` (the latest when None) onto `target`'s layout, as `restore` does."""
        self.wait_until_finished()
        if step is None:
            step = self.latest_step()
            if step is None:
                raise FileNotFoundError(f"{self.directory} holds no committed checkpoint to restore.")
        return restore(os.path.join(self._step_path(step), ITEM), target)

    def close(self) -> None:
        self.wait_until_finished()

    def __enter__(self) -> "CheckpointManager":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
