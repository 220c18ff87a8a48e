"""Transformations: lax.scan of an RNN cell (forward and grad) and vmap of per-example gradients, meshax vs JAX (CPU).

    python benchmarks/bench_transforms.py [--cases scan_fwd,scan_grad,vmap_grad] [--only meshax|jax]
                                          [--rounds 2] [--warmup 2] [--calls 10] [--budget 900] [--quick]
                                          [--profile] [--output transforms]

Cases (workers/transforms_worker.py), all under jit, on ordinary unsharded arrays in one process
that has 8 CPU devices (MESHAX_NUM_CPU_DEVICES=8 / JAX_NUM_CPU_DEVICES=8):

- `scan_fwd`: lax.scan of 1000 steps of h = tanh(h @ Wh + x @ Wx + b), hidden 64, input 32, xs (1000, 32);
- `scan_grad`: grad of mean(hs ** 2) + sum(h_final) of that scan, with respect to (Wh, Wx, b);
- `vmap_grad`: jit(vmap(grad(loss), in_axes=(None, 0, 0))) for an MLP 784-256-10 (tanh, softmax
  cross-entropy), batch 256: per-example gradients.

Each job is one process of one library running every case: --warmup calls (the first traces/compiles),
then --calls timed calls, each timed until its results are ready. Each library runs in its own child
process (their thread pools never compete), with as many compute threads as the machine has cores:
OPENBLAS/OMP/MKL_NUM_THREADS, and for JAX also XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=T (as bench_train.py); OPENBLAS_THREAD_TIMEOUT=4 for both (what `import
meshax` sets when it is imported before NumPy; the worker imports NumPy first). --rounds jobs per library, the order alternating;
a cell reports the median and the interquartile range of the pooled timed calls, and the ratio
meshax / JAX next to its goal (vmap <= 1.0x, scan <= 2.0x). The first round's outputs are compared
between the libraries (rtol 1e-4). --profile adds one meshax job under cProfile and reports its top
functions per case.
"""
from __future__ import annotations

import argparse
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import (BENCH_DIR, WORKERS_DIR, ForeignLoad, JobResult, chosen, clean_env, cores,
                     exit_cleanly_on_signals, failures_section, finish, machine_info, markdown_table, median, python,
                     quantile, run_job)

BACKENDS = ("meshax", "jax")
LABELS = {"meshax": "meshax", "jax": "JAX"}
CASES = {"scan_fwd": "lax.scan, 1000 RNN steps, forward",
         "scan_grad": "grad of a loss of the scan",
         "vmap_grad": "vmap(grad(loss)), MLP 784-256-10, batch 256"}
GOALS = {"scan_fwd": 2.0, "scan_grad": 2.0, "vmap_grad": 1.0}  # meshax / JAX at most
DEVICES = 8
JOB_SLACK = 60.0  # Seconds a job may take beyond its calls: start-up, tracing/compilation, shutdown.
CALL_ALLOWANCE = 6.0  # Seconds allowed per call (and case) when sizing a job's timeout.
MIN_JOB_TIME = 20.0
RTOL = 1e-4
ATOL_SCALE = 1e-5  # Absolute tolerance per output: ATOL_SCALE x its largest |value| (for entries near 0).
PROFILE_ROWS = 14
def job_env(backend: str) -> dict[str, str]:
    """Our environment without variables that configure either library, with the thread limits."""
    threads = str(cores())
    env = clean_env(cores())
    # What `import meshax` sets when it comes before NumPy (the worker imports NumPy first): OpenBLAS threads
    # sleep at once after a call instead of spinning for ~0.1 s, stealing a core from the per-step loops.
    env.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    if backend == "meshax":
        env["MESHAX_NUM_CPU_DEVICES"] = str(DEVICES)
    else:
        env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(DEVICES),
                   XLA_FLAGS=f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}")
    return env


