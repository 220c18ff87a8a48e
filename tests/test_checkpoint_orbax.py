"""Checkpoints exchanged with real Orbax (orbax-checkpoint + JAX, one process with 8 CPU devices):
meshax saves on 2x4 and Orbax restores onto JAX shardings; Orbax saves as Zarr 2 (use_ocdbt=False), Zarr 3
(use_zarr3=True) and OCDBT (its default, read through TensorStore) and meshax restores on 2x4; Orbax's
CheckpointManager reads meshax CheckpointManager's step directories."""
from __future__ import annotations

import pytest

from multiprocess import PYTHON, child_env, collect, start
from test_checkpoint_multiprocess import RESTORE_CHECKS, run

pytest.importorskip("orbax.checkpoint")
pytest.importorskip("tensorstore")


def orbax(*args: str) -> str:
    proc = start([PYTHON, "tests/programs/ckpt_orbax.py", *map(str, args)], child_env(JAX_PLATFORMS="cpu"))
    result = collect([proc], timeout=120)[0]
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    return result.stdout


def test_orbax_restores_meshax_checkpoint(tmp_path):
    run(2, 4, "save", tmp_path, 7)
    assert "CHECK orbax read" in orbax("read", tmp_path, 7)


@pytest.mark.parametrize("fmt", ["zarr2", "zarr3", "ocdbt"])
def test_meshax_restores_orbax_checkpoint(tmp_path, fmt):
    assert f"CHECK orbax wrote {fmt}" in orbax("write", tmp_path, 2, fmt)
    for found in run(2, 4, "restore-orbax", tmp_path, 2).values():
        assert found == RESTORE_CHECKS - {"reads only its chunks"}


def test_orbax_checkpoint_manager_reads_meshax_steps(tmp_path):
    """meshax's CheckpointManager uses Orbax's layout: Orbax's CheckpointManager lists and restores its steps."""
    import numpy as np

    import meshax
    from meshax.sharding import NamedSharding, PartitionSpec as P

    sharding = NamedSharding(meshax.make_mesh((8,), ("d",)), P("d"))
    manager = meshax.checkpoint.CheckpointManager(tmp_path, max_to_keep=2)
    for step in (1, 2, 3):
        manager.save(step, {"w": meshax.device_put(np.full((8, 4), step, np.float32), sharding), "n": step})
    assert "CHECK orbax manager steps [2, 3]" in orbax("manager", tmp_path, 3)


def test_checkpoint_manager_refuses_the_steps_orbax_refuses(tmp_path):
    """Saving steps in turn (some not above the latest): meshax's CheckpointManager answers as Orbax's does."""
    import sys

    import numpy as np

    import meshax

    sys.path.insert(0, "tests/programs")
    from ckpt_common import REFUSAL_STEPS

    manager = meshax.checkpoint.CheckpointManager(tmp_path / "meshax", max_to_keep=2)
    answers = [manager.save(step, {"n": np.full(3, step, np.int32)}) for step in REFUSAL_STEPS]
    assert f"CHECK orbax refusals {answers} steps {manager.all_steps()}" in orbax("refusals", tmp_path / "orbax", 0)
    assert answers == [True, True, True, False, False, False, True]
