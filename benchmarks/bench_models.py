"""Models written in plain JAX, trained on meshax (through meshax.as_jax) and on JAX (CPU), at their defaults.

    python benchmarks/bench_models.py [--models gpt,gru] [--layouts 1x1,2x4] [--load 0,2] [--load-layouts 1x1]
                                      [--only meshax|jax] [--rounds 2] [--load-rounds 4] [--warmup 3] [--steps 6] [--budget 900] [--quick]
                                      [--output models]

The models are those of workers/models.py (gpt in styles dp and tp, gpt_scan, gru, cnn, tiny, mlp), on Mesh(all
devices, ('data',)), laid out as N processes x K devices: by default 1x1, 2x4, 1xC and Cx1 in that order (the
layouts with a target first), C being the host's usable cores (affinity, capped by a cgroup CPU quota); a model
whose batch (gpt tp: whose split weight dimensions) the devices do not divide is skipped with a note. One file,
workers/models_worker.py, runs on both libraries: meshax as `python -m meshax.as_jax models_worker.py` with
MESHAX_NUM_CPU_DEVICES=K and, for N > 1, MESHAX_COORDINATOR_ADDRESS / MESHAX_NUM_PROCESSES / MESHAX_PROCESS_ID (the
worker calls jax.distributed.initialize() without arguments); JAX as `python models_worker.py` with
JAX_PLATFORMS=cpu, JAX_NUM_CPU_DEVICES=K and jax.distributed.initialize('localhost:PORT', N, i). No thread variable
is set for either library; the machine's OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are unset for every job.

--load L runs L busy loops (processes spinning in pure Python) beside every job, started before it and killed after
it, the same for both libraries: how each library holds up on a shared machine. A list (0,2) runs each load; a load
above 0 runs at the layouts of --load-layouts only (default 1x1, where issue 41 sets its target under load), so
that `--layouts 1x1,2x4 --load 0,2` runs exactly the cells of the issue's targets.

A job runs --warmup steps (the first one, trace + compile + run, is the "first step"; three by default, as meshax
writes a program's code on its third call: the first learns the results' placements, the second walks the
program's steps) and then --steps timed steps;
every step follows a barrier and is timed on every process until the new parameters and the loss are ready, a
step's time being the max over processes (meshax's worker waits after the warm-up until the kernels meshax compiles
in the background are ready, as JAX's are after its first step). Each cell (model, style, layout, load) runs
--rounds jobs per library (--load-rounds, 4 by default, under a load: there a job's steps run at their quiet time
or near twice it as the scheduler placed the job, so a cell needs more jobs), the libraries' order alternating; cells report the median of the pooled timed steps and
of the jobs' first steps, and the ratios meshax / JAX. The losses of every step of every job are compared with JAX's
first job's (relative tolerance 1e-3, float32); a mismatch is flagged in the table, naming the job furthest off,
and makes the exit status 1. For `mlp`,
the meshax jobs also time the NumPy floor of the same step (workers/train_floor.py, as in bench_train.py: a floor
step after each timed step, same processes, meshax's CPU budget); the other models have no hand-written floor. A
job that fails or times out is reported (verbatim output at the end) and the run goes on; --only runs one library.
Issue 41's target: every model <= 1.2x JAX quiet at 1x1 and 2x4, and <= 1.5x JAX at 1x1 with --load 2.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from _common import (STRIPPED_ENV_PREFIXES, WORKERS_DIR, ForeignLoad, JobResult, busy_loops, chosen,
                     exit_cleanly_on_signals, failures_section, finish, free_port, machine_info, markdown_table, median,
                     parse_layouts, python, quantile, run_job)
from bench_train import combine, host_line, usable_cores

BACKENDS = ("meshax", "jax")
LABELS = {"meshax": "meshax", "jax": "JAX"}
# (model, style) of workers/models.py, with the sizes the devices must divide: the batch (dp), or the split
# weight dimensions (gpt tp: 3 x d, the MLP width, d). tests/test_bench_models.py checks them against models.py.
CELLS = {("gpt", "dp"): (16,), ("gpt", "tp"): (768, 1024, 256), ("gpt_scan", "dp"): (16,), ("gru", "dp"): (32,),
         ("cnn", "dp"): (64,), ("tiny", "dp"): (64,), ("mlp", "dp"): (2048,)}
MODELS = tuple(dict.fromkeys(model for model, _ in CELLS))
FLOOR_MODEL = "mlp"
JOB_SLACK = 90.0  # seconds a job may take beyond its steps: start-up, compilation, shutdown
STEP_ALLOWANCE = 15.0  # seconds per step when sizing a job's timeout (JAX's gpt tp at 2x4 here: 6-18 s a step)
MIN_JOB_TIME = 20.0
# the models that run many untimed steps first (workers/models.py STEADY_AFTER: tiny 520, gru 110 on one device), and the seconds
# that takes, meshax's compilation of its program (or loops) included (on 2 busy cores, cold: up to ~90 s)
STEADY_SLACK = {"tiny": 180.0, "gru": 180.0}
# where a loss has been trained down towards float32's rounding of its residuals (gru: ~1e-13 after 100 steps, from
# 1.1), the relative difference of two such losses means little: a mean of squares of residuals r, each rounded to
# ~1.2e-7 of the values they are differences of (~1), is good to ~2.4e-7 / |r| relatively, 1e-3 at a loss of ~6e-8.
# Measured (gru, 130 steps): meshax and JAX agree to 1.1e-4 down to a loss of 7e-8 and part at 4e-9 (8e-4 on
# 2 threads, 3e-3 on 16). Below this fraction of a curve's largest loss, the difference is taken relative to it.
LOSS_FLOOR = 1e-7
LOSS_RTOL = 1e-3  # float32, different summation orders, a few SGD steps
TARGETS = {((1, 1), 0): 1.2, ((2, 4), 0): 1.2, ((1, 1), 2): 1.5}  # issue 41: meshax / JAX step time at most


def default_layouts(c: int) -> list[tuple[int, int]]:
    """1x1, 2x4, 1xC, Cx1 (processes x devices), each once: the layouts with a target first, so that a run cut
    short by --budget has them."""
    return list(dict.fromkeys([(1, 1), (2, 4), (1, c), (c, 1)]))


def fits(n: int, k: int, cell: tuple[str, str]) -> bool:
    """Whether N x K devices divide every size the cell splits."""
    return all(size % (n * k) == 0 for size in CELLS[cell])


def job_commands(backend: str, n: int, k: int, worker_args: list[str]) -> tuple[list[list[str]], dict[str, str]]:
    """The N commands of one job and their environment (no thread variable set)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(STRIPPED_ENV_PREFIXES)}
    address = f"localhost:{free_port()}"
    worker = str(WORKERS_DIR / "models_worker.py")
    if backend == "meshax":
        env["MESHAX_NUM_CPU_DEVICES"] = str(k)
        command = [python(), "-m", "meshax.as_jax", worker, *worker_args]
        if n == 1:
            return [command], env
        return [["env", f"MESHAX_COORDINATOR_ADDRESS={address}", f"MESHAX_NUM_PROCESSES={n}",
                 f"MESHAX_PROCESS_ID={i}", *command, "--auto-init"] for i in range(n)], env
    env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(k))
    command = [python(), worker, *worker_args]
    if n == 1:
        return [command], env
    return [[*command, "--address", address, "--process-id", str(i), "--processes", str(n)] for i in range(n)], env