class Bench:
    def __init__(self, args: argparse.Namespace, cases: list[str], scratch: Path) -> None:
        self.args = args
        self.cases = cases
        self.scratch = scratch
        self.deadline = time.monotonic() + args.budget
        self.cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.saved: dict[str, Path] = {}
        self.failures: list[str] = []
        self.profile_dir: Path | None = None

    def job(self, backend: str, label: str, warmup: int, calls: int, save: bool = False,
            profile: bool = False) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining < MIN_JOB_TIME:
            print(f"[{label}] skipped: time budget used up", file=sys.stderr, flush=True)
            return
        timeout = min(remaining, JOB_SLACK + CALL_ALLOWANCE * (warmup + calls) * len(self.cases))
        worker = [python(), str(WORKERS_DIR / "transforms_worker.py"), "--backend", backend,
                  "--cases", ",".join(self.cases), "--warmup", str(warmup), "--calls", str(calls),
                  "--budget", f"{timeout - 3:.0f}"]
        if save:
            out_dir = self.scratch / f"out_{backend}"
            out_dir.mkdir(exist_ok=True)
            worker += ["--save", str(out_dir)]
        if backend == "meshax" and not profile:
            worker += ["--floor"]
        if profile:
            self.profile_dir = self.scratch / "profile"
            self.profile_dir.mkdir(exist_ok=True)
            worker += ["--profile", str(self.profile_dir)]
        result = run_job([worker], timeout=timeout, env=job_env(backend))
        record = result.records[0] if result.records else None
        if not profile and record is not None:  # complete cases are kept even if a later one failed
            for case, entry in record["cases"].items():
                if entry["times"]:
                    self.cells.setdefault((case, backend), []).append(entry)
        if not result.ok or record is None or not record.get("complete"):
            self.fail(label, result)
            return
        if save:
            self.saved[backend] = self.scratch / f"out_{backend}"
        summary = ", ".join(f"{case} {fmt(median(e['times']))}" for case, e in record["cases"].items())
        print(f"[{label}] done in {result.exit_time - result.spawn_time:.1f} s: {summary}", file=sys.stderr,
              flush=True)

    def fail(self, label: str, result: JobResult) -> None:
        what = "timed out" if result.timed_out else f"exit codes {result.returncodes}"
        streams = [s for s in result.errors + result.outputs if s.strip()]
        detail = "\n".join(s.rstrip()[-3000:] for s in streams[:1]) or "(no output)"
        self.failures.append(f"[{label}] failed: {what}\n{detail}")
        tail = " / ".join(s.strip().splitlines()[-1] for s in result.errors if s.strip())[:400]
        print(f"[{label}] FAILED ({what}){': ' + tail if tail else ''}", file=sys.stderr, flush=True)

    def run(self, backends: list[str]) -> None:
        a = self.args
        for round_ in range(a.rounds):
            for backend in (backends if round_ % 2 == 0 else backends[::-1]):
                self.job(backend, f"{LABELS[backend]} round {round_ + 1}/{a.rounds}", a.warmup, a.calls,
                         save=round_ == 0)
        if a.profile and "meshax" in backends:
            self.job("meshax", "meshax under cProfile", 1, a.profile_calls, profile=True)

    def pooled(self, case: str, backend: str) -> dict[str, Any] | None:
        jobs = self.cells.get((case, backend))
        if not jobs:
            return None
        floors = {name: [t for j in jobs for t in j.get(f"floor_{name}_times", [])] for name in ("loop", "hoisted")}
        return {"times": [t for j in jobs for t in j["times"]], "floors": floors,
                "firsts": [j["warmup_times"][0] for j in jobs if j["warmup_times"]],
                "complete": all(j["complete"] for j in jobs), "jobs": len(jobs)}


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def fmt(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    ms = seconds * 1e3
    return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def cell_text(cell: dict[str, Any] | None, ran: bool) -> str:
    if cell is None:
        return "failed" if ran else "not run"
    times = cell["times"]
    mark = "" if cell["complete"] else " † (partial)"
    return (f"**{fmt(median(times))}** ({fmt(quantile(times, 0.25))}–{fmt(quantile(times, 0.75))}, "
            f"n={len(times)}){mark}")


def floor_text(m: dict[str, Any] | None, j: dict[str, Any] | None) -> str:
    if m is None or not m["floors"]["loop"]:
        return "—"
    parts = []
    for name in ("loop", "hoisted"):
        t = median(m["floors"][name])
        parts.append(fmt(t) + (f" ({t / median(j['times']):.1f}x)" if j else ""))
    return " / ".join(parts)


def agreement(bench: Bench, case: str) -> str:
    """Whether the first round's outputs of the two libraries agree: |m - j| <= RTOL |j| + atol per entry."""
    if len(bench.saved) < 2:
        return "n/a"
    paths = [bench.saved[b] / f"{b}_{case}.npz" for b in BACKENDS]
    if not all(p.exists() for p in paths):
        return "n/a"
    with np.load(paths[0]) as m, np.load(paths[1]) as j:
        if sorted(m.files) != sorted(j.files):
            return f"**NO** (outputs differ: {len(m.files)} vs {len(j.files)} arrays)"
        worst_ratio, worst_rel = 0.0, 0.0
        for name in j.files:
            a, b = m[name].astype(np.float64), j[name].astype(np.float64)
            if a.shape != b.shape:
                return f"**NO** (shapes {a.shape} vs {b.shape})"
            scale = float(np.max(np.abs(b))) if b.size else 0.0
            diff = np.abs(a - b)
            worst_ratio = max(worst_ratio, float(np.max(diff / (RTOL * np.abs(b) + ATOL_SCALE * scale + 1e-30))))
            worst_rel = max(worst_rel, float(np.max(diff)) / max(scale, 1e-30))
    ok = worst_ratio <= 1.0
    return f"{'yes' if ok else '**NO**'} (max diff / tolerance {worst_ratio:.2f}; max diff / max value {worst_rel:.1e})"


def profile_section(bench: Bench) -> list[str]:
    if bench.profile_dir is None:
        return []
    src = str(BENCH_DIR.parent / "src") + os.sep
    parts = ["", f"### meshax profile (cProfile, {bench.args.profile_calls} timed calls per case after one warm-up; "
             f"top {PROFILE_ROWS} functions by own time; times are totals over the calls, inflated by cProfile)", ""]
    for case in bench.cases:
        path = bench.profile_dir / f"meshax_{case}.prof"
        if not path.exists():
            parts += [f"`{case}`: no profile", ""]
            continue
        stats = pstats.Stats(str(path))
        total = stats.total_tt
        rows = []
        entries = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:PROFILE_ROWS]
        for (filename, line, func), (_cc, ncalls, tottime, cumtime, _callers) in entries:
            where = filename.replace(src, "") if filename.startswith(src) else (
                filename if filename.startswith("~") else Path(filename).name)
            rows.append([f"`{func}`", f"{where}:{line}", str(ncalls), f"{tottime:.3f}", f"{cumtime:.3f}"])
        inside = sorted(((k, v) for k, v in stats.stats.items() if k[0].startswith(src)),
                        key=lambda kv: kv[1][3], reverse=True)[:PROFILE_ROWS]
        cumulative = [f"`{func}` {filename.replace(src, '')}:{line} {v[3]:.2f} s"
                      for (filename, line, func), v in inside]
        parts += [f"`{case}` (profiled total {total:.2f} s):", "",
                  markdown_table(["function", "where", "calls", "own s", "cumulative s"], rows), "",
                  f"Top meshax functions by cumulative time: {'; '.join(cumulative)}.", ""]
    return parts


