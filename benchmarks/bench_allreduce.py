"""Allreduce: meshax ProcessGroup.allreduce vs plain mpi4py, 4 processes, float32 sums.

    python benchmarks/bench_allreduce.py [--processes 4] [--budget 250] [--quick]

Runs workers/allreduce_worker.py as four jobs, one after the other:

1. meshax as shipped: N independent processes with an explicit coordinator address
   (`python worker.py ... localhost:PORT i N`), interleaving meshax's
   `group.allreduce(x)`, `group.allreduce(x, out=buf)` and mpi4py's
   `world.Allreduce(x, buf, op=MPI.SUM)` on the same communicator (runtime().world).
2. the same with meshax's MPI_Init_thread patched (in the worker only) to request
   MPI_THREAD_MULTIPLE instead of MPI_THREAD_SERIALIZED: a what-if experiment.
3. plain `mpiexec -n N` + mpi4py with its default thread level (MULTIPLE).
4. plain `mpiexec -n N` + mpi4py with MPI4PY_RC_THREAD_LEVEL=serialized, the level
   meshax requests.

For 4 KB, 4 MB and 64 MB every call follows a barrier; a call's time is the max
over processes; reported are medians over the repetitions (each size is capped in
seconds, so slow configurations get fewer repetitions) and whether every result
was exact.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from _common import (WORKERS_DIR, exit_cleanly_on_signals, free_port, machine_info, markdown_table, median,
                     python, quantile, run_job, venv_tool, write_results)

KB, MB = 1 << 10, 1 << 20
# [bytes, warmup rounds, timed repetitions, seconds cap for this size]
PLAN = [[4 * KB, 20, 1000, 6], [4 * MB, 1, 60, 20], [64 * MB, 1, 12, 12]]
QUICK_PLAN = [[4 * KB, 2, 20, 2], [4 * MB, 1, 3, 3], [64 * MB, 1, 2, 3]]
JOB_SLACK = 60.0  # Seconds per job beyond the plan's caps: start-up, the last round, shutdown.
VARIANTS = ("meshax", "meshax(out)", "mpi4py")


@dataclass
class Config:
    """One job: a label, the worker's mode, how it is started and extra environment."""

    label: str
    mode: str
    mpiexec: bool
    env: dict[str, str]


CONFIGS = [
    Config("meshax as shipped", "meshax", False, {}),
    Config("meshax, what-if THREAD_MULTIPLE", "meshax-thread-multiple", False, {}),
    Config("plain mpiexec + mpi4py (default)", "mpi4py", True, {"MPI4PY_RC_THREAD_LEVEL": "multiple"}),
    Config("plain mpiexec + mpi4py, THREAD_SERIALIZED", "mpi4py", True, {"MPI4PY_RC_THREAD_LEVEL": "serialized"}),
]


# --------------------------------------------------------------------------
# Running the jobs
# --------------------------------------------------------------------------


def commands(config: Config, n: int, plan: list[list[int]], budget: float) -> list[list[str]]:
    """The command lines of one job (N processes, or one mpiexec)."""
    worker = [python(), str(WORKERS_DIR / "allreduce_worker.py"), "--mode", config.mode,
              "--plan", json.dumps(plan), "--budget", f"{budget:.0f}"]
    if config.mpiexec:
        return [[venv_tool("mpiexec"), "-n", str(n), *worker]]
    address = f"localhost:{free_port()}"
    return [[*worker, "--address", address, "--process-id", str(i), "--processes", str(n)] for i in range(n)]


def run_config(config: Config, n: int, plan: list[list[int]], timeout: float) -> dict[str, Any] | None:
    """Run one job; its record, or None (with a message) if it failed."""
    env = dict(os.environ, **config.env)
    job = run_job(commands(config, n, plan, timeout - 2), timeout=timeout, env=env)
    if not job.ok or not job.records:
        print(f"[{config.label}] failed: {job.failure()}", file=sys.stderr)
        return None
    print(f"[{config.label}] done in {job.exit_time - job.spawn_time:.1f} s", file=sys.stderr)
    return job.records[0]


def run_all(n: int, plan: list[list[int]], budget: float) -> dict[str, dict[str, Any] | None]:
    """Run every configuration within `budget` seconds overall."""
    per_job = sum(size[3] for size in plan) + JOB_SLACK
    deadline = time.monotonic() + budget
    records: dict[str, dict[str, Any] | None] = {}
    for config in CONFIGS:
        remaining = deadline - time.monotonic()
        if remaining < 10:
            print(f"[{config.label}] skipped: time budget used up", file=sys.stderr)
            records[config.label] = None
            continue
        records[config.label] = run_config(config, n, plan, min(per_job, remaining))
    return records


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _size(nbytes: int) -> str:
    return f"{nbytes // MB} MB" if nbytes >= MB else f"{nbytes // KB} KB"


