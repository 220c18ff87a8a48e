"""Training-step worker for bench_train.py: one MLP train step, under meshax or JAX.

    MESHAX_COORDINATOR_ADDRESS=HOST:PORT MESHAX_NUM_PROCESSES=N MESHAX_PROCESS_ID=I MESHAX_NUM_CPU_DEVICES=K \
        python train_worker.py --backend meshax --style dp_jit|fsdp --warmup W --steps S --budget SECONDS
    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=K \
        python train_worker.py --backend jax --style ... [--address HOST:PORT --process-id I --processes N]

The model, data, loss and SGD update are those of examples/mlp_common.py (for JAX its meshax
imports become jax imports), and the two styles are the training steps of examples/train_dp_jit.py
(jit with in/out shardings: batch P('data'), parameters P()) and examples/train_fsdp.py (shard_map,
weights P('data') along their first dimension and all-gathered per layer, biases replicated,
gradient of the pmean'd loss). Mesh: Mesh(devices, ('data',)) over all devices.

One batch (--batch rows of --features, from the examples' make_dataset) is placed once; then W
warm-up steps and S timed steps, each after a barrier (meshax: the runtime's MPI barrier; JAX:
multihost_utils.sync_global_devices), timed on every process from the call until the new
parameters and the loss are ready. Every step's loss is kept (a check that both libraries train
alike). With --floor-steps (meshax jobs), the same processes also time the hand-written NumPy step of
train_floor.py: one warm-up step after meshax's warm-up, then one timed step after each of meshax's
timed steps (up to that many), each after a barrier. The record goes to
$BENCH_RECORD_DIR/<rank>.json, rewritten after every step; the process exits with status 3 if it runs
longer than --budget seconds.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np

from records import RecordWriter
from train_floor import floor_step, local_rows, mpi_allreduce
from worker_support import Backend, start_watchdog

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_common(backend: str) -> types.ModuleType:
    """examples/mlp_common.py, for JAX with its meshax imports made jax imports."""
    path = EXAMPLES / "mlp_common.py"
    source = path.read_text()
    if backend == "jax":
        source = re.sub(r"^(import|from) meshax\b", r"\1 jax", source, flags=re.MULTILINE)
    module = types.ModuleType("mlp_common")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def build(b: Backend, common: types.ModuleType, args: argparse.Namespace) -> tuple[Callable[..., Any], Any, Any, Any]:
    """(train_step, params, x, y) of the chosen style, inputs placed."""
    jax, P, NamedSharding = b.jax, b.P, b.NamedSharding
    mesh = b.Mesh(np.array(jax.devices()), ("data",))
    batch_sharding = NamedSharding(mesh, P("data"))
    replicated = NamedSharding(mesh, P())
    sizes = [args.features, args.width, args.width, args.classes]
    host_params = common.init_params(sizes)
    xs, labels = common.make_dataset(1, args.batch, args.features, args.classes)
    x = jax.device_put(xs[0], batch_sharding)
    y = jax.device_put(labels[0], batch_sharding)
    lr = args.lr

    if args.style == "dp_jit":
        params = jax.device_put(host_params, replicated)

        def step(params: Any, x: Any, y: Any) -> Any:
            loss, grads = jax.value_and_grad(common.loss_fn)(params, x, y)
            return common.sgd(params, grads, lr), loss

        train_step = jax.jit(step, in_shardings=(replicated, batch_sharding, batch_sharding),
                             out_shardings=(replicated, replicated))
    else:
        specs = [{"w": P("data"), "b": P()} for _ in host_params]
        params = jax.tree_util.tree_map(lambda p, s: jax.device_put(p, NamedSharding(mesh, s)), host_params, specs)

        def gather(layer: Any) -> Any:
            return {"w": jax.lax.all_gather(layer["w"], "data", tiled=True), "b": layer["b"]}

        def device_step(params: Any, x: Any, y: Any) -> Any:
            def global_loss(params: Any) -> Any:
                return jax.lax.pmean(common.loss_fn(params, x, y, gather), "data")

            loss, grads = jax.value_and_grad(global_loss)(params)
            return common.sgd(params, grads, lr), loss

        train_step = jax.jit(jax.shard_map(device_step, mesh=mesh, in_specs=(specs, P("data"), P("data")),
                                           out_specs=(specs, P())))
    return train_step, params, x, y


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("meshax", "jax"), required=True)
    parser.add_argument("--style", choices=("dp_jit", "fsdp"), required=True)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--features", type=int, default=784)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--floor-steps", type=int, default=0, help="meshax: then time the NumPy floor's step")
    parser.add_argument("--address", default=None)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    start_watchdog(args.budget, "train worker")
    began = time.perf_counter()
    b = Backend(args)
    common = load_common(args.backend)
    train_step, params, x, y = build(b, common, args)
    writer = RecordWriter({"rank": b.rank, "backend": b.name, "style": args.style, "processes": b.size,
                           "devices": b.jax.device_count(), "setup_s": time.perf_counter() - began,
                           "warmup_times": [], "times": [], "losses": []})
    record = writer.record
    floor = Floor(b, common, args) if b.name == "meshax" and args.floor_steps else None
    if floor is not None:
        record.update(floor_threads=floor.threads, floor_times=[], floor_losses=[])
    for step in range(args.warmup + args.steps):
        b.barrier()
        start = time.perf_counter()
        params, loss = train_step(params, x, y)
        b.jax.block_until_ready((params, loss))
        elapsed = time.perf_counter() - start
        record["warmup_times" if step < args.warmup else "times"].append(elapsed)
        if step == args.warmup - 1:
            b.settle()
        record["losses"].append(float(loss))
        if floor is not None and step >= args.warmup - 1 and len(record["floor_times"]) < args.floor_steps:
            # the floor's warm-up after meshax's, then a floor step after each of meshax's timed steps, so that
            # both see the same state of a noisy host (a shared VM's NumPy matmuls alone drift by up to 1.7x
            # over seconds)
            b.barrier()
            start = time.perf_counter()
            record["floor_losses"].append(floor.step())
            if step >= args.warmup:
                record["floor_times"].append(time.perf_counter() - start)
        writer.write(every=0)
    b.barrier()
    writer.write(complete=True)
    return 0


class Floor:
    """The NumPy floor's step (train_floor.py) in this process, with this controller's CPU budget as BLAS threads,
    on its own parameters and this process's rows of the batch."""

    def __init__(self, b: Backend, common: types.ModuleType, args: argparse.Namespace) -> None:
        from threadpoolctl import ThreadpoolController

        from meshax._src.runtime.cpu_budget import compute_threads

        self.args = args
        self.blas = ThreadpoolController()  # found once: threadpool_limits() looks for the libraries each time (0.5 ms)
        self.params = common.init_params([args.features, args.width, args.width, args.classes])
        xs, labels = common.make_dataset(1, args.batch, args.features, args.classes)
        self.x = local_rows(xs[0], b.rank, b.size)
        self.one_hot = np.eye(args.classes, dtype=np.float32)[local_rows(labels[0], b.rank, b.size)]
        self.allreduce = mpi_allreduce(b.world)
        self.threads = compute_threads()

    def step(self) -> float:
        """One SGD step; returns its loss."""
        with self.blas.limit(limits=self.threads, user_api="blas"):
            self.params, loss = floor_step(self.params, self.x, self.one_hot, self.args.lr, self.args.batch,
                                           self.allreduce)
        return loss


if __name__ == "__main__":
    sys.exit(main())
