"""Args: address id n steps victim kill_step [stop|raise]. Data-parallel training of a linear model as in JAX's
fault-tolerance guide, with jax_enable_recoverability: every step runs within live_devices over the live processes'
devices; process `victim` SIGKILLs itself at a random moment of step `kill_step` (-1: nobody dies; with `stop` it
freezes itself with SIGSTOP instead, and the others go on once its heartbeats are missed; with `raise` it fails with
an uncaught exception before that step; with `abort` it calls MPI_Abort on an MPI communicator of its own and process
`victim - 1`, which MPICH by default answers by ending every member). Every survivor prints
`FINAL <process> <steps done> <weights>` at the end."""
import signal

import numpy as np

import meshax as jax
from meshax.experimental.multihost_utils import live_devices
from recoverable_common import die_soon, extra, join, kill_step, me, report_failure, steps, train_step, victim

how = {"stop": signal.SIGSTOP, "raise": None, "abort": "abort"}.get(extra[0] if extra else "", signal.SIGKILL)
join()
if how == "abort" and me in (victim - 1, victim):
    from mpi4py import MPI

    pair = MPI.COMM_WORLD.Create_group(MPI.COMM_WORLD.Get_group().Incl([victim - 1, victim]))
weights = np.ones((1,), np.float32)
step = 0
while step < steps:
    if how is None and me == victim and step == kill_step:
        raise ValueError(f"process {me} gives up at step {step}")  # uncaught: the process fails
    try:
        with live_devices(jax.devices()) as devices:
            if me == victim and step == kill_step:
                pair.Abort(5) if how == "abort" else die_soon(how)
            new_weights = train_step(weights, step, devices)
    except Exception as error:  # noqa: BLE001 - the guide's pattern: the step is retried on the live devices
        report_failure(step, error)
    else:
        step += 1
        weights = new_weights
print(f"FINAL {me} {step} {weights.tolist()}", flush=True)
