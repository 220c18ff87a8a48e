"""Allreduce throughput: meshax ProcessGroup.allreduce vs plain mpi4py, 4 processes.

    python benchmarks/bench_allreduce.py [--processes 4] [--budget 200] [--quick]

Starts N independent `workers/allreduce_worker.py` processes (explicit coordinator
address, like `python child.py localhost:PORT i N`), which join one meshax job and
time float32 sum-allreduces of 4 KB, 4 MB and 64 MB. The three variants run on the
same communicator in the same processes, interleaved in rotating order, each call
after a barrier; a call's time is the max over processes. Reported: medians over
the repetitions, the ratio meshax/mpi4py, and whether every result was exact.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from _common import (WORKERS_DIR, exit_cleanly_on_signals, free_port, machine_info, markdown_table, median,
                     python, quantile, run_job, write_results)

KB, MB = 1 << 10, 1 << 20
# (bytes, warmup calls per variant, timed repetitions per variant)
PLAN = [(4 * KB, 50, 1000), (4 * MB, 5, 60), (64 * MB, 2, 12)]
QUICK_PLAN = [(4 * KB, 5, 50), (4 * MB, 2, 5), (64 * MB, 1, 2)]
VARIANTS = ("meshax", "meshax(out)", "mpi4py")


def worker_commands(n: int, plan: list[tuple[int, int, int]], budget: float) -> list[list[str]]:
    address = f"localhost:{free_port()}"
    worker = str(WORKERS_DIR / "allreduce_worker.py")
    return [[python(), worker, address, str(i), str(n), json.dumps(plan), str(budget)] for i in range(n)]


def _size(nbytes: int) -> str:
    return f"{nbytes // MB} MB" if nbytes >= MB else f"{nbytes // KB} KB"


def _time(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _cell(values: list[float]) -> str:
    """Median with the interquartile range."""
    return f"**{_time(median(values))}** ({_time(quantile(values, 0.25))}–{_time(quantile(values, 0.75))})"


def table_row(result: dict[str, Any]) -> list[str]:
    times = result["times"]
    base = median(times["mpi4py"])
    bandwidth = result["bytes"] / base / 1e9 if base > 0 else float("nan")
    correct = all(result["correct"].values())
    wrong = [name for name, ok in result["correct"].items() if not ok]
    return [
        _size(result["bytes"]), str(result["repetitions"]),
        *(_cell(times[name]) for name in VARIANTS),
        f"{median(times['meshax']) / base:.2f}", f"{median(times['meshax(out)']) / base:.2f}",
        f"{bandwidth:.2f}", "yes" if correct else f"NO: {', '.join(wrong)}",
    ]


def report(record: dict[str, Any]) -> str:
    """The Markdown report: machine line, table, notes."""
    headers = ["size (float32)", "reps", "meshax `allreduce(x)`", "meshax `allreduce(x, out=buf)`",
               "mpi4py `Allreduce(x, buf)`", "ratio meshax / mpi4py", "ratio meshax(out) / mpi4py",
               "mpi4py GB/s (size / time)", "results exact"]
    rows = [table_row(result) for result in record["results"]]
    return "\n".join([
        f"## Allreduce (sum, float32) over {record['processes']} processes: meshax vs mpi4py",
        "",
        machine_info(),
        "",
        markdown_table(headers, rows),
        "",
        "Time per call: median over repetitions (interquartile range in parentheses); each repetition's "
        "time is the max over processes; each call follows a barrier; variants interleaved in rotating "
        "order on the same communicator. All processes share this machine's cores (oversubscribed if "
        "processes > cores).",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--budget", type=float, default=200.0, help="seconds the whole job may take")
    parser.add_argument("--quick", action="store_true", help="few repetitions (smoke test)")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    plan = QUICK_PLAN if args.quick else PLAN
    job = run_job(worker_commands(args.processes, plan, args.budget - 5), timeout=args.budget)
    if not job.ok or not job.records:
        print(f"allreduce job failed: {job.failure()}", file=sys.stderr)
        return 1
    text = report(job.records[0])
    print(text)
    print(f"\nwritten to {write_results('allreduce', text)}", file=sys.stderr)
    exact = all(all(r["correct"].values()) for r in job.records[0]["results"])
    return 0 if exact else 2


if __name__ == "__main__":
    sys.exit(main())
