"""Args: address id n mode. Processes that do not all take part in one communication, for the watchdog.
mode=lonely: process 0 alone calls device_put onto devices of all processes (the seeds' classic mistake);
mode=sleeper: process 2 sleeps in Python while the others wait in an allreduce."""
import sys
import time

import numpy as np

import meshax
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize(sys.argv[1], int(sys.argv[3]), int(sys.argv[2]), collective_timeout_seconds=3)
mesh = meshax.make_mesh((meshax.device_count(),), ("x",))
x = meshax.device_put(np.arange(16.0), NamedSharding(mesh, P("x")))
if sys.argv[4] == "lonely":
    if meshax.process_index() == 0:
        meshax.device_put(x, NamedSharding(mesh, P()))  # the others never join: they finish instead
elif sys.argv[4] == "sleeper":
    if meshax.process_index() == 2:
        time.sleep(600)
    meshax.numpy.sum(x).block_until_ready()
print("FINISHED", flush=True)
