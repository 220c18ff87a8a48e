"""Shared by the arr_* programs: joining the job, running an example, reporting checks, the jnp stand-in.

A program is started either by `meshax launch` (no arguments: the job is detected from the
environment) or by hand as `program ADDRESS ID N` (tests/multiprocess.py run_independent).
"""
import os
import runpy
import sys
from pathlib import Path

import numpy as np

import meshax

try:
    import meshax.numpy as jnp
except ImportError:
    # meshax.numpy does not exist yet: the programs' `jnp.array(...)` and `jnp.int32` (from the seeds)
    # fall back to NumPy's, which device_put canonicalises the same way (int64 -> int32).
    jnp = np


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def started_by_hand() -> bool:
    """Whether the program was started as `program ADDRESS ID N`."""
    return len(sys.argv) >= 4 and ":" in sys.argv[1]


def init() -> None:
    if started_by_hand():
        meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]))
    else:
        meshax.distributed.initialize()


def run_example(name: str) -> dict:
    """Run examples/<name> as __main__ (it joins the job itself) and return its globals.

    The examples call `distributed.initialize()` without arguments; when the program was started by
    hand, its ADDRESS ID N arguments are handed over as the MESHAX_* variables that call reads.
    """
    if started_by_hand():
        os.environ["MESHAX_COORDINATOR_ADDRESS"] = sys.argv[1]
        os.environ["MESHAX_PROCESS_ID"] = sys.argv[2]
        os.environ["MESHAX_NUM_PROCESSES"] = sys.argv[3]
    return runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def say(*lines: str) -> None:
    """Print lines with one write, so that they stay together."""
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def ok(name: str) -> None:
    say(f"CHECK {name}")


def check_shards(array, expected: np.ndarray) -> None:
    """This process holds exactly its devices' shards of `array`, each equal to expected[index]."""
    here = meshax.process_index()
    mine = {d for d in array.sharding.device_set if d.process_index == here}
    shards = array.addressable_shards
    assert {s.device for s in shards} == mine, (shards, mine)
    assert len(shards) == len(mine)
    index_map = array.sharding.devices_indices_map(array.shape)
    for shard in shards:
        assert shard.index == index_map[shard.device]
        data = np.asarray(shard.data)
        assert data.dtype == expected.dtype, (data.dtype, expected.dtype)
        np.testing.assert_array_equal(data, expected[shard.index])
        assert shard.data.devices() == {shard.device}
    assert array.shape == expected.shape and array.dtype == expected.dtype
