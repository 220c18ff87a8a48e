"""Allreduce: meshax ProcessGroup.allreduce vs plain mpi4py, 4 processes, float32 sums.

    python benchmarks/bench_allreduce.py [--processes 4] [--budget 250] [--quick] [--output allreduce]

Runs workers/allreduce_worker.py in three configurations, one job per configuration
and size, one job after the other:

1. meshax as shipped: N independent processes with an explicit coordinator address
   (`python worker.py ... localhost:PORT i N`), interleaving meshax's
   `group.allreduce(x)`, `group.allreduce(x, out=buf)` and mpi4py's
   `world.Allreduce(x, buf, op=MPI.SUM)` on the same communicator (runtime().world).
2. plain `mpiexec -n N` + mpi4py with its default thread level (MULTIPLE).
3. plain `mpiexec -n N` + mpi4py with MPI4PY_RC_THREAD_LEVEL=serialized: the level
   meshax used to request, kept as a reference for why it must not (with fewer
   than MULTIPLE, MPICH uses spin-waiting shared-memory collectives that are
   extremely slow when processes outnumber cores).

For 4 KB, 4 MB and 64 MB every call follows a barrier; a call's time is the max
over processes; reported are medians over the repetitions (each size is capped in
seconds, so slow configurations get fewer repetitions, and a job that overruns
its cap by JOB_SLACK seconds is killed, keeping what it measured) and whether
every result was exact.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

from _common import (WORKERS_DIR, ForeignLoad, exit_cleanly_on_signals, free_port, machine_info, markdown_table, median,
                     python, quantile, run_job, venv_tool, write_results)

KB, MB = 1 << 10, 1 << 20
# [bytes, warmup rounds, timed repetitions, seconds cap for this size]
PLAN = [[4 * KB, 20, 1000, 5], [4 * MB, 1, 60, 15], [64 * MB, 1, 12, 12]]
QUICK_PLAN = [[4 * KB, 2, 20, 2], [4 * MB, 1, 3, 3], [64 * MB, 1, 2, 3]]
JOB_SLACK = 15.0  # Seconds a job may take beyond its size's cap (start-up, last round, shutdown).
VARIANTS = ("meshax", "meshax(out)", "mpi4py")
Cell = dict[str, Any]  # One job's measurement, combined over its processes (see combine()).


@dataclass
class Config:
    """One job: a label, the worker's mode, how it is started and extra environment."""

    label: str
    mode: str
    mpiexec: bool
    env: dict[str, str]


CONFIGS = [
    Config("meshax as shipped", "meshax", False, {}),
    Config("plain mpiexec + mpi4py (default)", "mpi4py", True, {"MPI4PY_RC_THREAD_LEVEL": "multiple"}),
    Config("plain mpiexec + mpi4py, THREAD_SERIALIZED", "mpi4py", True, {"MPI4PY_RC_THREAD_LEVEL": "serialized"}),
]


# --------------------------------------------------------------------------
# Running the jobs
# --------------------------------------------------------------------------


def commands(config: Config, n: int, size: list[int], budget: float) -> list[list[str]]:
    """The command lines of one job (N processes, or one mpiexec)."""
    worker = [python(), str(WORKERS_DIR / "allreduce_worker.py"), "--mode", config.mode,
              "--size", json.dumps(size), "--budget", f"{budget:.0f}"]
    if config.mpiexec:
        return [[venv_tool("mpiexec"), "-n", str(n), *worker]]
    address = f"localhost:{free_port()}"
    return [[*worker, "--address", address, "--process-id", str(i), "--processes", str(n)] for i in range(n)]


def combine(records: list[dict[str, Any]], n: int) -> Cell | None:
    """One measurement from the per-process records: per repetition the max over processes."""
    if len(records) != n:
        return None
    names = list(records[0]["times"])

    def slowest(key: str, name: str) -> list[float]:
        return [max(values) for values in zip(*(r[key][name] for r in records))]

    return dict(
        records[0],
        times={name: slowest("times", name) for name in names},
        warmup_times={name: slowest("warmup_times", name) for name in names},
        correct={name: all(r["correct"][name] for r in records) for name in names},
        complete=all(r["complete"] for r in records),
    )


