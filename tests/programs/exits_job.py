"""Args: mode [address id n]. Every process initialises (from the launcher's environment without the
address arguments), makes the shared-memory window (a 4 MB allreduce), prints "READY pid segments..." and
waits for the others to print it too;
mode=wait: process 1 sleeps while the others wait in a barrier (the test sends a signal);
mode=fail: process 1 asks meshax for an impossible reshape while the others wait in a barrier;
mode=slow: process 1 sleeps 3 s; the others print the CPU and wall time they spent waiting for it."""
import os
import sys
import time

import numpy as np

import meshax
import meshax.numpy as jnp
from meshax._src.runtime import mpi
from meshax._src.runtime.distributed import runtime

mode = sys.argv[1]
if len(sys.argv) > 2:
    meshax.distributed.initialize(sys.argv[2], int(sys.argv[4]), int(sys.argv[3]))
else:
    meshax.distributed.initialize()
group = runtime().process_group(range(meshax.process_count()))
group.allreduce(np.ones(1 << 20, np.float32))
print("READY", os.getpid(), *sorted(mpi.mapped_shared_memory()), flush=True)
group.barrier()  # every process has listed the segments before one fails and unlinks them
me = meshax.process_index()
if mode == "wait" and me == 1:
    time.sleep(120)
if mode == "fail" and me == 1:
    jnp.reshape(jnp.arange(6), (4,))  # the failing line the report must name
if mode == "slow" and me == 1:
    time.sleep(3)
cpu, wall = time.process_time(), time.monotonic()
group.barrier()
if mode == "slow" and me != 1:
    print(f"WAITED cpu={time.process_time() - cpu:.3f} wall={time.monotonic() - wall:.3f}", flush=True)
