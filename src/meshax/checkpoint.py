"""meshax.checkpoint: distributed checkpoints in Orbax's format, and (called) JAX's remat decorator.

`meshax.checkpoint.save/restore/async_save/CheckpointManager` write and read checkpoints;
calling the module itself, `meshax.checkpoint(f, policy=...)` or `@meshax.checkpoint`, is
`jax.checkpoint` (rematerialisation), so both of JAX's and Orbax's meanings work.
"""
from __future__ import annotations

import sys
import types
from typing import Any

from ._src.checkpoint.manager import CheckpointManager
from ._src.checkpoint.restore import restore
from ._src.checkpoint.save import AsyncSave, async_save, save

__all__ = ["AsyncSave", "CheckpointManager", "async_save", "restore", "save"]


class _CheckpointModule(types.ModuleType):
    """A module that, called, is `jax.checkpoint`."""

    def __call__(self, fun: Any, **kwargs: Any) -> Any:
        from ._src.transforms.remat import checkpoint

        return checkpoint(fun, **kwargs)


sys.modules[__name__].__class__ = _CheckpointModule
