"""Args: address id n steps victim kill_step [stop|raise]. Data-parallel training of a linear model as in JAX's fault-tolerance
guide, with jax_enable_recoverability: every step runs within live_devices over the live processes' devices;
process `victim` SIGKILLs itself at a random moment of step `kill_step` (-1: nobody dies; with `stop` it freezes itself with SIGSTOP instead, and the others
go on once its heartbeats are missed; with `raise` it fails with an uncaught exception before that step). Every survivor prints
`FINAL <process> <steps done> <weights>` at the end."""
import os
import random
import signal
import sys
import threading

import numpy as np

import meshax as jax
import meshax.numpy as jnp
from meshax.experimental.multihost_utils import live_devices
from meshax.sharding import NamedSharding, PartitionSpec as P

address, me, n, steps, victim, kill_step = sys.argv[1], *map(int, sys.argv[2:7])
how = {"stop": signal.SIGSTOP, "raise": None}.get(sys.argv[7] if len(sys.argv) > 7 else "", signal.SIGKILL)
jax.config.update("jax_enable_recoverability", True)
jax.distributed.initialize(address, n, me, heartbeat_timeout_seconds=10)


def replicated(x, devices):
    """x (the same on every process) as an array replicated over `devices`."""
    sharding = NamedSharding(jax.make_mesh((len(devices),), ("i",), devices=devices), P())
    shards = [jax.device_put(np.asarray(x), d) for d in devices if d.process_index == jax.process_index()]
    return jax.make_array_from_single_device_arrays(np.shape(x), sharding, shards)


def sharded(x, devices):
    """x (the whole batch, the same on every process) as an array split over `devices`."""
    sharding = NamedSharding(jax.make_mesh((len(devices),), ("i",), devices=devices), P("i"))
    where = sharding.addressable_devices_indices_map(x.shape)
    return jax.make_array_from_single_device_arrays(x.shape, sharding, [jax.device_put(x[where[d]], d) for d in where])


rng = np.random.default_rng(0)
X = rng.standard_normal(600).astype(np.float32)
Y = (10 * X + 0.1 * rng.standard_normal(600)).astype(np.float32)
loss_and_grad = jax.jit(jax.value_and_grad(lambda w, x, y: jnp.mean((w * x - y) ** 2)))
weights = np.ones((1,), np.float32)
step = 0
while step < steps:
    if how is None and me == victim and step == kill_step:
        raise ValueError(f"process {me} gives up at step {step}")  # uncaught: the process fails
    try:
        with live_devices(jax.devices()) as devices:
            if me == victim and step == kill_step:  # at a random moment of the step, mid-collective most often
                threading.Timer(random.uniform(0, 0.02), os.kill, (os.getpid(), how)).start()
            batch = 4 * len(devices)
            start = (step * batch) % (len(X) - batch)
            w = replicated(weights, devices)
            loss, grad = loss_and_grad(w, sharded(X[start:start + batch], devices),
                                       sharded(Y[start:start + batch], devices))
            new_weights = np.asarray(jax.block_until_ready(w - 0.05 * grad).addressable_shards[0].data)
    except Exception as error:  # noqa: BLE001 - the guide's pattern: the step is retried on the live devices
        cause = error.__cause__
        print(f"STEP {step} FAILED: {type(error).__name__}: {error}; inside the block: "
              f"{type(cause).__name__ if cause else None}: {cause}", flush=True)
    else:
        step += 1
        weights = new_weights
print(f"FINAL {me} {step} {weights.tolist()}", flush=True)
