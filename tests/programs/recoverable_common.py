"""What the recovery programs (recoverable_training.py, recoverable_rejoin.py) share: their arguments
(address id n steps victim kill_step, then the program's own), joining a job with jax_enable_recoverability,
the data and one data-parallel step of a linear model over the live devices, as in JAX's fault-tolerance guide."""
import os
import random
import sys
import threading

import numpy as np

import meshax as jax
import meshax.numpy as jnp
from meshax.sharding import NamedSharding, PartitionSpec as P

address, me, n, steps, victim, kill_step = sys.argv[1], *map(int, sys.argv[2:7])
extra = sys.argv[7:]


def join() -> None:
    jax.config.update("jax_enable_recoverability", True)
    jax.distributed.initialize(address, n, me, heartbeat_timeout_seconds=10)


def mesh_of(devices):
    return jax.make_mesh((len(devices),), ("i",), devices=devices)


def replicated(x, devices):
    """x (this process's value) as an array replicated over `devices`: no data moves."""
    sharding = NamedSharding(mesh_of(devices), P())
    shards = [jax.device_put(np.asarray(x), d) for d in devices if d.process_index == jax.process_index()]
    return jax.make_array_from_single_device_arrays(np.shape(x), sharding, shards)


def sharded(x, devices):
    """x (the whole batch, the same on every process) as an array split over `devices`."""
    sharding = NamedSharding(mesh_of(devices), P("i"))
    where = sharding.addressable_devices_indices_map(x.shape)
    return jax.make_array_from_single_device_arrays(x.shape, sharding, [jax.device_put(x[where[d]], d) for d in where])


_rng = np.random.default_rng(0)
X = _rng.standard_normal(600).astype(np.float32)
Y = (10 * X + 0.1 * _rng.standard_normal(600)).astype(np.float32)
_loss_and_grad = jax.jit(jax.value_and_grad(lambda w, x, y: jnp.mean((w * x - y) ** 2)))


def train_step(weights, step, devices):
    """The weights after data-parallel step `step` over `devices` (4 examples each)."""
    batch = 4 * len(devices)
    start = (step * batch) % (len(X) - batch)
    w = replicated(weights, devices)
    _, grad = _loss_and_grad(w, sharded(X[start:start + batch], devices), sharded(Y[start:start + batch], devices))
    return np.asarray(jax.block_until_ready(w - 0.05 * grad).addressable_shards[0].data)


def die_soon(how) -> None:
    """Send this process `how` at a random moment of the next 20 ms (mid-collective most often)."""
    threading.Timer(random.uniform(0, 0.02), os.kill, (os.getpid(), how)).start()


def report_failure(step, error) -> None:
    cause = error.__cause__
    print(f"STEP {step} FAILED: {type(error).__name__}: {error}; inside the block: "
          f"{type(cause).__name__ if cause else None}: {cause}", flush=True)
