"""Resharding a 256 MB float32 array across 4 processes: meshax.device_put vs the same data movement
written with plain mpi4py, in the same processes.

    python benchmarks/bench_reshard.py [--size 8192] [--reps 7] [--budget 170] [--quick]

Starts 4 processes by hand (explicit coordinator address, 2 CPU devices each: a mesh of 8 devices
('x',)); each is this file with --worker. The array (size x size float32, 256 MB at 8192) starts
sharded P('x', None): process p holds rows [p*size/4, (p+1)*size/4) on its two devices.

Two reshards, each timed both ways:

* P('x', None) -> P(None, 'x'): every process ends up with its columns of all rows.
  meshax: `meshax.device_put(x, NamedSharding(mesh, P(None, 'x')))`.
  mpi4py: pack the local row block into 4 contiguous column blocks (the packing copy is timed),
  `world.Alltoall(send, recv)`; recv, viewed as (size, size/4), is the process's column block.
* P('x', None) -> P(): every process ends up with the whole array.
  meshax: `meshax.device_put(x, NamedSharding(mesh, P()))` (the two local replicas share a buffer).
  mpi4py: `world.Allgather(local_rows, recv)` into a (size, size) buffer.

The mpi4py variant starts from the process's rows as one contiguous array, as a hand-written MPI
program would hold them. Each repetition follows `runtime().world.Barrier()`; its time is the
maximum over processes; meshax and mpi4py alternate. Reported: medians (and min-max) over the
timed repetitions after one warm-up each; throughput = array bytes / time. Results go to
benchmarks/results/reshard.md. Processes are killed on every exit path (time limit, error, signal).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

PROCESSES, DEVICES_PER_PROCESS = 4, 2
CASES = [("P('x', None) -> P(None, 'x')", "columns"), ("P('x', None) -> P()", "replicated")]


# --------------------------------------------------------------------------
# Worker: one of the 4 processes
# --------------------------------------------------------------------------


def block(index: tuple[slice, ...], size: int) -> np.ndarray:
    """The array's values in `index`: distinct small integers, exact in float32."""
    rows = np.arange(size)[index[0]]
    cols = np.arange(size)[index[1]]
    return ((rows[:, None] * 7 + cols[None, :] * 3) % 65521).astype(np.float32)


def worker(args: argparse.Namespace) -> int:
    import meshax
    from meshax._src.runtime.distributed import runtime
    from meshax.sharding import NamedSharding, PartitionSpec as P

    meshax.distributed.initialize(args.address, args.processes, args.process_id)
    from mpi4py import MPI  # already initialised by meshax: this only imports the module

    world = runtime().world
    here, n, size = meshax.process_index(), meshax.process_count(), args.size
    mesh = meshax.make_mesh((meshax.device_count(),), ("x",))
    rows = NamedSharding(mesh, P("x", None))
    x = meshax.make_array_from_callback((size, size), rows, lambda index: block(index, size))
    local_rows = size // n
    local = np.ascontiguousarray(np.concatenate([x.local_buffers()[d] for d in meshax.local_devices()]))
    assert local.shape == (local_rows, size)
    cols = size // n

    def meshax_columns() -> Any:
        return meshax.device_put(x, NamedSharding(mesh, P(None, "x")))

    def mpi_columns() -> Any:
        send = np.ascontiguousarray(local.reshape(local_rows, n, cols).transpose(1, 0, 2))  # packing, timed
        recv = np.empty((n, local_rows, cols), np.float32)
        world.Alltoall(send, recv)
        return recv.reshape(size, cols)  # rows of process 0, then 1, ...: this process's columns

    def meshax_replicated() -> Any:
        return meshax.device_put(x, NamedSharding(mesh, P()))

    def mpi_replicated() -> Any:
        recv = np.empty((size, size), np.float32)
        world.Allgather(local, recv)
        return recv

    # Check once that both ways give the same, correct data.
    ours, theirs = meshax_columns(), mpi_columns()
    for position, device in enumerate(meshax.local_devices()):
        width = cols // DEVICES_PER_PROCESS
        expected = theirs[:, position * width:(position + 1) * width]
        assert np.array_equal(ours.local_buffers()[device], expected)
    first = here * cols
    assert np.array_equal(theirs[:, :8], block((slice(None), slice(first, first + 8)), size))
    del ours, theirs
    ours, theirs = meshax_replicated(), mpi_replicated()
    assert np.array_equal(np.asarray(ours), theirs)
    assert np.array_equal(theirs[::997, ::991], block((slice(None, None, 997), slice(None, None, 991)), size))
    del ours, theirs

    variants: dict[str, dict[str, Callable[[], Any]]] = {
        "columns": {"meshax": meshax_columns, "mpi4py": mpi_columns},
        "replicated": {"meshax": meshax_replicated, "mpi4py": mpi_replicated},
    }
    times: dict[str, dict[str, list[float]]] = {case: {"meshax": [], "mpi4py": []} for case in variants}
    for case, calls in variants.items():
        case_deadline = time.monotonic() + args.seconds_per_case
        for rep in range(args.reps + 1):  # rep 0 warms up
            order = ["meshax", "mpi4py"] if rep % 2 == 0 else ["mpi4py", "meshax"]
            for name in order:
                world.Barrier()
                start = time.perf_counter()
                result = calls[name]()
                elapsed = time.perf_counter() - start
                del result
                elapsed = world.allreduce(elapsed, op=MPI.MAX)
                if rep:
                    times[case][name].append(elapsed)
            # Process 0 decides whether to go on, so that every process stops together.
            stop = world.bcast(rep >= 2 and time.monotonic() > case_deadline, root=0)
            if stop:
                break
    world.Barrier()
    if here == 0:
        record = {"size": size, "processes": n, "devices": meshax.device_count(), "times": times}
        directory = os.environ.get("BENCH_RECORD_DIR")
        if directory:
            Path(directory, "0.json").write_text(json.dumps(record))
        else:
            print(json.dumps(record))
    return 0


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------