def report(bench: Bench, backends: list[str], elapsed: float, foreign: str) -> str:
    a = bench.args
    rows = []
    for case in bench.cases:
        m, j = (bench.pooled(case, b) for b in BACKENDS)
        ratio = median(m["times"]) / median(j["times"]) if m and j else None
        goal = GOALS[case]
        verdict = "n/a" if ratio is None else ("met" if ratio <= goal else "**missed**")
        first = " / ".join(fmt(median(c["firsts"])) if c and c["firsts"] else "n/a" for c in (m, j))
        rows.append([f"`{case}`", CASES[case], cell_text(m, "meshax" in backends), cell_text(j, "jax" in backends),
                     f"{ratio:.2f}" if ratio is not None else "n/a", f"≤ {goal:.1f}: {verdict}", first,
                     agreement(bench, case), floor_text(m, j)])
    headers = ["case", "program", "meshax", "JAX", "meshax / JAX", "goal", "first call meshax / JAX",
               "results agree", "NumPy floor: loop / hoisted (÷ JAX)"]
    parts = [
        "## Transformations: lax.scan and vmap of per-example gradients, meshax vs JAX (CPU), same run",
        "",
        machine_info() + f"; whole run {elapsed:.0f} s{foreign}",
        "",
        f"One process per library and job, {DEVICES} CPU devices, ordinary unsharded float32 arrays, everything "
        "under `jit`. `scan_*`: `lax.scan` of 1000 steps of `h = tanh(h @ Wh + x @ Wx + b)`, hidden 64, input 32, "
        "xs (1000, 32); `scan_grad` is `grad` of `mean(hs**2) + sum(h_final)` with respect to (Wh, Wx, b). "
        "`vmap_grad`: `vmap(grad(loss), in_axes=(None, 0, 0))`, loss the softmax cross-entropy of one example "
        "through an MLP 784-256-10 (tanh), batch 256 (per-example gradients, 256 x 784 x 256 floats for the "
        f"first weight). Cells: **median** time per call (interquartile range, n = timed calls pooled over "
        f"{a.rounds} job(s) per library, the order alternating); per job and case {a.warmup} warm-up calls, then "
        f"{a.calls} timed calls, each timed until its results are ready. First call = the first warm-up call "
        f"(tracing and compilation included), median over jobs. Compute threads: {cores()} (OPENBLAS/OMP/"
        "MKL_NUM_THREADS, and for JAX XLA_FLAGS=--xla_cpu_multi_thread_eigen=false "
        "intra_op_parallelism_threads=T; OPENBLAS_THREAD_TIMEOUT=4 as `import meshax` sets it). Results agree: "
        f"the first jobs' outputs, every entry within rtol {RTOL} (plus an absolute tolerance of {ATOL_SCALE:g} x "
        "the output's largest value, for entries near zero). NumPy floor (scan cases, timed in the meshax jobs): "
        "hand-written NumPy loops computing the same results with one NumPy call per operation and step "
        "(workers/transforms_worker.py `numpy_floors`), the least any implementation dispatching NumPy per scan "
        "step can spend; `loop` keeps the per-step `x @ Wx`, `hoisted` computes `xs @ Wx` for all steps before "
        "the loop (and the weight "
        "gradients as two matmuls after it).",
        "",
        markdown_table(headers, rows),
    ]
    parts += profile_section(bench)
    parts += failures_section(bench.failures)
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--only", choices=BACKENDS, default=None, help="run one library only")
    parser.add_argument("--rounds", type=int, default=2, help="jobs per library (order alternating)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="1 round, 1 warm-up and 3 timed calls")
    parser.add_argument("--profile", action="store_true", help="also profile meshax (cProfile) and report it")
    parser.add_argument("--profile-calls", type=int, default=3)
    parser.add_argument("--output", default="transforms", help="results/<output>.md")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.warmup, args.calls = 1, 1, 3
    cases = chosen(parser, args.cases, CASES, "case")
    exit_cleanly_on_signals()
    machine_info()  # taken now, so that its load average is from before the benchmark
    backends = [args.only] if args.only else list(BACKENDS)
    started = time.monotonic()
    foreign_load = ForeignLoad()
    with tempfile.TemporaryDirectory(prefix="meshax-bench-transforms-") as scratch:
        bench = Bench(args, cases, Path(scratch))
        bench.run(backends)
        text = report(bench, backends, time.monotonic() - started, f"; {foreign_load.describe()}")
    return finish(args.output, text, bench.failures)


if __name__ == "__main__":
    sys.exit(main())
