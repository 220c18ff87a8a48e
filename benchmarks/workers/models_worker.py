"""Worker of bench_models.py: trains one model of models.py for a few steps, written in plain JAX.

    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=K python models_worker.py --model gpt --style dp --warmup W \
        --steps S --budget SECONDS [--address HOST:PORT --process-id I --processes N]
    MESHAX_NUM_CPU_DEVICES=K [MESHAX_COORDINATOR_ADDRESS=HOST:PORT MESHAX_NUM_PROCESSES=N MESHAX_PROCESS_ID=I] \
        python -m meshax.as_jax models_worker.py --model gpt ... [--auto-init] [--floor-steps F]

The same file runs on both libraries: under `meshax.as_jax`, `import jax` is meshax. A job of several
processes joins with jax.distributed.initialize(address, N, i) (--address) or, for meshax, with
jax.distributed.initialize() and the launcher's MESHAX_* variables (--auto-init). Mesh: every device,
axis 'data' (models.py). W warm-up steps (the first one = trace + compile + run, recorded apart), then
S timed steps, each after a barrier (multihost_utils.sync_global_devices) and timed on every process
until the new parameters and the loss are ready. A model in models.REPEAT (a step well under a millisecond)
runs each warm-up and timed step but the first as that many steps in a row, recording their mean. Under meshax, after the warm-up the worker waits
until the kernels meshax compiles in the background are ready, as JAX's are after its first step.

--floor-steps (model `mlp` under meshax only): the NumPy floor of the same step (train_floor.py, this
process's rows of the batch, MPI Allreduce over meshax's world communicator, BLAS threads at meshax's
CPU budget) from the same parameters and data, one warm-up step, then one timed step after each of
the model's timed steps. The record goes to $BENCH_RECORD_DIR/<rank>.json, rewritten after every
step; the process exits with status 3 if it outlives --budget seconds.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh

import models
from records import RecordWriter
from train_floor import floor_step, mpi_allreduce
from worker_support import start_watchdog

MLP_LR = 0.1  # models.build('mlp')'s SGD learning rate (the floor's losses are checked against the model's)
SETTLE_TIMEOUT = 120.0  # seconds to wait for meshax's background kernel compilation


def on_meshax() -> bool:
    """Whether `jax` is meshax (this worker runs under meshax.as_jax)."""
    return jax.jit.__module__.split(".")[0] == "meshax"


def settle() -> None:
    """Under meshax, wait until the kernels it compiles in the background for what ran so far are ready."""
    if on_meshax():
        from meshax._src.interpreters import fusion

        fusion.EXECUTORS["cpu"].numba.compiler.wait(SETTLE_TIMEOUT)


class Barrier:
    """A barrier over the job's processes (nothing for one process)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        if jax.process_count() > 1:
            self.count += 1
            multihost_utils.sync_global_devices(f"models_{self.count}")


def local_rows(array: Any) -> np.ndarray:
    """This process's rows of a global array sharded along its first axis, in order."""
    shards = {s.index[0].start or 0: s for s in array.addressable_shards}
    return np.concatenate([np.asarray(shards[start].data) for start in sorted(shards)])


class Floor:
    """The NumPy floor of the `mlp` step (train_floor.py) in this meshax process: the model's initial
    parameters, this process's rows of its batch, BLAS threads at meshax's CPU budget."""

    def __init__(self, model: models.Model) -> None:
        from threadpoolctl import ThreadpoolController

        from meshax._src.runtime.cpu_budget import compute_threads
        from meshax._src.runtime.distributed import runtime

        x, labels = model.batch
        self.params = [{"w": np.asarray(w), "b": np.asarray(b)} for w, b in model.params]
        self.x = local_rows(x)
        self.one_hot = np.eye(self.params[-1]["b"].shape[0], dtype=np.float32)[local_rows(labels)]
        self.global_batch = x.shape[0]
        rt = runtime()
        self.allreduce = mpi_allreduce(rt.world if rt is not None else None)
        self.blas = ThreadpoolController()
        self.threads = compute_threads()

    def step(self) -> float:
        """One SGD step; returns its loss."""
        with self.blas.limit(limits=self.threads, user_api="blas"):
            self.params, loss = floor_step(self.params, self.x, self.one_hot, MLP_LR, self.global_batch,
                                           self.allreduce)
        return loss


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=models.MODELS, required=True)
    parser.add_argument("--style", default="dp")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--floor-steps", type=int, default=0)
    parser.add_argument("--address", default=None)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--auto-init", action="store_true", help="jax.distributed.initialize() without arguments")
    args = parser.parse_args()
    if args.warmup < 1:
        parser.error("--warmup must be at least 1 (the first step is timed apart)")
    if args.floor_steps and (args.model != "mlp" or not on_meshax()):
        parser.error("--floor-steps is for the mlp model under meshax only")
    return args


def main() -> int:
    args = parse()
    start_watchdog(args.budget, "models worker")
    began = time.perf_counter()
    if args.address:
        jax.distributed.initialize(args.address, args.processes, args.process_id)
    elif args.auto_init:
        jax.distributed.initialize()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    model = models.build(args.model, mesh, args.style)
    floor = Floor(model) if args.floor_steps else None
    writer = RecordWriter({"rank": jax.process_index(), "model": args.model, "style": args.style,
                           "processes": jax.process_count(), "devices": jax.device_count(),
                           "setup_s": time.perf_counter() - began, "warmup_times": [], "times": [], "losses": []})
    record = writer.record
    if floor is not None:
        record.update(floor_threads=floor.threads, floor_times=[], floor_losses=[])
    barrier = Barrier()
    params, opt_state = model.params, model.opt_state
    for step in range(args.warmup + args.steps):
        barrier()
        repeat = 1 if step == 0 else models.REPEAT.get(args.model, 1)
        losses = []
        start = time.perf_counter()
        for _ in range(repeat):
            params, opt_state, loss = model.step(params, opt_state, model.batch)
            jax.block_until_ready((params, loss))
            losses.append(loss)
        record["warmup_times" if step < args.warmup else "times"].append((time.perf_counter() - start) / repeat)
        record["losses"].extend(float(x) for x in losses)
        if step == args.warmup - 1:
            steps_run = 1 + (args.warmup - 1) * models.REPEAT.get(args.model, 1)
            for _ in range(models.steady_after(args.model, jax.device_count()) - steps_run):  # untimed, in every process
                params, opt_state, loss = model.step(params, opt_state, model.batch)
                record["losses"].append(float(loss))
            settle()
        if floor is not None and step >= args.warmup - 1 and len(record["floor_times"]) < args.floor_steps:
            barrier()  # the floor's warm-up after the warm-up, then a floor step after each timed step
            start = time.perf_counter()
            record["floor_losses"].append(floor.step())
            if step >= args.warmup:
                record["floor_times"].append(time.perf_counter() - start)
        writer.write(every=0)
    barrier()
    writer.write(complete=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
