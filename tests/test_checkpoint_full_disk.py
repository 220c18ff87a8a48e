"""A save that fails for want of space leaves nothing behind, so that a later save succeeds once there is space
(issue 42): on a small tmpfs (needs root to mount; skipped with the reason otherwise)."""
from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile

import numpy as np
import pytest

import meshax
from meshax import checkpoint

SIZE = 2 << 20  # bytes of the tmpfs


@contextlib.contextmanager
def small_tmpfs():
    """A fresh tmpfs of SIZE bytes, unmounted afterwards whatever happens."""
    where = tempfile.mkdtemp(prefix="meshax-full-disk-")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", where],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        os.rmdir(where)
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not root'}); the test needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", where], capture_output=True)
        os.rmdir(where)


def _fill(where: str, leave: int) -> str:
    """A file taking all but `leave` bytes of the tmpfs."""
    path = os.path.join(where, "filler")
    stat = os.statvfs(where)
    with open(path, "wb") as f:
        f.write(b"\0" * max(stat.f_bavail * stat.f_frsize - leave, 0))
    return path


def _leftovers(directory: str) -> list[str]:
    return [name for root, dirs, files in os.walk(directory) for name in dirs + files if "meshax-checkpoint" in name]


def test_a_save_that_fails_on_a_full_disk_is_followed_by_a_successful_one():
    tree = {"w": np.arange(64 * 1024, dtype=np.float32).reshape(256, 256), "step": np.int32(3)}
    with small_tmpfs() as where:
        filler = _fill(where, leave=64 * 1024)  # room for the metadata, not for the 256 KiB array
        path = os.path.join(where, "ckpt")
        with pytest.raises(OSError):
            checkpoint.save(path, tree)
        assert _leftovers(where) == [] and not os.path.exists(path)
        os.remove(filler)
        checkpoint.save(path, tree)
        restored = checkpoint.restore(path)
        np.testing.assert_array_equal(np.asarray(restored["w"]), tree["w"])


def test_a_manager_saves_again_after_a_failed_step_and_removes_crash_leftovers():
    tree = {"w": meshax.numpy.ones((256, 256), np.float32)}
    with small_tmpfs() as where:
        directory = os.path.join(where, "run")
        manager = checkpoint.CheckpointManager(directory, max_to_keep=1)
        assert manager.save(1, tree)
        filler = _fill(where, leave=32 * 1024)
        with pytest.raises(OSError):
            manager.save(2, tree)
        assert _leftovers(where) == []
        os.remove(filler)
        assert manager.save(3, tree)
        assert manager.all_steps() == [3]
        os.makedirs(os.path.join(directory, "4.meshax-checkpoint-tmp", "default"))  # as a killed save leaves it
        checkpoint.CheckpointManager(directory, max_to_keep=1)
        assert _leftovers(where) == []
        np.testing.assert_array_equal(np.asarray(manager.restore(3)["w"]), np.ones((256, 256), np.float32))
