"""bench_models.py's models with meshax's and JAX's steps taken by turns in one process: ratios that hold on a
noisy machine.

    python benchmarks/interleave_models.py [--models gru,tiny] [--load 0,2] [--rounds 15] [--output NAME]

On a host shared with other work (a cloud VM's neighbours, a CI runner), the same job's step time moves by
20-40% from one minute to the next, so two libraries measured one after the other (bench_models.py's jobs,
alternating) can differ by more than either changed. Here one process per model (workers/
interleave_models_worker.py) builds the model in both libraries from the same code and data, on one device, and
each round times one step of each, the order alternating: both meet the same load at the same moments. The
table gives each library's median step (interquartile range), the ratio of the medians and the median of the
rounds' ratios (each round's meshax step over the JAX step beside it: the figure least moved by the load's
changes), and the first steps (trace + compile + run). Both libraries at their defaults (no thread variable
set), one device (layout 1x1). --load L runs L busy loops beside each job, as bench_models.py's. Losses: each
round's loss of meshax against JAX's, relative tolerance 1e-3 (bench_models.loss_difference).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from _common import (STRIPPED_ENV_PREFIXES, WORKERS_DIR, ForeignLoad, busy_loops, chosen, exit_cleanly_on_signals,
                     failures_section, finish, machine_info, markdown_table, median, python, run_job)
from bench_models import LOSS_RTOL, MODELS, loss_difference, losses_text, step_text, target_text
from bench_train import host_line

JOB_TIME = 900.0  # seconds one model's job may take (the GPT at 15 rounds beside 2 busy loops: ~5 min here)


def row(model: str, load: int, record: dict) -> tuple[list[str], bool]:
    """The table row of one job's record (bench_models.py's cell formats), and whether its losses agree."""
    ours, theirs = record["times"]["meshax"], record["times"]["jax"]
    paired = median([a / b for a, b in zip(ours, theirs)])
    worst = loss_difference(record["losses"]["meshax"], record["losses"]["jax"])
    return [model, str(load), step_text({"times": ours, "failed": 0}, True),
            step_text({"times": theirs, "failed": 0}, True), f"{median(ours) / median(theirs):.2f}", f"{paired:.2f}",
            target_text(1, 1, load, paired, 1.0), f"{record['firsts']['meshax']:.2f}",
            f"{record['firsts']['jax']:.2f}", losses_text((worst, "meshax"))], worst <= LOSS_RTOL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, from " + ", ".join(MODELS))
    parser.add_argument("--load", default="0", help="busy loops beside each job; a list (0,2) runs each")
    parser.add_argument("--rounds", type=int, default=15, help="timed steps per library, taken by turns")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up steps (the first is the first step)")
    parser.add_argument("--output", default="interleave_models", help="results/<output>.md")
    args = parser.parse_args()
    models = chosen(parser, args.models, MODELS, "model")
    try:
        loads = [int(v) for v in args.load.split(",")]
    except ValueError:
        parser.error("--load takes integers (0,2)")
    if min(loads) < 0 or args.rounds < 1 or args.warmup < 1:
        parser.error("--load must be >= 0, --rounds and --warmup at least 1")
    exit_cleanly_on_signals()
    machine = machine_info()
    env = {key: value for key, value in os.environ.items() if not key.startswith(STRIPPED_ENV_PREFIXES)}
    env["JAX_PLATFORMS"] = "cpu"
    started, foreign = time.monotonic(), ForeignLoad()
    rows, failures, disagreeing = [], [], 0
    for load in loads:
        for model in models:
            command = [python(), str(WORKERS_DIR / "interleave_models_worker.py"), "--model", model,
                       "--rounds", str(args.rounds), "--warmup", str(args.warmup)]
            with busy_loops(load):
                job = run_job([command], JOB_TIME, env)
            complete = [r for r in job.records if r.get("complete")]
            if not job.ok or not complete:
                failures.append(f"{model} load {load}: {job.failure()}")
                continue
            cells, agree = row(model, load, complete[0])
            rows.append(cells)
            disagreeing += not agree
            print(" | ".join(cells), file=sys.stderr, flush=True)
    headers = ["model", "load", "meshax step ms", "JAX step ms", "ratio of medians", "median of round ratios",
               "target met (round ratios)", "first step meshax s", "JAX s", "losses equal (max rel. diff)"]
    text = "\n\n".join([
        "## Models, meshax and JAX by turns in one process (1x1)",
        f"{machine}; whole run {time.monotonic() - started:.0f} s; {foreign.describe()}",
        f"{host_line()}.",
        f"Per model and load one job: {args.warmup} warm-up step(s) per library (the first is the first step), "
        f"then {args.rounds} rounds of one timed step per library, the order alternating (tiny: each timed step is "
        "the mean of 25 in a row). Step cells: median ms (interquartile range, n). See the script's docstring.",
        markdown_table(headers, rows), *failures_section(failures)])
    status = finish(args.output, text, failures)
    return status or (1 if disagreeing else 0)


if __name__ == "__main__":
    sys.exit(main())
