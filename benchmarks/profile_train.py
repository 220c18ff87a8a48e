"""Where meshax's training step of bench_train.py spends its time, by kind of work (cProfile).

    MESHAX_NUM_CPU_DEVICES=1 python benchmarks/profile_train.py [--style dp_jit|fsdp] [--steps 5] [--top 0]
        [--timeline] [--batch 2048 --features 784 --width 1024]
    python -m meshax launch -n 2 --cpu-devices 4 benchmarks/profile_train.py --style fsdp

The step, model and data are bench_train.py's (workers/train_worker.py). After three warm-up steps (the step's kernels compiled after the second),
--steps steps run under cProfile, each after a barrier, with every primitive's implementation timed
(wall time; calls run side by side on a process's devices are added up). A step's time splits into
matmuls (dot_general), elementwise operations, reductions, other implementations, communication
(cProfile's own time in collectives.py, runtime/, transfer.py and MPI calls and waits) and the rest
(the interpreters' dispatch). Process 0 prints one line per category and, with --top N, cProfile's
N most expensive functions. With --timeline, no profiler runs: process 0 prints each operation the step
dispatches, in order, with its wall time (mean over the steps; the cluster's operations for a fused one),
which shows how a multi-threaded step's time splits where the per-implementation sums cannot.
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "workers"))

import train_worker  # noqa: E402 - after the workers' folder is on the path
from worker_support import Backend  # noqa: E402

ELEMENTWISE = {"select", "add", "add_any", "sub", "mul", "div", "max", "min", "neg", "exp", "log", "log1p", "expm1",
               "tanh", "logistic", "gt", "ge", "lt", "le", "eq", "ne", "convert_element_type", "broadcast_in_dim",
               "integer_pow", "square", "pow", "abs", "sign", "sqrt", "rsqrt", "copy", "stop_gradient"}
COMMUNICATION_FILES = ("collectives.py", "/runtime/", "transfer.py")
COMMUNICATION_CALLS = ("Allreduce", "Reduce_scatter", "Allgather", "Bcast", "Barrier", "Sendrecv", "Wait", "Isend",
                       "Irecv", "Alltoall", "sched_yield")


def timed_implementations() -> collections.Counter:
    """Wrap every primitive's implementation so that its wall time adds up in the returned counter."""
    from meshax._src.core.core import impl_rules

    spent: collections.Counter = collections.Counter()
    for primitive, impl in list(impl_rules.items()):
        def timed(*args: Any, _impl: Any = impl, _name: str = primitive.name, **params: Any) -> Any:
            start = time.perf_counter()
            try:
                return _impl(*args, **params)
            finally:
                spent[_name] += time.perf_counter() - start
        impl_rules[primitive] = timed
    return spent


def timed_operations() -> list:
    """Wrap the eager interpreter so that each operation's wall time is recorded, in order of completion, as
    (depth, label, seconds) in the returned list (depth 1: called by the program; 2: by a jitted function's
    program, ...)."""
    from meshax._src.interpreters import eager, shard_map

    record: list = []
    depth = [0]

    def timing(process: Any, prefix: str = "") -> Any:
        def timed(self: Any, primitive: Any, args: Any, params: Any) -> Any:
            depth[0] += 1
            start = time.perf_counter()
            result = None
            try:
                result = process(self, primitive, args, params)
                return result
            finally:
                if not prefix or result is not None:  # a product not run as one is timed by `process`
                    record.append((depth[0], prefix + _label(primitive, args, params), time.perf_counter() - start))
                depth[0] -= 1
        return timed
    for trace in (eager.EagerTrace, shard_map.DeviceTrace):  # eager (and jit's programs), shard_map's bodies
        trace.process = timing(trace.process)
    # products summed next over the process's devices, run as one (process_blocks.run_summed_product)
    shard_map.DeviceTrace.summed_product = timing(shard_map.DeviceTrace.summed_product, "summed ")
    return record


def _label(primitive: Any, args: Any, params: dict) -> str:
    name = primitive.name
    if name == "fused":
        name += "[" + " ".join(eq.primitive.name for eq in params["cluster"].jaxpr.equations) + "]"
    shapes = " ".join("x".join(map(str, getattr(a, "shape", ()))) or "()" for a in args)
    return f"{name[:70]} ({shapes})"


