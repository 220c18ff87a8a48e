"""multihost_utils on scalars and on process-local (fully addressable) Arrays, with JAX's semantics:

* process_allgather stacks a scalar host value into shape (process_count,);
* a fully addressable jax.Array is process-local data like a NumPy array: process_allgather stacks
  (tiled=False) or concatenates (tiled=True) the processes' values, as for host values (with one
  process, tiled=False gives shape (1, ...));
* broadcast_one_to_all keeps a scalar's shape ().

Every check runs; each prints CHECK name or FAIL name: detail.
"""
import numpy as np

import meshax
from arr_common import init, ok, say
from meshax.experimental import multihost_utils

init()
here, count = meshax.process_index(), meshax.process_count()


def check(name, got, expected):
    try:
        got = np.asarray(got)
        assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
        np.testing.assert_array_equal(got, expected)
    except AssertionError as error:
        say(f"FAIL {name}: " + " ".join(str(error).split()))
    else:
        ok(name)


check("scalar-stacked", multihost_utils.process_allgather(np.float32(here) / 2),
      np.arange(count, dtype=np.float32) / 2)

local = meshax.device_put(np.arange(3) + 10 * here)  # on this process's first device: fully addressable
assert local.is_fully_addressable
rows = np.array([np.arange(3) + 10 * p for p in range(count)], dtype=np.int32)
check("local-array-stacked", multihost_utils.process_allgather(local), rows)
check("local-array-tiled", multihost_utils.process_allgather(local, tiled=True), rows.reshape(-1))
check("scalar-broadcast", multihost_utils.broadcast_one_to_all(np.float32(here + 0.5)), np.array(0.5, np.float32))
check("scalar-broadcast-int", multihost_utils.broadcast_one_to_all(np.int32(here + 7)), np.array(7, np.int32))
say("DONE")