def rounds_of(args: argparse.Namespace, load: int) -> int:
    """The jobs per library of a cell under `load` busy loops."""
    return args.load_rounds if load > 0 else args.rounds


Key = tuple[str, str, int, int, int, str]  # model, style, processes, devices per process, load, backend


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline = time.monotonic() + args.budget
        self.jobs: dict[Key, list[dict[str, Any]]] = {}
        self.failures: list[str] = []
        self.failed: dict[Key, int] = {}  # jobs that failed or timed out, per cell and library
        self.skipped_for_time = 0

    def run(self, plan: list[tuple[str, str, int, int, int]], backends: list[str]) -> None:
        """Every (model, style, N, K, load) of `plan`, --rounds jobs per library (--load-rounds under a load), the
        order alternating."""
        for model, style, n, k, load in plan:
            rounds = rounds_of(self.args, load)
            for round_ in range(rounds):
                for backend in (backends if round_ % 2 == 0 else backends[::-1]):
                    label = (f"{model} {style} {n}x{k} load {load} {LABELS[backend]} "
                             f"round {round_ + 1}/{rounds}")
                    self.job((model, style, n, k, load, backend), label)

    def job(self, key: Key, label: str) -> None:
        a = self.args
        model, style, n, k, load, backend = key
        remaining = self.deadline - time.monotonic()
        if remaining < MIN_JOB_TIME:
            self.skipped_for_time += 1
            print(f"[{label}] skipped: time budget used up", file=sys.stderr, flush=True)
            return
        floor_steps = a.steps if backend == "meshax" and model == FLOOR_MODEL else 0
        timeout = min(remaining, JOB_SLACK + STEADY_SLACK.get(model, 0.0) +
                      STEP_ALLOWANCE * (a.warmup + a.steps + floor_steps))
        worker_args = ["--model", model, "--style", style, "--warmup", str(a.warmup), "--steps", str(a.steps),
                       "--floor-steps", str(floor_steps), "--budget", f"{timeout - 3:.0f}"]
        commands, env = job_commands(backend, n, k, worker_args)
        with busy_loops(load):
            result = run_job(commands, timeout=timeout, env=env)
        found = combine(result.records, n)
        if found is not None:
            found["name"] = f"{LABELS[backend]} job {len(self.jobs.get(key, [])) + 1}"
        if not result.ok or found is None or not found["complete"]:
            self.failed[key] = self.failed.get(key, 0) + 1
            self.fail(label, result)
            if found is not None and found["times"]:  # partial measurements are kept (the cell is marked)
                self.jobs.setdefault(key, []).append(found)
            return
        self.jobs.setdefault(key, []).append(found)
        floor = f", floor {median(found['floor_times']) * 1e3:.1f} ms" if found["floor_times"] else ""
        print(f"[{label}] done in {result.exit_time - result.spawn_time:.1f} s: first step "
              f"{found['warmup_times'][0]:.2f} s, median step {median(found['times']) * 1e3:.1f} ms{floor}",
              file=sys.stderr, flush=True)

    def fail(self, label: str, result: JobResult) -> None:
        self.failures.append(f"[{label}] failed: {result.failure()}\n"
                             + "\n".join(s.rstrip()[-3000:] for s in result.errors[:1] if s.strip()))
        print(f"[{label}] FAILED: {result.failure()[:400]}", file=sys.stderr, flush=True)

    def pooled(self, key: Key, prefix: str = "") -> dict[str, Any] | None:
        """The jobs of `key` pooled: timed steps (`prefix` "floor_": the floor's), first steps, loss curves."""
        jobs = [j for j in self.jobs.get(key, []) if j[prefix + "times"]]
        if not jobs:
            return None
        return {"times": [t for j in jobs for t in j[prefix + "times"]],
                "firsts": [j["warmup_times"][0] for j in jobs if j["warmup_times"]] if not prefix else [],
                "losses": [j[prefix + "losses"] for j in jobs], "failed": self.failed.get(key, 0),
                "names": [("NumPy floor of " if prefix else "") + j["name"] for j in jobs]}


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.2f}" if ms < 10 else f"{ms:.1f}" if ms < 100 else f"{ms:.0f}"


