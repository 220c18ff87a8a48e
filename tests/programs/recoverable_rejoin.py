"""Args: address id n steps victim kill_step [restarted]. JAX's fault-tolerance guide's data-parallel training with
recovery, with jax_enable_recoverability: every step runs within live_devices; process `victim` SIGKILLs itself at a
random moment of step `kill_step`, and the test starts it again with `restarted`: it rejoins with step 0, and the
first block that counts it again has process 0 send it the step and weights (a psum over a mesh of process 0's
device and its). The job ends when the live processes, the restarted one among them, are at step `steps`; each
prints `FINAL <process> <step> <weights>`."""
import signal

import numpy as np

import meshax as jax
from meshax.experimental.multihost_utils import live_devices
from meshax.sharding import NamedSharding, PartitionSpec as P
from recoverable_common import (die_soon, extra, join, kill_step, me, mesh_of, replicated, report_failure, steps,
                                train_step, victim)

restarted = extra == ["restarted"]
join()


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


weights = np.ones((1,), np.float32)
step = failures = 0
while failures < 20:
    try:
        with live_devices(jax.devices()) as devices:
            if me == victim and step == kill_step and not restarted:
                die_soon(signal.SIGKILL)
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
            if new_step >= steps and victim in {d.process_index for d in devices}:  # done, the victim back in
                # (the block still ends atomically on the way out; a survivor that MPI itself ended is not awaited)
                step, weights = new_step, new_weights
                break
            if new_step < steps:
                new_weights = train_step(new_weights, new_step, devices)
                new_step += 1
    except Exception as error:  # noqa: BLE001 - the guide's pattern: the step is retried on the live devices
        failures += 1
        report_failure(step, error)
    else:
        step, weights = new_step, new_weights
print(f"FINAL {me} {step} {weights.tolist()}", flush=True)
