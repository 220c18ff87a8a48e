"""Args: address id n path. A job with jax_enable_recoverability in which process 3 dies right after start-up: the
survivors, within live_devices, build an array from each process's data over the live devices (one each), save
it as a checkpoint at `path`, restore it and gather it on every process; each prints `OK <process> <live devices>
<gathered values>`."""
import os
import signal
import sys
import time

import numpy as np

import meshax as jax
from meshax import checkpoint as ckpt
from meshax.experimental.multihost_utils import live_devices, process_allgather
from meshax.sharding import NamedSharding, PartitionSpec as P

address, me, n, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
jax.config.update("jax_enable_recoverability", True)
jax.distributed.initialize(address, n, me, heartbeat_timeout_seconds=10)
if me == 3:
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(1.0)  # the survivors learn of the death before their first live_devices
with live_devices(jax.devices()) as devices:
    sharding = NamedSharding(jax.make_mesh((len(devices),), ("i",), devices=devices), P("i"))
    x = jax.make_array_from_process_local_data(sharding, np.full((2,), me, np.float32))
    ckpt.save(path, {"x": x})
    restored = ckpt.restore(path, {"x": x})["x"]
    print("OK", me, len(devices), np.asarray(process_allgather(restored, tiled=True)).tolist(), flush=True)
