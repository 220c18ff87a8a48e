"""Args: address id n steps victim kill_step [restarted]. JAX's fault-tolerance guide's data-parallel training with
recovery, with jax_enable_recoverability: every step runs within live_devices; process `victim` SIGKILLs itself at a
random moment of step `kill_step`, and the test starts it again with `restarted`: it rejoins with step 0, and the
first block that counts it again has process 0 send it the step and weights (a psum over a mesh of process 0's
device and its). The job ends when every process is live at step `steps`; each prints
`FINAL <process> <step> <weights>`."""
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
restarted = len(sys.argv) > 7
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


def psum_over(x, devices):
    """The sum over `devices` of each one's x (replicated on each): a send when all but one hold zeros."""
    f = jax.shard_map(lambda v: jax.lax.psum(v, "i"), mesh=mesh_of(devices), in_specs=P(), out_specs=P())
    return np.asarray(f(replicated(x, devices)).addressable_shards[0].data)


def allgather(x, devices):
    """Every device's x (its process's), in the order of `devices`."""
    f = jax.shard_map(lambda v: jax.lax.all_gather(v, "i", tiled=True), mesh=mesh_of(devices), in_specs=P("i"),
                      out_specs=P("i"))
    local = [jax.device_put(np.array([x], np.int32), d) for d in devices if d.process_index == jax.process_index()]
    array = jax.make_array_from_single_device_arrays((len(devices),), NamedSharding(mesh_of(devices), P("i")), local)
    return np.asarray(f(array).addressable_shards[0].data).tolist()


rng = np.random.default_rng(0)
X = rng.standard_normal(600).astype(np.float32)
Y = (10 * X + 0.1 * rng.standard_normal(600)).astype(np.float32)
loss_and_grad = jax.jit(jax.value_and_grad(lambda w, x, y: jnp.mean((w * x - y) ** 2)))
weights = np.ones((1,), np.float32)
step = failures = 0
while failures < 20:
    try:
        with live_devices(jax.devices()) as devices:
            if me == victim and step == kill_step and not restarted:  # at a random moment of the step
                threading.Timer(random.uniform(0, 0.02), os.kill, (os.getpid(), signal.SIGKILL)).start()
            steps_now = allgather(step, devices)
            first = devices[0]  # process 0's device: process 0 is the coordinator, it never rejoins
            new_step, new_weights = step, weights
            for d, s in zip(devices, steps_now):
                if s != steps_now[0]:  # a process that rejoined: process 0 sends it the step and the weights
                    pair = [first, d]
                    mine = jax.process_index() == 0
                    new_weights = psum_over(weights if mine else np.zeros_like(weights), pair) \
                        if jax.process_index() in (0, d.process_index) else new_weights
                    got = psum_over(np.array([step if mine else 0], np.int32), pair) \
                        if jax.process_index() in (0, d.process_index) else None
                    if d.process_index == jax.process_index():
                        new_step = int(got[0])
            if new_step >= steps and len(devices) == n:  # done (the block still ends atomically on the way out)
                step, weights = new_step, new_weights
                break
            if new_step < steps:
                batch = 4 * len(devices)
                start = (new_step * batch) % (len(X) - batch)
                w = replicated(new_weights, devices)
                loss, grad = loss_and_grad(w, sharded(X[start:start + batch], devices),
                                           sharded(Y[start:start + batch], devices))
                new_weights = np.asarray(jax.block_until_ready(w - 0.05 * grad).addressable_shards[0].data)
                new_step += 1
    except Exception as error:  # noqa: BLE001 - the guide's pattern: the step is retried on the live devices
        failures += 1
        print(f"STEP {step} FAILED: {type(error).__name__}: {error}; inside the block: "
              f"{type(error.__cause__).__name__}: {error.__cause__}", flush=True)
    else:
        step, weights = new_step, new_weights
print(f"FINAL {me} {step} {weights.tolist()}", flush=True)