def step_text(cell: dict[str, Any] | None, ran: bool) -> str:
    """Median step in ms, with the interquartile range and the count."""
    if cell is None:
        return "failed" if ran else "not run"
    times = cell["times"]
    mark = f" † ({cell['failed']} job(s) failed)" if cell["failed"] else ""
    return (f"**{fmt_ms(median(times))}** ({fmt_ms(quantile(times, 0.25))}–{fmt_ms(quantile(times, 0.75))}, "
            f"n={len(times)}){mark}")


def first_text(cell: dict[str, Any] | None) -> str:
    return f"{median(cell['firsts']):.2f}" if cell and cell["firsts"] else "n/a"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def step_median(cell: dict[str, Any] | None) -> float | None:
    return median(cell["times"]) if cell else None


def first_median(cell: dict[str, Any] | None) -> float | None:
    return median(cell["firsts"]) if cell and cell["firsts"] else None


def worst_loss_difference(cells: list[dict[str, Any] | None]) -> tuple[float, str] | None:
    """The largest relative difference, step by step, between a job's losses and the first curve's (the first
    cell's first job), and that job's name (None: fewer than 2 curves)."""
    curves = [(curve, name) for cell in cells if cell for curve, name in zip(cell["losses"], cell["names"])]
    if len(curves) < 2:
        return None
    length = min(len(c) for c, _ in curves)
    reference = curves[0][0][:length]
    return max((loss_difference(c[:length], reference), name) for c, name in curves[1:])