def seconds(value: float) -> str:
    return f"{value * 1e3:.0f} ms" if value >= 0.1 else f"{value * 1e3:.1f} ms"


def report(record: dict[str, Any], machine: str) -> str:
    from _common import markdown_table, median

    size = record["size"]
    nbytes = size * size * 4
    n = record["processes"]
    moved = {  # bytes each process receives from other processes
        "columns": nbytes // n * (n - 1) // n,
        "replicated": nbytes // n * (n - 1),
    }
    rows = []
    for label, case in CASES:
        measured = record["times"][case]
        ours, theirs = median(measured["meshax"]), median(measured["mpi4py"])
        rows.append([
            label,
            f"{moved[case] / 2**20:.0f} MiB",
            str(len(measured["meshax"])),
            f"**{seconds(ours)}** ({seconds(min(measured['meshax']))}–{seconds(max(measured['meshax']))})",
            f"**{seconds(theirs)}** ({seconds(min(measured['mpi4py']))}–{seconds(max(measured['mpi4py']))})",
            f"{nbytes / ours / 1e9:.2f}",
            f"{nbytes / theirs / 1e9:.2f}",
            f"{theirs / ours:.2f}",
        ])
    table = markdown_table(
        ["reshard", "received per process", "reps", "meshax `device_put`", "mpi4py", "meshax GB/s",
         "mpi4py GB/s", "meshax / mpi4py throughput"], rows)
    return "\n".join([
        f"## Resharding a {size}x{size} float32 array ({nbytes / 2**20:.0f} MiB) over {n} processes "
        f"x {record['devices'] // n} CPU devices: meshax vs mpi4py",
        "",
        machine,
        "",
        table,
        "",
        "Time per reshard: median over repetitions (min–max in parentheses); a repetition's time is the "
        "max over processes, each repetition follows a barrier, meshax and mpi4py alternate, after one "
        "warm-up each. GB/s = array bytes (10^9) / median time. 'received per process' = bytes a process "
        "gets from the others. mpi4py: P(None, 'x') packs the local rows into column blocks (timed) and "
        "calls `Alltoall`; P() calls `Allgather` on the contiguous local rows. meshax starts from its "
        "two per-device buffers and builds per-device results (replicas share one buffer).",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=11, help="timed repetitions per variant (at most)")
    parser.add_argument("--budget", type=float, default=170, help="seconds for the whole job")
    parser.add_argument("--quick", action="store_true", help="2048x2048, 3 repetitions; no results file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--process-id", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=PROCESSES, help=argparse.SUPPRESS)
    parser.add_argument("--seconds-per-case", type=float, default=60, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    from _common import exit_cleanly_on_signals, free_port, machine_info, python, run_job, write_results

    exit_cleanly_on_signals()
    if args.quick:
        args.size, args.reps = 2048, 3
    # Start-up, the correctness check and shutdown take part of the budget; the rest is split by case.
    per_case = max(10.0, (args.budget - 40) / len(CASES))
    address = f"localhost:{free_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MESHAX_", "JAX_", "XLA_", "PMI_", "HYDRA_"))}
    env.update(MESHAX_NUM_CPU_DEVICES=str(DEVICES_PER_PROCESS), PYTHONUNBUFFERED="1")
    commands = [[python(), str(Path(__file__).resolve()), "--worker", "--address", address, "--process-id", str(i),
                 "--processes", str(PROCESSES), "--size", str(args.size), "--reps", str(args.reps),
                 "--seconds-per-case", f"{per_case:.0f}"] for i in range(PROCESSES)]
    job = run_job(commands, timeout=args.budget, env=env)
    if not job.ok or not job.records:
        print(f"bench_reshard: the job failed: {job.failure()}", file=sys.stderr)
        return 1
    text = report(job.records[0], machine_info())
    print(text, flush=True)
    if not args.quick:
        path = write_results("reshard", text)
        print(f"\nwritten to {path}", file=sys.stderr)
    print(f"job took {job.exit_time - job.spawn_time:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
