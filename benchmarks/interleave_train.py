"""meshax's training step of bench_train.py and the NumPy floor, interleaved in the same processes.

    MESHAX_NUM_CPU_DEVICES=1 python benchmarks/interleave_train.py [--style dp_jit|fsdp] [--rounds 15]
    python -m meshax launch -n 2 --cpu-devices 4 benchmarks/interleave_train.py --style fsdp

On a machine shared with other jobs, timings taken minutes apart are not comparable; here every round
runs one meshax step and then one floor step (workers/train_floor.py, at meshax's CPU budget), each
after a barrier, so both see the same load. Per step: wall time (the max over processes) and CPU time
of the process (all its threads; the max over processes), which other jobs disturb much less. Process 0
prints the medians and the ratios meshax / floor, and the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent / "workers"))

import train_worker  # noqa: E402 - after the workers' folder is on the path
from worker_support import Backend  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=("dp_jit", "fsdp"), default="dp_jit")
    parser.add_argument("--rounds", type=int, default=15)
    cli = parser.parse_args()
    load_before = os.getloadavg()[0]
    args = argparse.Namespace(backend="meshax", style=cli.style, batch=2048, features=784, width=1024, classes=10,
                              lr=0.01, address=None, process_id=0, processes=1)
    b = Backend(args)
    common = train_worker.load_common("meshax")
    step, params, x, y = train_worker.build(b, common, args)

    floor = train_worker.Floor(b, common, args)

    def run_meshax() -> None:
        nonlocal params
        params, loss = step(params, x, y)
        b.jax.block_until_ready((params, loss))

    times: dict[str, list[tuple[float, float]]] = {"meshax": [], "floor": []}
    for round_ in range(cli.rounds + 2):
        for name, run in (("meshax", run_meshax), ("floor", floor.step)):
            b.barrier()
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            if round_ >= 2:
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    gathered = {name: [row for row in (b.world.allgather(values) if b.world is not None else [values])]
                for name, values in times.items()}
    if b.rank != 0:
        return 0
    medians = {}
    for name, per_process in gathered.items():
        walls = [max(p[i][0] for p in per_process) for i in range(cli.rounds)]
        cpus = [max(p[i][1] for p in per_process) for i in range(cli.rounds)]
        medians[name] = (statistics.median(walls), statistics.median(cpus))
    layout = f"{b.size}x{len(b.jax.local_devices())}"
    (mw, mc), (fw, fc) = medians["meshax"], medians["floor"]
    print(f"{layout} {cli.style} ({floor.threads} threads, {cli.rounds} rounds, load {load_before:.1f} -> "
          f"{os.getloadavg()[0]:.1f}): wall meshax {mw * 1e3:.1f} floor {fw * 1e3:.1f} ms ({mw / fw:.2f}x); "
          f"cpu meshax {mc * 1e3:.1f} floor {fc * 1e3:.1f} ms ({mc / fc:.2f}x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