def loss_difference(curve: list[float], reference: list[float]) -> float:
    """The largest difference, step by step, between two loss curves, relative to the reference's loss (or to
    LOSS_FLOOR of its largest loss, where that is more)."""
    floor = max(LOSS_FLOOR * max(map(abs, reference), default=0.0), 1e-30)
    return max((abs(a - b) / max(abs(b), floor) for a, b in zip(curve, reference)), default=0.0)


def losses_text(worst: tuple[float, str] | None) -> str:
    if worst is None:
        return "n/a"
    if worst[0] <= LOSS_RTOL:
        return f"yes ({worst[0]:.0e})"
    return f"**NO** ({worst[0]:.0e}, {worst[1]})"


def target_text(n: int, k: int, load: int, m: float | None, j: float | None) -> str:
    limit = TARGETS.get(((n, k), load))
    if limit is None or not m or not j:
        return "n/a"
    return f"{'yes' if m / j <= limit else '**no**'} (≤ {limit}x)"


def rows(bench: Bench, plan: list[tuple[str, str, int, int, int]], backends: list[str]) -> tuple[list[list[str]], int]:
    """The table's rows, and how many cells' losses disagree."""
    out, mismatches = [], 0
    for model, style, n, k, load in plan:
        m, j = (bench.pooled((model, style, n, k, load, b)) for b in BACKENDS)
        floor = bench.pooled((model, style, n, k, load, "meshax"), prefix="floor_") if model == FLOOR_MODEL else None
        worst = worst_loss_difference([j, m, floor])  # against JAX's first job when JAX ran
        mismatches += worst is not None and worst[0] > LOSS_RTOL
        ms, js = step_median(m), step_median(j)
        out.append([model, style, f"{n}x{k}", str(load), step_text(m, "meshax" in backends),
                    step_text(j, "jax" in backends), ratio(ms, js), target_text(n, k, load, ms, js),
                    first_text(m), first_text(j), ratio(first_median(m), first_median(j)),
                    step_text(floor, True) if floor else "n/a", losses_text(worst)])
    return out, mismatches