def run_cell(config: Config, n: int, size: list[int], timeout: float) -> Cell | None:
    """Run one job for one size; its combined measurement (possibly partial), or None."""
    env = dict(os.environ, **config.env)
    job = run_job(commands(config, n, size, timeout + 5), timeout=timeout, env=env)
    result = combine(job.records, n)
    status = f"done in {job.exit_time - job.spawn_time:.1f} s" if job.ok else f"FAILED ({job.failure()})"
    print(f"[{config.label}] {_size(size[0])}: {status}", file=sys.stderr)
    if result is not None and not job.ok:
        result["complete"] = False
    return result


def run_all(n: int, plan: list[list[int]], budget: float) -> dict[str, list[Cell | None]]:
    """Run every (configuration, size) as its own job, within `budget` seconds overall."""
    deadline = time.monotonic() + budget
    cells: dict[str, list[Cell | None]] = {}
    for config in CONFIGS:
        cells[config.label] = []
        for size in plan:
            remaining = deadline - time.monotonic()
            if remaining < 5:
                print(f"[{config.label}] {_size(size[0])}: skipped, time budget used up", file=sys.stderr)
                cells[config.label].append(None)
                continue
            cells[config.label].append(run_cell(config, n, size, min(size[3] + JOB_SLACK, remaining)))
    return cells


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _size(nbytes: int) -> str:
    return f"{nbytes // MB} MB" if nbytes >= MB else f"{nbytes // KB} KB"


def _time(seconds: float) -> str:
    if seconds != seconds:  # NaN
        return "n/a"
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _median_of(cell: Cell | None, name: str) -> float:
    """The median timed repetition of `name`, else its warmup time (jobs killed early), else NaN."""
    if cell is None:
        return float("nan")
    values = cell["times"][name] or cell["warmup_times"][name]
    return median(values)


def _cell(cell: Cell | None, name: str) -> str:
    """Median (bold) and interquartile range; † marks a job stopped at its time limit."""
    if cell is None:
        return "n/a"
    mark = "" if cell["complete"] else " †"
    values = cell["times"][name]
    if not values:
        warmup = cell["warmup_times"][name]
        return f"≈{_time(median(warmup))} (warmup call only){mark}" if warmup else f"none{mark}"
    spread = f"{_time(quantile(values, 0.25))}–{_time(quantile(values, 0.75))}"
    return f"**{_time(median(values))}** ({spread}){mark}"


def _ratio(numerator: float, denominator: float) -> str:
    ratio = numerator / denominator if denominator > 0 else float("nan")
    return "n/a" if ratio != ratio else (f"{ratio:.2f}" if ratio < 10 else f"{ratio:,.0f}")


def _paired(cell: Cell | None, name: str, base: str = "mpi4py") -> float:
    """Median over rounds of time(name) / time(base) within the same round (robust to load drifts)."""
    if cell is None:
        return float("nan")
    return median([a / b for a, b in zip(cell["times"][name], cell["times"][base]) if b > 0])


def _exact(cell: Cell | None) -> str:
    if cell is None:
        return "n/a"
    wrong = [name for name, ok in cell["correct"].items() if not ok]
    return "yes" if not wrong else "NO: " + ", ".join(wrong)


def _level(cells: list[Cell | None]) -> str:
    levels = {cell["thread_level"].removeprefix("MPI_THREAD_") for cell in cells if cell is not None}
    return "/".join(sorted(levels)) or "?"


