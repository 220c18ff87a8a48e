"""Startup time of a 4-process job: meshax vs plain mpiexec + mpi4py vs JAX.

    python benchmarks/bench_startup.py [--repeats 5] [--processes 4] [--budget 180]

For each variant and repetition one job is started and timed:

* meshax: N independent `python workers/startup_meshax.py localhost:PORT i N`
  processes, each calling meshax.distributed.initialize(address, N, i).
* mpiexec + mpi4py: `mpiexec -n N python workers/startup_mpi4py.py`
  (MPI_Init_thread through Hydra's PMI), the floor for "an MPI world exists".
* JAX (if importable): N independent processes calling
  jax.distributed.initialize('localhost:PORT', N, i) with JAX_PLATFORMS=cpu.

Each child records time.time() as its first statement, after its imports, and
after initialisation returns. Reported per job, then as medians over the
repetitions (variants are interleaved within each repetition):

* import: max over processes of (imports done - first statement);
* init call: max over processes of (initialisation returned - imports done);
* first stmt -> init: max over processes of (initialisation returned - first statement);
* spawn -> all init: last initialisation returned - parent's time just before spawning;
* job wall: parent's spawn -> every process has exited (includes shutdown).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

from _common import (WORKERS_DIR, ForeignLoad, JobResult, exit_cleanly_on_signals, free_port, machine_info,
                     markdown_table, median, python, run_job, venv_tool, write_results)

JOB_TIMEOUT = 60.0  # Seconds one job may take before it is killed.


@dataclass
class Variant:
    """A way to start an N-process job: its name, commands and environment."""

    name: str
    commands: Callable[[int], list[list[str]]]
    env: dict[str, str]


@dataclass
class Sample:
    """The timings (seconds) of one job."""

    import_s: float
    init_call_s: float
    first_to_init_s: float
    spawn_to_init_s: float
    wall_s: float


def _independent(worker: str) -> Callable[[int], list[list[str]]]:
    """N separately started processes that meet at an explicit coordinator address."""

    def commands(n: int) -> list[list[str]]:
        address = f"localhost:{free_port()}"
        return [[python(), str(WORKERS_DIR / worker), address, str(i), str(n)] for i in range(n)]

    return commands


def _mpiexec(n: int) -> list[list[str]]:
    return [[venv_tool("mpiexec"), "-n", str(n), python(), str(WORKERS_DIR / "startup_mpi4py.py")]]


def variants() -> list[Variant]:
    """The variants to compare; JAX only when it is importable."""
    base = dict(os.environ)
    found = [
        Variant("meshax (independent processes, explicit coordinator)", _independent("startup_meshax.py"), base),
        Variant("mpiexec + mpi4py (MPI_Init_thread)", _mpiexec, base),
    ]
    if importlib.util.find_spec("jax") is not None:
        jax_env = dict(base, JAX_PLATFORMS="cpu")
        found.append(Variant("JAX jax.distributed.initialize (cpu)", _independent("startup_jax.py"), jax_env))
    return found


def sample_from(result: JobResult, n: int) -> Sample:
    """Reduce one job's per-process records to a Sample (raises if the job failed)."""
    if not result.ok or len(result.records) != n:
        raise RuntimeError(f"job failed ({len(result.records)}/{n} records): {result.failure()}")
    records = result.records
    return Sample(
        import_s=max(r["imported"] - r["start"] for r in records),
        init_call_s=max(r["initialized"] - r["imported"] for r in records),
        first_to_init_s=max(r["initialized"] - r["start"] for r in records),
        spawn_to_init_s=max(r["initialized"] for r in records) - result.spawn_time,
        wall_s=result.exit_time - result.spawn_time,
    )


def measure(all_variants: list[Variant], n: int, repeats: int, budget: float) -> dict[str, list[Sample]]:
    """Run every variant `repeats` times, interleaved; stop early when `budget` s are used up."""
    samples: dict[str, list[Sample]] = {v.name: [] for v in all_variants}
    deadline = time.monotonic() + budget
    for repeat in range(repeats):
        for variant in all_variants:
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                print(f"time budget of {budget:g} s used up; stopping after {repeat} repetitions", file=sys.stderr)
                return samples
            result = run_job(variant.commands(n), timeout=min(JOB_TIMEOUT, remaining), env=variant.env)
            try:
                sample = sample_from(result, n)
            except RuntimeError as error:
                print(f"[{variant.name}] repetition {repeat + 1}: {error}", file=sys.stderr)
                continue
            samples[variant.name].append(sample)
            print(f"[{variant.name}] repetition {repeat + 1}: first stmt -> init {sample.first_to_init_s:.3f} s, "
                  f"wall {sample.wall_s:.3f} s", file=sys.stderr)
    return samples


def _ms(values: list[float]) -> str:
    return f"{median(values) * 1e3:.0f}" if values else "n/a"


def _ms_range(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"**{median(values) * 1e3:.0f}** ({min(values) * 1e3:.0f}–{max(values) * 1e3:.0f})"


def report(samples: dict[str, list[Sample]], n: int, repeats: int, load: str) -> str:
    """The Markdown report: machine line, table of medians, notes; `load` describes competing CPU use."""
    headers = ["variant", "runs ok", "import (ms)", "init call (ms)", "first stmt → init done (ms), median (min–max)",
               "spawn → all init done (ms)", "job wall, spawn → all exited (ms)"]
    rows = []
    for name, runs in samples.items():
        rows.append([
            name, f"{len(runs)}/{repeats}",
            _ms([s.import_s for s in runs]), _ms([s.init_call_s for s in runs]),
            _ms_range([s.first_to_init_s for s in runs]), _ms([s.spawn_to_init_s for s in runs]),
            _ms([s.wall_s for s in runs]),
        ])
    return "\n".join([
        f"## Startup of a {n}-process job (medians of {repeats} runs, variants interleaved)",
        "",
        f"{machine_info()}; {load}",
        "",
        markdown_table(headers, rows),
        "",
        "Per-process columns are the max over the processes of one job; 'first stmt' is the child's first "
        "statement (after interpreter start-up). 'init call' is initialize() for meshax/JAX and MPI_Init_thread "
        "for mpi4py; it includes waiting for the slowest process to arrive (4 processes import concurrently on "
        f"{os.cpu_count()} cores). meshax's initialize includes MPI_Init through its own PMI server; JAX's only "
        "connects to its coordination service (no data plane yet). Job wall includes each library's shutdown.",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--budget", type=float, default=180.0, help="seconds for all jobs together")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    machine_info()  # Taken now, so that its load average is from before the benchmark.
    load = ForeignLoad()
    samples = measure(variants(), args.processes, args.repeats, args.budget)
    text = report(samples, args.processes, args.repeats, load.describe())
    print(text)
    print(f"\nwritten to {write_results('startup', text)}", file=sys.stderr)
    return 0 if all(samples.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