def print_timeline(record: list, steps: int) -> None:
    """The operations below the outermost `jit`s and `shard_map`s, each with its median wall time over the steps."""
    calls = [r for r in record if not r[1].startswith(("jit ", "pjit ", "shard_map "))]
    top = min(depth for depth, label, _ in calls if not label.startswith("summed "))
    record = [(label, seconds) for depth, label, seconds in calls if depth == top]
    per_step = len(record) // steps
    total = sum(seconds for _, seconds in record) / steps
    print(f"  {per_step} top-level operations per step, {total * 1e3:.1f} ms in them (mean of {steps} steps)")
    for i in range(per_step):
        seconds = sorted(record[i + k * per_step][1] for k in range(steps))[steps // 2]
        print(f"  {seconds * 1e3:7.2f} ms  {record[i][0]}")


def communication_seconds(stats: pstats.Stats) -> float:
    total = 0.0
    for (file, _, name), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if any(part in file for part in COMMUNICATION_FILES) or any(call in name for call in COMMUNICATION_CALLS):
            total += own
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=("dp_jit", "fsdp"), default="dp_jit")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=0, help="also print cProfile's N most expensive functions")
    parser.add_argument("--timeline", action="store_true", help="each operation's wall time instead of cProfile")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--features", type=int, default=784)
    parser.add_argument("--width", type=int, default=1024,
                        help="hidden width (with --batch 64 --features 16 --width 16 a step is all dispatch)")
    cli = parser.parse_args()
    args = argparse.Namespace(backend="meshax", style=cli.style, batch=cli.batch, features=cli.features,
                              width=cli.width, classes=10, lr=0.01, address=None, process_id=0, processes=1)
    b = Backend(args)
    common = train_worker.load_common("meshax")
    step, params, x, y = train_worker.build(b, common, args)
    for warmup in range(3):
        params, loss = step(params, x, y)
        b.jax.block_until_ready((params, loss))
        if warmup == 1:
            b.settle()  # the kernels of the step's clusters compiled (then one more warm-up step)
    record = timed_operations() if cli.timeline else None
    spent = timed_implementations() if not cli.timeline else collections.Counter()
    profile, walls = cProfile.Profile(), []
    for _ in range(cli.steps):
        b.barrier()
        if record is None:
            profile.enable()
        start = time.perf_counter()
        params, loss = step(params, x, y)
        b.jax.block_until_ready((params, loss))
        walls.append(time.perf_counter() - start)
        profile.disable()
    if b.rank != 0:
        return 0
    if record is not None:
        print(f"{b.size}x{len(b.jax.local_devices())} {cli.style}: {sum(walls) / len(walls) * 1e3:.1f} ms per step "
              f"(mean of {len(walls)}; median {sorted(walls)[len(walls) // 2] * 1e3:.1f} ms)")
        print_timeline(record, len(walls))
        return 0
    n, stats = len(walls), pstats.Stats(profile)
    wall = sum(walls) / n
    parts = {"matmul (dot_general)": spent.pop("dot_general", 0.0) / n,
             "elementwise": sum(v for k, v in spent.items() if k in ELEMENTWISE) / n,
             "reductions": sum(v for k, v in spent.items() if k.startswith(("reduce", "arg"))) / n}
    parts["other implementations"] = sum(spent.values()) / n - parts["elementwise"] - parts["reductions"]
    parts["communication"] = communication_seconds(stats) / n
    parts["rest (interpreters, dispatch)"] = wall - sum(parts.values())
    layout = f"{b.size}x{len(b.jax.local_devices())}"
    print(f"{layout} {cli.style}: {wall * 1e3:.0f} ms per profiled step (mean of {n}; "
          f"{os.environ.get('MESHAX_CPU_THREADS') or 'default'} compute threads)")
    for name, seconds in parts.items():
        print(f"  {name:32s} {seconds * 1e3:7.1f} ms  {seconds / wall:4.0%}")
    print("  largest implementations: " + ", ".join(f"{k} {v / n * 1e3:.1f} ms" for k, v in spent.most_common(6)))
    if cli.top:
        stats.sort_stats("tottime").print_stats(cli.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