def report(bench: Bench, plan: list[tuple[str, str, int, int, int]], skipped: list[str], backends: list[str],
           elapsed: float, foreign: str) -> tuple[str, int]:
    a = bench.args
    table, mismatches = rows(bench, plan, backends)
    headers = ["model", "style", "layout", "load", "meshax step ms", "JAX step ms", "meshax / JAX", "target met",
               "first step meshax s", "JAX s", "meshax / JAX", "NumPy floor ms", "losses equal (max rel. diff)"]
    parts = [
        "## Models in plain JAX: meshax (through meshax.as_jax) vs JAX (CPU), at their defaults",
        "",
        machine_info() + f"; whole run {elapsed:.0f} s{foreign}",
        "",
        host_line() + ".",
        "",
        "Models: workers/models.py (gpt: 4-layer decoder d 256, seq 128, batch 16, dp or Megatron-style tp; "
        "gpt_scan: the same under lax.scan + checkpoint; gru: 200 steps under lax.scan; cnn: two 3x3 convolutions; "
        "tiny: MLP 64-64-64-10 with Adam; mlp: 784-1024-1024-10, batch 2048). Layout = processes x devices per "
        "process; load = busy loops (pure-Python spinning processes) beside each job. "
        f"Step cells: **median** ms (interquartile range, n = timed steps pooled over {a.rounds} job(s) per "
        f"library, {a.load_rounds} under a load); per job {a.warmup} warm-up step(s), then {a.steps} timed step(s), each after a barrier and "
        "timed until the new parameters and the loss are ready, the max over processes (tiny: each warm-up and timed "
        "step but the first is 25 steps in a row, their mean (workers/models.py's REPEAT): its step is under a "
        "millisecond). First step = the first warm-up "
        "step (trace + compile + run), median over jobs. Both libraries at their defaults (no thread variable "
        "set). Target (issue 41): meshax <= 1.2x JAX quiet at 1x1 and 2x4, <= 1.5x JAX at 1x1 with load 2. "
        "NumPy floor (mlp only): the same step by hand with NumPy in the meshax jobs' processes "
        "(workers/train_floor.py). Losses: every step's loss of every job (and of the floor) against JAX's first "
        f"job's (else meshax's), relative tolerance {LOSS_RTOL} (below {LOSS_FLOOR} of the curve's largest loss, relative to that), a mismatch naming the job furthest off; † = job(s) "
        "of the cell failed (see Failures), what they measured before failing is kept.",
        "",
        markdown_table(headers, table),
    ]
    if skipped:
        parts += ["", "Not run (the devices do not divide the batch or, for gpt tp, the split weights): "
                  + ", ".join(skipped) + "."]
    if bench.skipped_for_time:
        parts += ["", f"{bench.skipped_for_time} job(s) not run: the time budget (--budget {a.budget:g} s) was "
                      "used up."]
    parts += failures_section(bench.failures)
    return "\n".join(parts), mismatches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, from " + ", ".join(MODELS))
    parser.add_argument("--layouts", default=None,
                        help="processes x devices, e.g. 1x1,2x4 (default: 1x1, 2x4, 1xC, Cx1)")
    parser.add_argument("--load", default="0", help="busy loops beside each job; a list (0,2) runs each")
    parser.add_argument("--load-layouts", default="1x1", help="the layouts that run the loads above 0")
    parser.add_argument("--only", choices=BACKENDS, default=None, help="run one library only")
    parser.add_argument("--rounds", type=int, default=2, help="jobs per library and cell (order alternating)")
    parser.add_argument("--load-rounds", type=int, default=4, help="jobs per library and cell under a load")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up steps (the first is the first step)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="1 round, 1 warm-up and 2 timed steps")
    parser.add_argument("--output", default="models", help="results/<output>.md")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.load_rounds, args.warmup, args.steps = 1, 1, 1, 2
    if min(args.warmup, args.steps, args.rounds, args.load_rounds) < 1:
        parser.error("--warmup, --steps, --rounds and --load-rounds must be at least 1")
    models = chosen(parser, args.models, MODELS, "model")
    try:
        loads = [int(v) for v in args.load.split(",")]
        layouts = parse_layouts(args.layouts) if args.layouts else default_layouts(usable_cores())
        load_layouts = parse_layouts(args.load_layouts)
    except ValueError:
        parser.error("--load takes integers (0,2) and --layouts NxK items (1x1,2x4)")
    if min(loads) < 0 or min(n * k for n, k in layouts) < 1:
        parser.error("--load must be >= 0 and every layout at least 1x1")
    exit_cleanly_on_signals()
    machine_info()  # taken now, so that its load average is from before the benchmark
    cells = [cell for cell in CELLS if cell[0] in models]
    plan = [(model, style, n, k, load) for n, k in layouts for load in loads for model, style in cells
            if fits(n, k, (model, style)) and (load == 0 or (n, k) in load_layouts)]
    skipped = [f"{model} {style} at {n}x{k}" for n, k in layouts for model, style in cells
               if not fits(n, k, (model, style))]
    if not plan:
        parser.error("nothing to run: no chosen model fits a chosen layout (loads above 0 run at --load-layouts)")
    backends = [args.only] if args.only else list(BACKENDS)
    jobs = sum(len(backends) * rounds_of(args, load) for *_, load in plan)
    print(f"{host_line()}; {len(plan)} cells, {jobs} jobs", file=sys.stderr, flush=True)
    started = time.monotonic()
    foreign_load = ForeignLoad()
    bench = Bench(args)
    bench.run(plan, backends)
    text, mismatches = report(bench, plan, skipped, backends, time.monotonic() - started,
                              f"; {foreign_load.describe()}")
    status = finish(args.output, text, bench.failures)
    if mismatches:
        print(f"{mismatches} cell(s) with losses that disagree", file=sys.stderr)
    return 1 if mismatches else status


if __name__ == "__main__":
    sys.exit(main())