def same_world_table(cells: dict[str, list[Cell | None]], plan: list[list[int]]) -> str:
    """meshax vs mpi4py in the same processes, for the meshax jobs."""
    headers = ["job", "thread level", "size", "reps", "meshax `allreduce(x)`", "meshax `allreduce(x, out=buf)`",
               "mpi4py `Allreduce(x, buf)`, same world", "meshax / mpi4py", "meshax(out) / mpi4py",
               "paired ratios meshax, meshax(out) / mpi4py", "exact"]
    rows = []
    for config in CONFIGS:
        if config.mpiexec:
            continue
        for size, cell in zip(plan, cells[config.label]):
            base = _median_of(cell, "mpi4py")
            reps = str(len(cell["times"]["mpi4py"])) if cell else "0"
            rows.append([config.label, _level(cells[config.label]), _size(size[0]), reps,
                         *(_cell(cell, name) for name in VARIANTS),
                         _ratio(_median_of(cell, "meshax"), base), _ratio(_median_of(cell, "meshax(out)"), base),
                         f"{_ratio(_paired(cell, 'meshax'), 1.0)}, {_ratio(_paired(cell, 'meshax(out)'), 1.0)}",
                         _exact(cell)])
    return markdown_table(headers, rows)


def across_worlds_table(cells: dict[str, list[Cell | None]], plan: list[list[int]]) -> str:
    """mpi4py's Allreduce in each job's world; meshax's allreduce vs a plain mpiexec + mpi4py job."""
    shipped, reference = cells[CONFIGS[0].label], cells[CONFIGS[1].label]
    headers = (["size"] + [f"{c.label} [{_level(cells[c.label])}]" for c in CONFIGS]
               + ["meshax as shipped `allreduce(x)` / plain mpiexec + mpi4py (default)"])
    rows = []
    for index, size in enumerate(plan):
        row = [_size(size[0])] + [_cell(cells[c.label][index], "mpi4py") for c in CONFIGS]
        row.append(_ratio(_median_of(shipped[index], "meshax"), _median_of(reference[index], "mpi4py")))
        rows.append(row)
    return markdown_table(headers, rows)


def report(cells: dict[str, list[Cell | None]], plan: list[list[int]], n: int, load: str) -> str:
    """The Markdown report; `load` describes competing CPU use during the run."""
    caps = ", ".join(f"{_size(size[0])}: {size[2]} reps / {size[3]} s" for size in plan)
    return "\n".join([
        f"## Allreduce (sum, float32) over {n} processes: meshax vs mpi4py",
        "",
        f"{machine_info()}; {load}",
        "",
        "### meshax ProcessGroup.allreduce vs mpi4py in the same processes (same communicator, interleaved)",
        "",
        same_world_table(cells, plan),
        "",
        "### mpi4py `Allreduce` in each job's MPI world, and meshax vs a plain mpiexec + mpi4py job",
        "",
        across_worlds_table(cells, plan),
        "",
        "Jobs run one after the other, so this table compares runs made at different moments: trust it only "
        "when other processes used little CPU (see the machine line).",
        "",
        "Time per call: median over repetitions (interquartile range in parentheses); a repetition's time is "
        "the max over processes; every call follows a barrier; variants interleaved in rotating order. Ratios: "
        "of the medians, and 'paired': the median over rounds of the ratio within one round (less sensitive to "
        "load from other processes changing during the run). Every "
        "(job, size) is its own job, limited to a number of repetitions or a time cap, whichever comes first "
        f"({caps}; at least 2 repetitions), so slow configurations have fewer repetitions. † = the job was "
        f"killed at its time limit (cap + {JOB_SLACK:g} s) and only what it measured until then is shown.",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--budget", type=float, default=250.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    parser.add_argument("--output", default="allreduce", help="results/<OUTPUT>.md (default: allreduce)")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    machine_info()  # Taken now, so that its load average is from before the benchmark.
    load = ForeignLoad()
    plan = QUICK_PLAN if args.quick else PLAN
    cells = run_all(args.processes, plan, args.budget)
    text = report(cells, plan, args.processes, load.describe())
    print(text)
    print(f"\nwritten to {write_results(args.output, text)}", file=sys.stderr)
    measured = [cell for row in cells.values() for cell in row if cell is not None]
    exact = all(all(cell["correct"].values()) for cell in measured)
    return 0 if exact and len(measured) == len(CONFIGS) * len(plan) else 1


if __name__ == "__main__":
    sys.exit(main())
