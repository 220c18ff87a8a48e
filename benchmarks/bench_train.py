"""One MLP training step: meshax vs JAX (CPU), data parallel (jit + shardings) and FSDP (shard_map).

    python benchmarks/bench_train.py [--layouts 2x4,4x2] [--styles dp_jit,fsdp] [--only meshax|jax]
                                     [--rounds 2] [--warmup 3] [--steps 10] [--budget 600] [--quick]
                                     [--output train]

The model is the training examples' MLP (examples/mlp_common.py) at 784-1024-1024-10, a global
batch of 2048, float32, SGD; the styles are the steps of examples/train_dp_jit.py (`dp_jit`: jit with
in/out shardings, batch P('data'), parameters replicated) and examples/train_fsdp.py (`fsdp`:
shard_map, weights sharded P('data') along their first dimension and all-gathered per layer) on
Mesh(devices, ('data',)) over 8 CPU devices, laid out as N processes x K devices (default 2x4 and 4x2).

Each job (workers/train_worker.py) is N independent processes of one library, layout and style:
meshax with MESHAX_COORDINATOR_ADDRESS / MESHAX_NUM_PROCESSES / MESHAX_PROCESS_ID /
MESHAX_NUM_CPU_DEVICES (initialize() without arguments), JAX with jax.distributed.initialize(
'localhost:PORT', N, i), JAX_PLATFORMS=cpu, JAX_NUM_CPU_DEVICES=K. Every process computes with
max(1, cores // N) threads, so that the processes together never ask for more threads than the
machine has cores: OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS for both, and for JAX
also XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=T.

A job runs --warmup steps (the first one compiles/traces), then --steps timed steps; every step
follows a barrier and is timed on every process until the new parameters and the loss are ready;
a step's time is the max over processes. Each (layout, style) cell runs --rounds jobs per library,
the libraries' order alternating, and reports the median of the pooled timed steps and the ratio
meshax / JAX. The losses of the steps are compared between the libraries (same data, same initial
parameters, same number of steps). A job that fails or times out is reported (verbatim output at
the end) and the run goes on; --only runs one library.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from _common import (WORKERS_DIR, ForeignLoad, JobResult, chosen, clean_env, cores, exit_cleanly_on_signals,
                     failures_section, finish, free_port, machine_info, markdown_table, median, parse_layouts, python,
                     quantile, run_job)

BACKENDS = ("meshax", "jax")
LABELS = {"meshax": "meshax", "jax": "JAX"}
STYLES = {"dp_jit": "data parallel: jit, batch P('data'), params P()",
          "fsdp": "FSDP: shard_map, weights P('data') all-gathered per layer"}
MODEL = {"batch": 2048, "features": 784, "width": 1024, "classes": 10}
JOB_SLACK = 60.0  # Seconds a job may take beyond its steps: start-up, compilation/tracing, shutdown.
STEP_ALLOWANCE = 8.0  # Seconds allowed per step when sizing a job's timeout (generous: meshax may be slow).
MIN_JOB_TIME = 20.0
LOSS_RTOL = 1e-3  # float32, different summation orders, a dozen SGD steps.
def threads_per_process(n: int) -> int:
    return max(1, cores() // n)


def base_env(n: int) -> dict[str, str]:
    """Our environment without variables that configure either library, with the thread limits."""
    return clean_env(threads_per_process(n))


def job_commands(backend: str, n: int, k: int, worker_args: list[str]) -> tuple[list[list[str]], dict[str, str]]:
    worker = [python(), str(WORKERS_DIR / "train_worker.py"), "--backend", backend, *worker_args]
    env = base_env(n)
    address = f"localhost:{free_port()}"
    if backend == "meshax":
        env["MESHAX_NUM_CPU_DEVICES"] = str(k)
        if n == 1:
            return [worker], env
        return [["env", f"MESHAX_COORDINATOR_ADDRESS={address}", f"MESHAX_NUM_PROCESSES={n}",
                 f"MESHAX_PROCESS_ID={i}", *worker] for i in range(n)], env
    env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(k),
               XLA_FLAGS=f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads_per_process(n)}")
    if n == 1:
        return [worker], env
    return [[*worker, "--address", address, "--process-id", str(i), "--processes", str(n)] for i in range(n)], env


def combine(records: list[dict[str, Any]], n: int) -> dict[str, Any] | None:
    """One job's steps: per step the max over processes; the losses (process 0's); None unless every
    process left a record."""
    if len(records) != n:
        return None

    def slowest(key: str) -> list[float]:
        return [max(values) for values in zip(*(r[key] for r in records))]

    return {"times": slowest("times"), "warmup_times": slowest("warmup_times"),
            "losses": min(records, key=lambda r: r["rank"])["losses"],
            "setup_s": max(r["setup_s"] for r in records), "complete": all(r.get("complete") for r in records)}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline = time.monotonic() + args.budget
        self.cells: dict[tuple[int, int, str, str], list[dict[str, Any]]] = {}
        self.failures: list[str] = []

    def job(self, backend: str, n: int, k: int, style: str, label: str) -> None:
        a = self.args
        remaining = self.deadline - time.monotonic()
        if remaining < MIN_JOB_TIME:
            print(f"[{label}] skipped: time budget used up", file=sys.stderr, flush=True)
            return
        timeout = min(remaining, JOB_SLACK + STEP_ALLOWANCE * (a.warmup + a.steps))
        worker_args = ["--style", style, "--warmup", str(a.warmup), "--steps", str(a.steps),
                       "--budget", f"{timeout - 3:.0f}", *(f"--{key}={value}" for key, value in MODEL.items())]
        commands, env = job_commands(backend, n, k, worker_args)
        result = run_job(commands, timeout=timeout, env=env)
        found = combine(result.records, n)
        if not result.ok or found is None or not found["complete"]:
            self.fail(label, result)
            if found is not None and found["times"]:  # partial measurements are kept, marked
                self.cells.setdefault((n, k, style, backend), []).append(dict(found, complete=False))
            return
        self.cells.setdefault((n, k, style, backend), []).append(found)
        print(f"[{label}] done in {result.exit_time - result.spawn_time:.1f} s: median step "
              f"{median(found['times']) * 1e3:.1f} ms ({len(found['times'])} steps)", file=sys.stderr, flush=True)

    def fail(self, label: str, result: JobResult) -> None:
        what = "timed out" if result.timed_out else f"exit codes {result.returncodes}"
        streams = [s for s in result.errors + result.outputs if s.strip()]
        # the first process's output in full (its last 3000 characters), the others' last lines
        detail = "\n".join([s.rstrip()[-3000:] for s in streams[:1]] +
                           [f"(another process) {s.strip().splitlines()[-1]}" for s in streams[1:]]) or "(no output)"
        self.failures.append(f"[{label}] failed: {what}\n{detail}")
        tail = " / ".join(s.strip().splitlines()[-1] for s in result.errors if s.strip())[:400]
        print(f"[{label}] FAILED ({what}){': ' + tail if tail else ''}", file=sys.stderr, flush=True)

    def run(self, layouts: list[tuple[int, int]], styles: list[str], backends: list[str]) -> None:
        for n, k in layouts:
            for style in styles:
                for round_ in range(self.args.rounds):
                    for backend in (backends if round_ % 2 == 0 else backends[::-1]):
                        self.job(backend, n, k, style, f"{n}x{k} {style} {LABELS[backend]} "
                                                       f"round {round_ + 1}/{self.args.rounds}")

    # ----------------------------------------------------------------------
    # Report
    # ----------------------------------------------------------------------

    def pooled(self, key: tuple[int, int, str, str]) -> dict[str, Any] | None:
        jobs = self.cells.get(key)
        if not jobs:
            return None
        return {"times": [t for j in jobs for t in j["times"]], "firsts": [j["warmup_times"][0] for j in jobs
                                                                            if j["warmup_times"]],
                "losses": [j["losses"] for j in jobs], "complete": all(j["complete"] for j in jobs),
                "jobs": len(jobs)}


def fmt(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:
        return "n/a"
    ms = seconds * 1e3
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def cell_text(cell: dict[str, Any] | None, ran: bool) -> str:
    if cell is None:
        return "failed" if ran else "not run"
    times = cell["times"]
    mark = "" if cell["complete"] else " † (partial: a job failed)"
    return (f"**{fmt(median(times))}** ({fmt(quantile(times, 0.25))}–{fmt(quantile(times, 0.75))}, "
            f"n={len(times)}){mark}")


def losses_agree(cells: list[dict[str, Any] | None]) -> str:
    curves = [curve for cell in cells if cell for curve in cell["losses"]]
    if len(curves) < 2:
        return "n/a"
    length = min(len(c) for c in curves)
    reference = curves[0][:length]
    worst = max(abs(a - b) / max(abs(b), 1e-30) for c in curves for a, b in zip(c[:length], reference))
    return f"{'yes' if worst <= LOSS_RTOL else '**NO**'} (max rel. diff {worst:.1e})"


def report(bench: Bench, layouts: list[tuple[int, int]], styles: list[str], backends: list[str], elapsed: float,
           foreign: str) -> str:
    a = bench.args
    rows = []
    for n, k in layouts:
        for style in styles:
            m, j = (bench.pooled((n, k, style, b)) for b in BACKENDS)
            ratio = median(m["times"]) / median(j["times"]) if m and j and m["times"] and j["times"] else None
            first = " / ".join(fmt(median(c["firsts"])) if c and c["firsts"] else "n/a" for c in (m, j))
            rows.append([f"{n}x{k}", style, cell_text(m, "meshax" in backends), cell_text(j, "jax" in backends),
                         f"{ratio:.2f}" if ratio is not None else "n/a", first, losses_agree([m, j])])
    headers = ["layout", "style", "meshax step", "JAX step", "meshax / JAX", "first step meshax / JAX",
               "losses agree"]
    threads = ", ".join(f"{n}x{k}: {threads_per_process(n)}" for n, k in layouts)
    parts = [
        "## One MLP training step: meshax vs JAX (CPU), same programs, same run",
        "",
        machine_info() + f"; whole run {elapsed:.0f} s{foreign}",
        "",
        f"Model 784-1024-1024-10 (ReLU, softmax cross-entropy, SGD), global batch {MODEL['batch']}, float32, "
        f"8 CPU devices as processes x devices. Styles: " + "; ".join(f"`{s}`: {STYLES[s]}" for s in styles) + ". "
        f"Cells: **median** step time (interquartile range, n = timed steps pooled over {a.rounds} job(s)); "
        f"per job {a.warmup} warm-up steps, then {a.steps} timed steps, each after a barrier and timed until the "
        f"new parameters and the loss are ready, the max over processes. First step = the first warm-up step "
        f"(compilation / tracing included), median over jobs. Compute threads per process ({threads}): "
        "OPENBLAS/OMP/MKL_NUM_THREADS, and for JAX XLA_FLAGS=--xla_cpu_multi_thread_eigen=false "
        "intra_op_parallelism_threads=T. Losses: every step's loss of every job, compared to the first job's "
        f"(relative tolerance {LOSS_RTOL}).",
        "",
        markdown_table(headers, rows),
    ]
    parts += failures_section(bench.failures)
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default="2x4,4x2")
    parser.add_argument("--styles", default="dp_jit,fsdp")
    parser.add_argument("--only", choices=BACKENDS, default=None, help="run one library only")
    parser.add_argument("--rounds", type=int, default=2, help="jobs per library and cell (order alternating)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="1 round, 1 warm-up and 2 timed steps")
    parser.add_argument("--output", default="train", help="results/<output>.md")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.warmup, args.steps = 1, 1, 2
    styles = chosen(parser, args.styles, STYLES, "style")
    exit_cleanly_on_signals()
    machine_info()  # taken now, so that its load average is from before the benchmark
    layouts = parse_layouts(args.layouts)
    backends = [args.only] if args.only else list(BACKENDS)
    started = time.monotonic()
    foreign_load = ForeignLoad()
    bench = Bench(args)
    bench.run(layouts, styles, backends)
    text = report(bench, layouts, styles, backends, time.monotonic() - started, f"; {foreign_load.describe()}")
    return finish(args.output, text, bench.failures)


if __name__ == "__main__":
    sys.exit(main())
