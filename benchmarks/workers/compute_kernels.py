"""Compute worker for bench_compute.py: the same program on meshax or on JAX.

    python -m meshax launch -n N --cpu-devices K compute_kernels.py --backend meshax --plan JSON --budget S
    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=K \
        python compute_kernels.py --backend jax --address HOST:PORT --process-id I --processes N --plan JSON --budget S

meshax started by its launcher finds its place in the job through MESHAX_* variables
(`initialize()` without arguments); JAX processes call
`jax.distributed.initialize(address, N, i)` (skipped when N == 1).

On the mesh make_mesh((devices // 2, 2), ('a', 'b')) (Auto axes), with float32 data that
every process generates from the same seed and places with make_array_from_callback:

* matmul: relu(x @ y), x (4096, 2048) sharded P('a', 'b'), y (2048, 4096) P('b', None);
* chain:  jnp.sum(jnp.sin(x) * 2 + 1), x (4096, 2048) sharded P('a', None).

--plan is a JSON list of [kernel, mode, warmup_calls, max_reps, min_reps, seconds_cap]
with mode "eager" (the plain function) or "jit" (jax.jit of it). Per entry: the warm-up
calls (the first one includes tracing/compilation and is recorded as "first"), then
timed repetitions. Each repetition is: barrier (meshax: runtime().world.Barrier() when
there are several processes; JAX: multihost_utils.sync_global_devices), then on every
process t0, call, block_until_ready, t1. After each repetition process 0 decides whether
to go on (fewer than max_reps done and, unless fewer than min_reps are done, its
seconds_cap not spent) and broadcasts the decision. After the timed calls every process
computes a checksum of the last result (float of the global sum) for the report.

Every process keeps its times in $BENCH_RECORD_DIR/<rank>.json, rewritten after every
call, so a job killed for overrunning still leaves what it measured. The process exits
with status 3 if it runs longer than --budget seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np

from worker_support import Backend, start_watchdog

M, K, N = 4096, 2048, 4096


def build(b: Backend) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """The kernels and their sharded inputs."""
    jax, jnp, P = b.jax, b.jnp, b.P
    devices = jax.device_count()
    mesh = jax.make_mesh((devices // 2, 2), ("a", "b"), axis_types=(b.AxisType.Auto,) * 2)
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((M, K), dtype=np.float32)
    y_host = rng.standard_normal((K, N), dtype=np.float32)

    def place(host: np.ndarray, spec: Any) -> Any:
        return jax.make_array_from_callback(host.shape, b.NamedSharding(mesh, spec), lambda index: host[index])

    x_ab = place(x_host, P("a", "b"))
    y_b = place(y_host, P("b", None))
    x_a = place(x_host, P("a", None))

    def matmul(x: Any, y: Any) -> Any:
        return jax.nn.relu(x @ y)

    def chain(x: Any) -> Any:
        return jnp.sum(jnp.sin(x) * 2 + 1)

    return {"matmul": (matmul, (x_ab, y_b)), "chain": (chain, (x_a,))}


def checksum(b: Backend, result: Any) -> float:
    """The global sum of a result, as a Python float (same on every process)."""
    return float(b.jnp.sum(result)) if getattr(result, "ndim", 0) else float(result)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("meshax", "jax"), required=True)
    parser.add_argument("--address", default=None)
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--budget", type=float, required=True)
    parser.add_argument("--tag", default="", help="ignored; lets the benchmark find its processes")
    args = parser.parse_args()
    start_watchdog(args.budget, "compute worker")
    t_start = time.time()
    b = Backend(args)
    kernels = build(b)
    record: dict[str, Any] = {"rank": b.rank, "backend": b.name, "setup_s": time.time() - t_start,
                              "devices": b.jax.device_count(), "results": {}}
    path = os.path.join(os.environ["BENCH_RECORD_DIR"], f"{b.rank}.json")

    def save() -> None:
        with open(path + ".tmp", "w") as file:
            json.dump(record, file)
        os.replace(path + ".tmp", path)

    for kernel, mode, warmup, max_reps, min_reps, cap in json.loads(args.plan):
        fn, inputs = kernels[kernel]
        call = b.jax.jit(fn) if mode == "jit" else fn
        entry: dict[str, Any] = {"warmup": [], "times": [], "checksum": None}
        record["results"][f"{kernel}/{mode}"] = entry
        result = None
        for _ in range(warmup):
            b.barrier()
            t0 = time.perf_counter()
            result = call(*inputs)
            result.block_until_ready()
            entry["warmup"].append(time.perf_counter() - t0)
            save()
        b.settle()  # meshax's kernels compiled (in the background) before the timed calls
        began = time.monotonic()
        go_on = True
        while go_on:
            b.barrier()
            t0 = time.perf_counter()
            result = call(*inputs)
            result.block_until_ready()
            entry["times"].append(time.perf_counter() - t0)
            save()
            done = len(entry["times"])
            go_on = b.decide(done < max_reps and (done < min_reps or time.monotonic() - began < cap))
        entry["checksum"] = checksum(b, result)
        del result
        save()
    b.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