def _time(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "n/a"
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _cell(values: list[float]) -> str:
    """Median (bold) with the interquartile range."""
    if not values:
        return "n/a"
    return f"**{_time(median(values))}** ({_time(quantile(values, 0.25))}–{_time(quantile(values, 0.75))})"


def _exact(result: dict[str, Any]) -> str:
    wrong = [name for name, ok in result["correct"].items() if not ok]
    return "yes" if not wrong else "NO: " + ", ".join(wrong)


def same_world_table(records: dict[str, dict[str, Any] | None]) -> str:
    """meshax vs mpi4py in the same processes, for the meshax jobs."""
    headers = ["job", "thread level", "size", "reps", "meshax `allreduce(x)`", "meshax `allreduce(x, out=buf)`",
               "mpi4py `Allreduce(x, buf)` on the same world", "meshax / mpi4py", "meshax(out) / mpi4py", "exact"]
    rows = []
    for label, record in records.items():
        if record is None or record["mode"] == "mpi4py":
            continue
        for result in record["results"]:
            times = result["times"]
            base = median(times["mpi4py"])
            rows.append([label, record["thread_level"].removeprefix("MPI_THREAD_"), _size(result["bytes"]),
                         str(len(times["mpi4py"])), *(_cell(times[name]) for name in VARIANTS),
                         f"{median(times['meshax']) / base:.2f}", f"{median(times['meshax(out)']) / base:.2f}",
                         _exact(result)])
    return markdown_table(headers, rows)


def across_worlds_table(records: dict[str, dict[str, Any] | None]) -> str:
    """mpi4py's Allreduce in each job's world, and meshax's allreduce relative to plain mpiexec + mpi4py."""
    present = {label: record for label, record in records.items() if record is not None}
    reference = present.get(CONFIGS[2].label)
    headers = ["size"] + [f"{label} [{record['thread_level'].removeprefix('MPI_THREAD_')}]"
                          for label, record in present.items()] + ["meshax as shipped / plain mpi4py (default)"]
    sizes = [result["bytes"] for result in next(iter(present.values()))["results"]] if present else []
    rows = []
    for index, nbytes in enumerate(sizes):
        row = [_size(nbytes)] + [_cell(record["results"][index]["times"]["mpi4py"]) for record in present.values()]
        shipped = present.get(CONFIGS[0].label)
        if shipped is not None and reference is not None:
            ratio = median(shipped["results"][index]["times"]["meshax"]) / median(
                reference["results"][index]["times"]["mpi4py"])
            row.append(f"{ratio:.1f}×")
        else:
            row.append("n/a")
        rows.append(row)
    return markdown_table(headers, rows)


def report(records: dict[str, dict[str, Any] | None], n: int) -> str:
    failed = [label for label, record in records.items() if record is None]
    return "\n".join([
        f"## Allreduce (sum, float32) over {n} processes: meshax vs mpi4py",
        "",
        machine_info(),
        "",
        "### meshax ProcessGroup.allreduce vs mpi4py in the same processes (same communicator, interleaved)",
        "",
        same_world_table(records),
        "",
        "### mpi4py `Allreduce` in each job's MPI world (and meshax vs a plain mpiexec + mpi4py job)",
        "",
        across_worlds_table(records),
        "",
        "Time per call: median over repetitions (interquartile range in parentheses); a repetition's time is "
        "the max over processes; every call follows a barrier; variants interleaved in rotating order. Each size "
        "has a time cap, so slow configurations have fewer repetitions (column 'reps'). 'what-if THREAD_MULTIPLE' "
        "patches meshax's MPI_Init_thread request inside the benchmark worker only."
        + (f" Failed or skipped: {', '.join(failed)}." if failed else ""),
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--budget", type=float, default=250.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    records = run_all(args.processes, QUICK_PLAN if args.quick else PLAN, args.budget)
    text = report(records, args.processes)
    print(text)
    print(f"\nwritten to {write_results('allreduce', text)}", file=sys.stderr)
    complete = all(record is not None for record in records.values())
    exact = all(all(r["correct"].values()) for record in records.values() if record for r in record["results"])
    return 0 if complete and exact else 1


if __name__ == "__main__":
    sys.exit(main())
