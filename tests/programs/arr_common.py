"""Shared by the arr_* programs: joining the job, reporting checks, the jnp stand-in.

A program is started either by `meshax launch` (no arguments: the job is detected from the
environment) or by hand as `program ADDRESS ID N` (tests/multiprocess.py run_independent).
"""
import sys

import numpy as np

import meshax

try:
    import meshax.numpy as jnp
except ImportError:
    # meshax.numpy does not exist yet: the programs' `jnp.array(...)` and `jnp.int32` (from the seeds)
    # fall back to NumPy's, which device_put canonicalises the same way (int64 -> int32).
    jnp = np


def init() -> None:
    if len(sys.argv) >= 4 and ":" in sys.argv[1]:
        meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]))
    else:
        meshax.distributed.initialize()


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
