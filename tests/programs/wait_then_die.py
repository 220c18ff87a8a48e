"""Args: address id n mode victim [heartbeat_timeout, default 5]. Every process initialises and prints READY;
then all but the victim block in an MPI barrier (mode=barrier) or a 4 MB allreduce (mode=allreduce); the test
kills the victim."""
import sys
import time

import numpy as np

import meshax
from meshax._src.runtime.distributed import runtime

heartbeat_timeout = float(sys.argv[6]) if len(sys.argv) > 6 else 5
meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]),
                              heartbeat_timeout_seconds=heartbeat_timeout)
group = runtime().process_group(range(meshax.process_count()))
print("READY", flush=True)
if meshax.process_index() == int(sys.argv[5]):
    time.sleep(60)
if sys.argv[4] == "barrier":
    group.barrier()
else:
    group.allreduce(np.ones(1 << 20, np.float32))
print("UNEXPECTEDLY PASSED", flush=True)
time.sleep(60)
