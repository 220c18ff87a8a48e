"""One MLP training step: meshax vs JAX (CPU) at their defaults, and the NumPy floor of the same step.

    python benchmarks/bench_train.py [--layouts 1x1,2x4] [--styles dp_jit,fsdp] [--modes default,limited]
                                     [--only meshax|jax] [--rounds 2] [--warmup 2] [--steps 5]
                                     [--budget 900] [--quick] [--output train] [--model mlp|tiny]

The model is the training examples' MLP (examples/mlp_common.py) at 784-1024-1024-10, a global
batch of 2048, float32, SGD (with --model tiny, 16-16-16-10 and a batch of 64: a step that is all
dispatch, each library's cost per operation); the styles are the steps of examples/train_dp_jit.py (`dp_jit`: jit with
in/out shardings, batch P('data'), parameters replicated) and examples/train_fsdp.py (`fsdp`:
shard_map, weights sharded P('data') along their first dimension and all-gathered per layer) on
Mesh(devices, ('data',)), laid out as N processes x K devices. By default every layout that fits the
host runs: 1x1, 1xC, Cx1, 2x(C/2), 2x4 and 4x2, C being the host's usable cores (affinity, capped by
a cgroup CPU quota), each once, where the devices divide the batch (and, for FSDP, the weights' rows).

Each job (workers/train_worker.py) is N independent processes of one library, layout and style:
meshax with MESHAX_COORDINATOR_ADDRESS / MESHAX_NUM_PROCESSES / MESHAX_PROCESS_ID /
MESHAX_NUM_CPU_DEVICES (initialize() without arguments), JAX with jax.distributed.initialize(
'localhost:PORT', N, i), JAX_PLATFORMS=cpu, JAX_NUM_CPU_DEVICES=K. Mode `default` (always run) sets no
thread variable: both libraries choose their threads as a user's program gets them. Mode `limited`
(--modes default,limited) adds the old thread-limited runs: T = max(1, C // N) threads per process,
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS = T for both, and for JAX also
XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=T. The machine's
OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are unset for every job.

A job runs --warmup steps (the first one compiles/traces), then --steps timed steps; every step
follows a barrier and is timed on every process until the new parameters and the loss are ready;
a step's time is the max over processes. The NumPy floor (workers/train_floor.py) is timed in the
default-mode meshax jobs, in the same processes, at meshax's CPU budget, a floor step after each of
meshax's timed steps (so that both see the same state of a noisy host): each process computes its
rows of the batch by hand with NumPy (one warm-up step, then --steps timed steps), MPI Allreduce
sums the gradients. Each (layout, style) cell runs --rounds jobs per library,
the libraries' order alternating, and reports the medians of the pooled timed steps and the ratios
meshax / JAX and meshax / floor. The losses of every step are compared between meshax, JAX and the
floor. A job that fails or times out is reported (verbatim output at the end) and the run goes on;
--only runs one library.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from typing import Any

from _common import (BENCH_DIR, STRIPPED_ENV_PREFIXES, WORKERS_DIR, ForeignLoad, JobResult, chosen, clean_env, cores,
                     exit_cleanly_on_signals, failures_section, finish, free_port, machine_info, markdown_table, median,
                     parse_layouts, python, quantile, run_job)

BACKENDS = ("meshax", "jax")
LABELS = {"meshax": "meshax", "jax": "JAX"}
STYLES = {"dp_jit": "data parallel: jit, batch P('data'), params P()",
          "fsdp": "FSDP: shard_map, weights P('data') all-gathered per layer"}
MODES = {"default": "both libraries at their defaults (no thread variable set)",
         "limited": "T = cores // processes threads per process (BLAS/OpenMP variables; JAX: Eigen threading off)"}
MODELS = {  # "tiny": a step whose work is all dispatch (each library's cost per operation)
    "mlp": {"batch": 2048, "features": 784, "width": 1024, "classes": 10},
    "tiny": {"batch": 64, "features": 16, "width": 16, "classes": 10},
}
MODEL = dict(MODELS["mlp"])  # the model being run (--model)
JOB_SLACK = 60.0  # Seconds a job may take beyond its steps: start-up, compilation/tracing, shutdown.
STEP_ALLOWANCE = 8.0  # Seconds allowed per step when sizing a job's timeout (generous: meshax may be slow).
MIN_JOB_TIME = 20.0
LOSS_RTOL = 1e-3  # float32, different summation orders, a dozen SGD steps.
TARGET_VS_JAX, TARGET_VS_FLOOR = 1.2, 1.15  # issue 23's "done when" ...
SLOW_FLOOR, TARGET_VS_SLOW_FLOOR = 1.1, 1.1  # ... and where the floor is > 1.1x JAX: <= 1.1x the floor


def _cpu_budget() -> Any:
    """meshax's CPU budget module, loaded from its file (importing meshax here would change the children's
    environment)."""
    path = BENCH_DIR.parent / "src" / "meshax" / "_src" / "runtime" / "cpu_budget.py"
    spec = importlib.util.spec_from_file_location("meshax_cpu_budget", path)
    if spec is None or spec.loader is None or not path.exists():
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def usable_cores() -> int:
    budget = _cpu_budget()
    return budget.host_cores() if budget is not None else cores()


def host_line() -> str:
    budget = _cpu_budget()
    if budget is None:
        return f"Host: {cores()} usable cores (affinity)"
    quota = budget.cgroup_quota()
    return (f"Host: {budget.host_cores()} usable cores (affinity {budget.affinity_cores()}, "
            f"cgroup CPU quota {'none' if quota is None else f'{quota:g}'})")


def default_layouts(c: int) -> list[tuple[int, int]]:
    """1x1, 1xC, Cx1, 2x(C/2), 2x4, 4x2 (processes x devices), each once."""
    candidates = [(1, 1), (1, c), (c, 1)] + ([(2, c // 2)] if c >= 4 and c % 2 == 0 else []) + [(2, 4), (4, 2)]
    return list(dict.fromkeys(candidates))


def fits(n: int, k: int, style: str) -> bool:
    """Whether N x K devices divide the batch (and, for FSDP, the rows of every weight)."""
    devices = n * k
    rows = [MODEL["batch"]] + ([MODEL["features"], MODEL["width"], MODEL["width"]] if style == "fsdp" else [])
    return all(r % devices == 0 for r in rows)


def limited_threads(n: int) -> int:
    return max(1, usable_cores() // n)


def job_env(mode: str, n: int) -> dict[str, str]:
    """Our environment without variables that configure either library; in mode `limited` with thread limits."""
    if mode == "limited":
        return clean_env(limited_threads(n))
    return {k: v for k, v in os.environ.items() if not k.startswith(STRIPPED_ENV_PREFIXES)}


def job_commands(backend: str, mode: str, n: int, k: int,
                 worker_args: list[str]) -> tuple[list[list[str]], dict[str, str]]:
    worker = [python(), str(WORKERS_DIR / "train_worker.py"), "--backend", backend, *worker_args]
    env = job_env(mode, n)
    address = f"localhost:{free_port()}"
    if backend == "meshax":
        env["MESHAX_NUM_CPU_DEVICES"] = str(k)
        if n == 1:
            return [worker], env
        return [["env", f"MESHAX_COORDINATOR_ADDRESS={address}", f"MESHAX_NUM_PROCESSES={n}",
                 f"MESHAX_PROCESS_ID={i}", *worker] for i in range(n)], env
    env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(k))
    if mode == "limited":
        env["XLA_FLAGS"] = (f"--xla_cpu_multi_thread_eigen=false "
                            f"intra_op_parallelism_threads={limited_threads(n)}")
    if n == 1:
        return [worker], env
    return [[*worker, "--address", address, "--process-id", str(i), "--processes", str(n)] for i in range(n)], env


def combine(records: list[dict[str, Any]], n: int) -> dict[str, Any] | None:
    """One job's steps: per step the max over processes; the losses (process 0's); None unless every
    process left a record."""
    if len(records) != n:
        return None

    def slowest(key: str) -> list[float]:
        return [max(values) for values in zip(*(r.get(key, []) for r in records))]

    first = min(records, key=lambda r: r["rank"])
    return {"times": slowest("times"), "warmup_times": slowest("warmup_times"), "losses": first["losses"],
            "floor_times": slowest("floor_times"), "floor_losses": first.get("floor_losses", []),
            "floor_threads": first.get("floor_threads"),
            "setup_s": max(r["setup_s"] for r in records), "complete": all(r.get("complete") for r in records)}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline = time.monotonic() + args.budget
        self.cells: dict[tuple[int, int, str, str, str], list[dict[str, Any]]] = {}
        self.failures: list[str] = []

    def job(self, backend: str, mode: str, n: int, k: int, style: str, label: str) -> None:
        a = self.args
        remaining = self.deadline - time.monotonic()
        if remaining < MIN_JOB_TIME:
            print(f"[{label}] skipped: time budget used up", file=sys.stderr, flush=True)
            return
        floor_steps = a.steps if backend == "meshax" and mode == "default" else 0
        timeout = min(remaining, JOB_SLACK + STEP_ALLOWANCE * (a.warmup + a.steps + floor_steps))
        worker_args = ["--style", style, "--warmup", str(a.warmup), "--steps", str(a.steps),
                       "--floor-steps", str(floor_steps), "--budget", f"{timeout - 3:.0f}",
                       *(f"--{key}={value}" for key, value in MODEL.items())]
        commands, env = job_commands(backend, mode, n, k, worker_args)
        result = run_job(commands, timeout=timeout, env=env)
        found = combine(result.records, n)
        key = (n, k, style, mode, backend)
        if not result.ok or found is None or not found["complete"]:
            self.fail(label, result)
            if found is not None and found["times"]:  # partial measurements are kept, marked
                self.cells.setdefault(key, []).append(dict(found, complete=False))
            return
        self.cells.setdefault(key, []).append(found)
        floor = f", floor {median(found['floor_times']) * 1e3:.1f} ms" if found["floor_times"] else ""
        print(f"[{label}] done in {result.exit_time - result.spawn_time:.1f} s: median step "
              f"{median(found['times']) * 1e3:.1f} ms ({len(found['times'])} steps){floor}", file=sys.stderr,
              flush=True)

    def fail(self, label: str, result: JobResult) -> None:
        what = "timed out" if result.timed_out else f"exit codes {result.returncodes}"
        streams = [s for s in result.errors + result.outputs if s.strip()]
        # the first process's output in full (its last 3000 characters), the others' last lines
        detail = "\n".join([s.rstrip()[-3000:] for s in streams[:1]] +
                           [f"(another process) {s.strip().splitlines()[-1]}" for s in streams[1:]]) or "(no output)"
        self.failures.append(f"[{label}] failed: {what}\n{detail}")
        tail = " / ".join(s.strip().splitlines()[-1] for s in result.errors if s.strip())[:400]
        print(f"[{label}] FAILED ({what}){': ' + tail if tail else ''}", file=sys.stderr, flush=True)

    def run(self, cells: list[tuple[int, int, str]], modes: list[str], backends: list[str]) -> None:
        for n, k, style in cells:
            for mode in modes:
                for round_ in range(self.args.rounds):
                    for backend in (backends if round_ % 2 == 0 else backends[::-1]):
                        self.job(backend, mode, n, k, style, f"{n}x{k} {style} {mode} {LABELS[backend]} "
                                                             f"round {round_ + 1}/{self.args.rounds}")

    # ----------------------------------------------------------------------
    # Report
    # ----------------------------------------------------------------------

    def pooled(self, key: tuple[int, int, str, str, str], prefix: str = "") -> dict[str, Any] | None:
        """The jobs of `key` pooled: their timed steps (`prefix` "floor_": the floor's), first steps, losses."""
        jobs = [j for j in self.cells.get(key, []) if j[prefix + "times"]]
        if not jobs:
            return None
        return {"times": [t for j in jobs for t in j[prefix + "times"]],
                "firsts": [j["warmup_times"][0] for j in jobs if j["warmup_times"]] if not prefix else [],
                "losses": [j[prefix + "losses"] for j in jobs], "complete": all(j["complete"] for j in jobs),
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


def ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    return median(a["times"]) / median(b["times"]) if a and b else None


def fmt_ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def losses_agree(cells: list[dict[str, Any] | None]) -> str:
    curves = [curve for cell in cells if cell for curve in cell["losses"]]
    if len(curves) < 2:
        return "n/a"
    length = min(len(c) for c in curves)
    reference = curves[0][:length]
    worst = max(abs(a - b) / max(abs(b), 1e-30) for c in curves for a, b in zip(c[:length], reference))
    return f"{'yes' if worst <= LOSS_RTOL else '**NO**'} (max rel. diff {worst:.1e})"


def target_met(vs_jax: float | None, vs_floor: float | None, floor_vs_jax: float | None) -> str:
    """Issue 23's target: <= 1.2x JAX and <= 1.15x the floor; where the floor itself is > 1.1x JAX (JAX's
    speed is out of reach of NumPy), <= 1.1x the floor counts."""
    if vs_jax is None or vs_floor is None or floor_vs_jax is None:
        return "n/a"
    if floor_vs_jax > SLOW_FLOOR:
        return "yes" if vs_floor <= TARGET_VS_SLOW_FLOOR else "no"
    return "yes" if vs_jax <= TARGET_VS_JAX and vs_floor <= TARGET_VS_FLOOR else "no"


def default_rows(bench: Bench, cells: list[tuple[int, int, str]], backends: list[str]) -> list[list[str]]:
    rows = []
    for n, k, style in cells:
        m, j = (bench.pooled((n, k, style, "default", b)) for b in BACKENDS)
        floor = bench.pooled((n, k, style, "default", "meshax"), prefix="floor_")
        first = " / ".join(fmt(median(c["firsts"])) if c and c["firsts"] else "n/a" for c in (m, j))
        vs_jax, vs_floor, floor_vs_jax = ratio(m, j), ratio(m, floor), ratio(floor, j)
        rows.append([f"{n}x{k}", style, cell_text(m, "meshax" in backends), cell_text(j, "jax" in backends),
                     cell_text(floor, "meshax" in backends), fmt_ratio(vs_jax), fmt_ratio(vs_floor),
                     fmt_ratio(floor_vs_jax),
                     target_met(vs_jax, vs_floor, floor_vs_jax) if MODEL == MODELS["mlp"] else "n/a", first,
                     losses_agree([m, j, floor])])
    return rows


def limited_rows(bench: Bench, cells: list[tuple[int, int, str]], backends: list[str]) -> list[list[str]]:
    rows = []
    for n, k, style in cells:
        m, j = (bench.pooled((n, k, style, "limited", b)) for b in BACKENDS)
        rows.append([f"{n}x{k}", style, str(limited_threads(n)), cell_text(m, "meshax" in backends),
                     cell_text(j, "jax" in backends), fmt_ratio(ratio(m, j)), losses_agree([m, j])])
    return rows


def report(bench: Bench, cells: list[tuple[int, int, str]], skipped: list[str], modes: list[str],
           backends: list[str], elapsed: float, foreign: str) -> str:
    a = bench.args
    threads = sorted({j["floor_threads"] for key, jobs in bench.cells.items() for j in jobs
                      if key[3] == "default" and j.get("floor_threads")})
    headers = ["layout", "style", "meshax step", "JAX step", "NumPy floor", "meshax / JAX", "meshax / floor",
               "floor / JAX", "target met", "first step meshax / JAX", "losses agree (meshax, JAX, floor)"]
    parts = [
        "## One MLP training step: meshax vs JAX (CPU) at their defaults, and the NumPy floor",
        "",
        machine_info() + f"; whole run {elapsed:.0f} s{foreign}",
        "",
        host_line() + ".",
        "",
        f"Model {MODEL['features']}-{MODEL['width']}-{MODEL['width']}-{MODEL['classes']} (ReLU, softmax "
        f"cross-entropy, SGD), global batch {MODEL['batch']}, float32, "
        f"processes x devices per process. Styles: " + "; ".join(f"`{s}`: {STYLES[s]}" for s in STYLES) + ". "
        f"Cells: **median** step time (interquartile range, n = timed steps pooled over {a.rounds} job(s)); "
        f"per job {a.warmup} warm-up steps, then {a.steps} timed steps, each after a barrier and timed until the "
        f"new parameters and the loss are ready, the max over processes. First step = the first warm-up step "
        f"(compilation / tracing included), median over jobs. Both libraries at their defaults: no thread "
        f"variable set (meshax's CPU budget gave each process {', '.join(map(str, threads)) or 'n/a'} thread(s) "
        "in these layouts). NumPy floor: the same step written by hand with NumPy in the meshax jobs' "
        "processes, each its rows of the batch at meshax's CPU budget, gradients summed with MPI Allreduce "
        "(workers/train_floor.py), a floor step after each of meshax's timed steps. Target (issue 23): meshax <= 1.2x JAX and <= 1.15x the floor; where the "
        "floor itself is > 1.1x JAX, <= 1.1x the floor counts (set for the 784-1024-1024-10 model only). "
        "Losses: every step's loss of every job, compared "
        f"to the first job's (relative tolerance {LOSS_RTOL}).",
        "",
        markdown_table(headers, default_rows(bench, cells, backends)),
    ]
    if skipped:
        parts += ["", "Not run (the devices do not divide the batch or, for FSDP, the weights' rows): "
                  + ", ".join(skipped) + "."]
    if "limited" in modes:
        parts += ["", f"Thread-limited mode: {MODES['limited']}.", "",
                  markdown_table(["layout", "style", "threads per process", "meshax step", "JAX step",
                                  "meshax / JAX", "losses agree"], limited_rows(bench, cells, backends))]
    parts += failures_section(bench.failures)
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", default=None, help="processes x devices, e.g. 1x1,2x4 (default: every "
                                                        "layout of 1x1, 1xC, Cx1, 2x(C/2), 2x4, 4x2 that fits)")
    parser.add_argument("--styles", default="dp_jit,fsdp")
    parser.add_argument("--modes", default="default", help="default, or default,limited for thread-limited jobs too")
    parser.add_argument("--only", choices=BACKENDS, default=None, help="run one library only")
    parser.add_argument("--rounds", type=int, default=2, help="jobs per library and cell (order alternating)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="1 round, 1 warm-up and 2 timed steps")
    parser.add_argument("--output", default=None, help="results/<output>.md (default: train, train_tiny)")
    parser.add_argument("--model", choices=MODELS, default="mlp",
                        help="mlp: 784-1024-1024-10, batch 2048; tiny: 16-16-16-10, batch 64 (all dispatch)")
    args = parser.parse_args()
    MODEL.update(MODELS[args.model])
    if args.output is None:
        args.output = "train" if args.model == "mlp" else f"train_{args.model}"
    if args.quick:
        args.rounds, args.warmup, args.steps = 1, 1, 2
    styles = chosen(parser, args.styles, STYLES, "style")
    modes = chosen(parser, args.modes, MODES, "mode")
    if "default" not in modes:
        modes.insert(0, "default")
    exit_cleanly_on_signals()
    machine_info()  # taken now, so that its load average is from before the benchmark
    layouts = parse_layouts(args.layouts) if args.layouts else default_layouts(usable_cores())
    cells = [(n, k, style) for n, k in layouts for style in styles if fits(n, k, style)]
    skipped = [f"{n}x{k} {style}" for n, k in layouts for style in styles if not fits(n, k, style)]
    backends = [args.only] if args.only else list(BACKENDS)
    print(f"{host_line()}; cells: {', '.join(f'{n}x{k} {s}' for n, k, s in cells)}", file=sys.stderr, flush=True)
    started = time.monotonic()
    foreign_load = ForeignLoad()
    bench = Bench(args)
    bench.run(cells, modes, backends)
    text = report(bench, cells, skipped, modes, backends, time.monotonic() - started, f"; {foreign_load.describe()}")
    return finish(args.output, text, bench.failures)


if __name__ == "__main__":
    sys.exit(main())
