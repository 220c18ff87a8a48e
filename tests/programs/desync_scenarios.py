"""Processes that diverge, for tests/test_desync.py. Run under `meshax launch -n 4 --cpu-devices 2`; argv[1]
names the scenario. Every scenario must end with all processes exiting non-zero, naming each one's operation."""
import sys
import time

import numpy as np

import meshax
import meshax.numpy as jnp
from meshax.experimental import multihost_utils
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
me = meshax.process_index()
mesh = meshax.make_mesh((meshax.device_count(),), ("x",))
rows = NamedSharding(mesh, P("x"))
total = meshax.jit(meshax.shard_map(lambda v: meshax.lax.psum(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))


def local_rows(dtype, n=2):
    """A global (devices, n) array from this process's rows, in `dtype`."""
    local = np.ones((len(meshax.local_devices()), n), dtype)
    return multihost_utils.host_local_array_to_global_array(local, mesh, P("x"))


scenario = sys.argv[1]
if scenario == "skipped_step":  # process 1 runs one training step fewer (a step that does not communicate)
    x = meshax.device_put(np.arange(2.0 * meshax.device_count(), dtype=np.float32), rows)
    update = meshax.jit(lambda v: v * 0.5 + 1)
    for _ in range(4 if me == 1 else 5):
        x = update(x)
    print("SUM", float(jnp.sum(x)), flush=True)
elif scenario == "dtype":  # psum of int32 on process 1, float32 elsewhere
    print(total(local_rows(np.int32 if me == 1 else np.float32)), flush=True)
elif scenario == "size":  # psum of 1 MiB + 4 bytes on process 1, 1 MiB elsewhere
    print(total(local_rows(np.float32, (1 << 18) + (1 if me == 1 else 0))).shape, flush=True)
elif scenario == "psum_pmax":  # a different reduction on process 1
    op = meshax.lax.pmax if me == 1 else meshax.lax.psum
    f = meshax.jit(meshax.shard_map(lambda v: op(v, "x"), mesh=mesh, in_specs=P("x"), out_specs=P()))
    print(f(local_rows(np.float32)), flush=True)
elif scenario == "barrier_name":
    multihost_utils.sync_global_devices("before_save" if me == 1 else "after_save")
elif scenario == "seeds_deadlock":  # the seeds' example: process 0 in a barrier, the others in an allgather
    if me == 0:
        multihost_utils.sync_global_devices("step")
    else:
        multihost_utils.process_allgather(np.ones(3))
elif scenario == "early_exit":  # process 1 returns early, with exit code 0
    if me == 1:
        sys.exit(0)
    print(float(jnp.sum(meshax.device_put(np.ones(8 * meshax.device_count(), np.float32), rows))), flush=True)
elif scenario == "slow":  # process 2 computes for 5 s while the others wait in a psum: not an error
    if me == 2:
        time.sleep(5)
    print("TOTAL", float(jnp.sum(total(local_rows(np.float32)))), flush=True)
print("FINISHED", flush=True)
