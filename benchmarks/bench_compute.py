"""Compute: meshax vs JAX (CPU) on the same programs, layouts 1x8, 2x4, 4x2 (processes x devices).

    python benchmarks/bench_compute.py [--repeats 5] [--kernel-rounds 2] [--layouts 1x8,2x4,4x2] [--budget 450]
                                       [--quick] [--output compute]

Both libraries run in the same benchmark run, on the same machine, one job at a time
(meshax and JAX jobs alternate). A layout NxK is N processes with K CPU devices each
(8 devices in all). JAX processes get JAX_PLATFORMS=cpu and JAX_NUM_CPU_DEVICES=K and
call jax.distributed.initialize('localhost:PORT', N, i) (not when N == 1).

1. Toy: the seeds' example end to end (workers/compute_toy.py runs examples/toy.py with a
   free coordinator port; for JAX with its imports swapped to jax). Wall time of
   the whole job, from just before spawning to every process exited, median of --repeats
   runs; the variants are interleaved within each repetition. meshax is started two ways:
   `python -m meshax launch -n N --cpu-devices K toy.py ...` (the launcher's own start-up
   included) and as N independent processes with MESHAX_NUM_CPU_DEVICES=K, as JAX is.
2. matmul: relu(x @ y), x (4096, 2048) float32 sharded P('a','b'), y (2048, 4096) P('b', None)
   on make_mesh((devices // 2, 2), ('a', 'b')).
3. chain: jnp.sum(jnp.sin(x) * 2 + 1), x (4096, 2048) float32 sharded P('a', None).

For 2 and 3 (workers/compute_kernels.py; meshax through its launcher) every call is
preceded by a barrier and timed on every process up to block_until_ready; a call's time
is the max over processes and the report gives the median over the repetitions after
warm-up (meshax eager and jit, JAX jit), pooled over --kernel-rounds jobs (default 2) per backend
and layout whose order alternates. Each job's checksum (the global sum of the
result) is compared between the libraries.

Every child is bounded in time (run_job's timeout, the launcher's --timeout and a
watchdog inside the kernel worker), and after every job any process still carrying this
run's tag in its command line is killed by pid.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (WORKERS_DIR, JobResult, exit_cleanly_on_signals, failures_section, free_port, machine_info,
                     markdown_table, median, parse_layouts, python, run_job, write_results)

try:  # Newer _common.py versions measure other processes' CPU use during the run.
    from _common import ForeignLoad
except ImportError:
    ForeignLoad = None

TOY_TIMEOUT = 30.0  # Seconds one toy job may take.
TOY_SHARE = 0.45  # Fraction of the budget the toy phase may use.
# [kernel, mode, warmup calls, max timed reps, min timed reps, seconds cap for the timed reps]
MESHAX_PLAN = [["matmul", "eager", 2, 7, 3, 6], ["matmul", "jit", 2, 7, 3, 6],
               ["chain", "eager", 3, 15, 5, 3], ["chain", "jit", 3, 15, 5, 3]]
JAX_PLAN = [["matmul", "jit", 2, 7, 3, 6], ["chain", "jit", 3, 15, 5, 3]]
QUICK_MESHAX_PLAN = [[k, m, 1, 2, 1, 1] for k, m, *_ in MESHAX_PLAN]
QUICK_JAX_PLAN = [[k, m, 1, 2, 1, 1] for k, m, *_ in JAX_PLAN]
KERNEL_JOB_TIMEOUT = 100.0  # Seconds one kernel job may take at most.
DIFFER = "differ"  # Checksum marker: processes or jobs of one backend disagree.
GOALS = {"toy": 0.35, "matmul": 1.0, "chain": 1.5}  # meshax / JAX at most.
TOY_VARIANTS = ("meshax launch", "meshax independent", "JAX")
STRIPPED_ENV_PREFIXES = ("MESHAX_", "JAX_", "XLA_FLAGS")


def base_env() -> dict[str, str]:
    """Our environment without variables that would configure either library."""
    return {k: v for k, v in os.environ.items() if not k.startswith(STRIPPED_ENV_PREFIXES)}


def jax_env(k: int) -> dict[str, str]:
    return dict(base_env(), JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(k))


# --------------------------------------------------------------------------
# Cleanup of leftovers
# --------------------------------------------------------------------------


def kill_tagged(tag: str) -> list[int]:
    """SIGKILL every process (by pid) whose command line contains `tag`; returns their pids."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if tag.encode() in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return killed


@dataclass
class Run:
    """State of one benchmark run: its tag, deadline and what went wrong."""

    tag: str
    deadline: float
    failures: list[str] = field(default_factory=list)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def job(self, label: str, commands: list[list[str]], timeout: float, env: dict[str, str]) -> JobResult:
        """run_job, then kill whatever of this run is left; failures are kept verbatim."""
        try:
            result = run_job(commands, timeout=timeout, env=env)
        finally:
            leftovers = kill_tagged(self.tag)
        if leftovers:
            print(f"[{label}] killed leftover processes {leftovers}", file=sys.stderr)
        return result

    def fail(self, label: str, result: JobResult, why: str) -> None:
        text = f"[{label}] {why}; {'timed out' if result.timed_out else f'exit codes {result.returncodes}'}"
        streams = [s for s in result.errors + result.outputs if s.strip()]
        detail = "\n".join(s.rstrip()[-4000:] for s in streams) or "(no output)"
        self.failures.append(f"{text}\n{detail}")
        print(f"{text}\n{detail}", file=sys.stderr)


def layout_label(n: int, k: int) -> str:
    return f"{n}x{k}"


# --------------------------------------------------------------------------
# 1. Toy example
# --------------------------------------------------------------------------


def toy_commands(variant: str, n: int, k: int, tag: str) -> tuple[list[list[str]], dict[str, str]]:
    address = f"localhost:{free_port()}"
    if variant == "meshax launch":
        timeout = f"{TOY_TIMEOUT - 5:g}"
        return ([[python(), "-m", "meshax", "launch", "-n", str(n), "--cpu-devices", str(k), "--timeout", timeout,
                  str(WORKERS_DIR / "compute_toy.py"), "meshax", "{process_id}", "{num_processes}", address, tag]],
                base_env())
    framework = "meshax" if variant == "meshax independent" else "jax"
    env = dict(base_env(), MESHAX_NUM_CPU_DEVICES=str(k)) if variant != "JAX" else jax_env(k)
    return [[python(), str(WORKERS_DIR / "compute_toy.py"), framework, str(i), str(n), address, tag]
            for i in range(n)], env


def toy_ok(result: JobResult, n: int) -> bool:
    text = "".join(result.outputs)
    return result.ok and all(f"process={i} got result: -0.12398" in text for i in range(n))


def measure_toy(run: Run, layouts: list[tuple[int, int]], repeats: int, budget: float) -> dict[tuple, list[float]]:
    walls: dict[tuple, list[float]] = {(layout, v): [] for layout in layouts for v in TOY_VARIANTS}
    deadline = time.monotonic() + budget
    for repeat in range(repeats):
        for n, k in layouts:
            for variant in TOY_VARIANTS:
                left = min(deadline, run.deadline) - time.monotonic()
                if left <= 2:
                    print(f"toy: time budget used up after {repeat} repetitions", file=sys.stderr)
                    return walls
                label = f"toy {layout_label(n, k)} {variant} #{repeat + 1}"
                commands, env = toy_commands(variant, n, k, run.tag)
                result = run.job(label, commands, min(TOY_TIMEOUT, left), env)
                if not toy_ok(result, n):
                    run.fail(label, result, "toy run failed")
                    continue
                wall = result.exit_time - result.spawn_time
                walls[((n, k), variant)].append(wall)
                print(f"[{label}] wall {wall:.3f} s", file=sys.stderr)
    return walls


# --------------------------------------------------------------------------
# 2 + 3. Kernels
# --------------------------------------------------------------------------


def kernel_job(run: Run, backend: str, n: int, k: int, quick: bool) -> dict[str, Any]:
    """One job running every planned kernel; returns {kernel/mode: {times, first, checksum}}."""
    plan = (QUICK_MESHAX_PLAN if quick else MESHAX_PLAN) if backend == "meshax" else \
        (QUICK_JAX_PLAN if quick else JAX_PLAN)
    timeout = min(KERNEL_JOB_TIMEOUT, run.remaining())
    if timeout < 10:
        print(f"kernels {backend} {layout_label(n, k)}: skipped, time budget used up", file=sys.stderr)
        return {}
    worker = [str(WORKERS_DIR / "compute_kernels.py"), "--backend", backend, "--plan", json.dumps(plan),
              "--budget", f"{timeout - 3:.0f}", "--tag", run.tag]
    if backend == "meshax":
        commands = [[python(), "-m", "meshax", "launch", "-n", str(n), "--cpu-devices", str(k),
                     "--timeout", f"{timeout - 2:.0f}", *worker]]
        env = base_env()
    else:
        address = f"localhost:{free_port()}"
        commands = [[python(), *worker, "--address", address, "--process-id", str(i), "--processes", str(n)]
                    for i in range(n)]
        env = jax_env(k)
    label = f"kernels {backend} {layout_label(n, k)}"
    result = run.job(label, commands, timeout, env)
    if not result.ok or len(result.records) != n:
        run.fail(label, result, f"kernel job failed ({len(result.records)}/{n} records)")
    return combine(result.records, n)


def combine(records: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Per kernel/mode: per repetition the max over processes, first call, checksums."""
    if len(records) != n:
        return {}
    combined = {}
    for key in records[0]["results"]:
        entries = [r["results"].get(key) for r in records]
        if any(e is None for e in entries):
            continue
        reps = min(len(e["times"]) for e in entries)
        times = [max(e["times"][i] for e in entries) for i in range(reps)]
        first = max(e["warmup"][0] for e in entries) if all(e["warmup"] for e in entries) else None
        sums = {e["checksum"] for e in entries}
        combined[key] = {"times": times, "first": first,
                         "checksum": sums.pop() if len(sums) == 1 else None if None in sums else DIFFER}
    return combined


def merge(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Pool the repetitions of several jobs of one backend and layout."""
    merged: dict[str, Any] = {}
    for results in rounds:
        for key, value in results.items():
            entry = merged.setdefault(key, {"times": [], "firsts": [], "checksums": []})
            entry["times"] += value["times"]
            if value["first"] is not None:
                entry["firsts"].append(value["first"])
            entry["checksums"].append(value["checksum"])
    for entry in merged.values():
        entry["first"] = median(entry["firsts"]) if entry["firsts"] else None
        sums = {c for c in entry["checksums"] if c is not None}
        entry["checksum"] = None if not sums else sums.pop() if len(sums) == 1 else DIFFER
    return merged


def measure_kernels(run: Run, layouts: list[tuple[int, int]], rounds: int, quick: bool) -> dict[tuple, dict[str, Any]]:
    """`rounds` jobs per backend and layout, the backends' order alternating between rounds."""
    collected: dict[tuple, list[dict[str, Any]]] = {}
    for n, k in layouts:
        for round_index in range(rounds):
            backends = ("meshax", "jax") if round_index % 2 == 0 else ("jax", "meshax")
            for backend in backends:
                results = kernel_job(run, backend, n, k, quick)
                collected.setdefault(((n, k), backend), []).append(results)
                summary = ", ".join(f"{key} {median(v['times']) * 1e3:.1f} ms ({len(v['times'])} reps)"
                                    for key, v in results.items() if v["times"])
                print(f"[kernels {backend} {layout_label(n, k)} round {round_index + 1}] {summary or 'no results'}",
                      file=sys.stderr)
    return {key: merge(value) for key, value in collected.items()}


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def fmt(seconds: float | None) -> str:
    if seconds is None or seconds != seconds:
        return "n/a"
    ms = seconds * 1e3
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def fmt_range(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"**{fmt(median(values))}** ({fmt(min(values))}–{fmt(max(values))}, n={len(values)})"


def ratio(a: list[float], b: list[float], goal: float) -> str:
    if not a or not b:
        return "n/a"
    r = median(a) / median(b)
    return f"{r:.2f} {'✓' if r <= goal else '✗'}"


def toy_table(walls: dict[tuple, list[float]], layouts: list[tuple[int, int]]) -> str:
    goal = GOALS["toy"]
    rows = []
    for layout in layouts:
        m_l, m_i, j = (walls[(layout, v)] for v in TOY_VARIANTS)
        rows.append([layout_label(*layout), fmt_range(m_l), fmt_range(m_i), fmt_range(j),
                     ratio(m_l, j, goal), ratio(m_i, j, goal)])
    headers = ["layout", "meshax, `meshax launch`", "meshax, independent processes", "JAX",
               f"ratio launch / JAX (goal ≤ {goal})", f"ratio independent / JAX (goal ≤ {goal})"]
    return markdown_table(headers, rows)


def kernel_table(kernels: dict[tuple, dict[str, Any]], layouts: list[tuple[int, int]], kernel: str) -> str:
    goal = GOALS[kernel]
    rows = []
    for layout in layouts:
        m = kernels.get((layout, "meshax"), {})
        j = kernels.get((layout, "jax"), {})
        me, mj, jj = (d.get(f"{kernel}/{mode}", {}) for d, mode in ((m, "eager"), (m, "jit"), (j, "jit")))
        sums = [e.get("checksum") for e in (me, mj, jj) if e and e.get("checksum") is not None]
        agree = "NO: processes or jobs differ" if DIFFER in sums else "n/a" if len(sums) < 2 else (
            "yes" if max(abs(s - sums[-1]) for s in sums) <= 1e-4 * max(1.0, abs(sums[-1])) else
            "NO: " + ", ".join(f"{s:.6g}" for s in sums))
        rows.append([layout_label(*layout), fmt_range(me.get("times", [])), fmt_range(mj.get("times", [])),
                     fmt_range(jj.get("times", [])), ratio(me.get("times", []), jj.get("times", []), goal),
                     ratio(mj.get("times", []), jj.get("times", []), goal),
                     f"{fmt(me.get('first'))} / {fmt(mj.get('first'))} / {fmt(jj.get('first'))}", agree])
    headers = ["layout", "meshax eager", "meshax jit", "JAX jit", f"eager / JAX (goal ≤ {goal})",
               f"jit / JAX (goal ≤ {goal})", "first call: meshax eager / jit / JAX jit", "checksums agree"]
    return markdown_table(headers, rows)


def report(walls: dict[tuple, list[float]], kernels: dict[tuple, dict[str, Any]], layouts: list[tuple[int, int]],
           repeats: int, rounds: int, quick: bool, failures: list[str], elapsed: float, foreign: str) -> str:
    plan = {k: (w, lo, hi, cap) for k, m, w, hi, lo, cap in (QUICK_MESHAX_PLAN if quick else MESHAX_PLAN)}
    reps_text = (f"warm-up: {plan['matmul'][0]} calls for matmul, {plan['chain'][0]} for the chain (the first call, "
                 f"which includes tracing/compilation, is shown separately); then {plan['matmul'][1]}–"
                 f"{plan['matmul'][2]} timed repetitions for matmul, {plan['chain'][1]}–{plan['chain'][2]} for the "
                 f"chain (more only while within {plan['matmul'][3]} s / {plan['chain'][3]} s) per job, and {rounds} "
                 f"job(s) per backend and layout (the backends' order alternating), their repetitions pooled.")
    try:
        load_end = f"{os.getloadavg()[0]:.2f}"
    except OSError:
        load_end = "unknown"
    parts = [
        "## Compute: meshax vs JAX (CPU), same programs, same run",
        "",
        machine_info() + f"; load average at end {load_end}; whole run {elapsed:.0f} s" + foreign,
        "",
        "Layouts are processes x CPU devices per process (8 devices in all). Cells: **median** "
        "(min–max, n = runs or pooled repetitions); ratio = meshax median / JAX median, ✓ when within the goal.",
        "",
        f"### 1. Seeds' toy example, whole job wall time (spawn → all exited), {repeats} run(s) per cell, "
        "interleaved",
        "",
        toy_table(walls, layouts),
        "",
        "### 2. `relu(x @ y)`, x (4096, 2048) P('a','b'), y (2048, 4096) P('b', None), float32, time per call",
        "",
        kernel_table(kernels, layouts, "matmul"),
        "",
        "### 3. `jnp.sum(jnp.sin(x) * 2 + 1)`, x (4096, 2048) P('a', None), float32, time per call",
        "",
        kernel_table(kernels, layouts, "chain"),
        "",
        "Method. Toy: copies of examples/toy.py (free coordinator port; JAX copy imports jax and skips "
        "initialize for one process), JAX_PLATFORMS=cpu, JAX_NUM_CPU_DEVICES=K; job wall includes interpreter "
        "start-up, imports, initialisation and shutdown. Kernels: mesh make_mesh((devices//2, 2), ('a','b')), "
        "inputs from one seed via make_array_from_callback; " + reps_text + " Each repetition is a barrier "
        "(meshax: runtime().world.Barrier(); JAX: multihost_utils.sync_global_devices), then call + "
        "block_until_ready timed on every process; a repetition's time is the max over processes; the first "
        "call column is the median over jobs of the max over processes. Checksum = float(jnp.sum(result)) of "
        "the last call, compared across processes, jobs and libraries (relative tolerance 1e-4). meshax runs "
        "under `python -m meshax launch`; JAX as N independent processes. Thread counts are the libraries' "
        "defaults; the machine's OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (set here for old OpenBLAS builds) are unset "
        "for the whole run so that NumPy uses the kernel its OpenBLAS picks (shown in the machine line), and "
        "meshax's bytecode is compiled first, as `pip install` does. The machine is shared: other jobs may have "
        "run at the same time (see the load averages).",
    ]
    parts += failures_section(failures)
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="toy runs per variant and layout")
    parser.add_argument("--layouts", default="1x8,2x4,4x2")
    parser.add_argument("--kernel-rounds", type=int, default=2, help="jobs per backend and layout for the kernels")
    parser.add_argument("--budget", type=float, default=450.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="few repetitions, for trying the script")
    parser.add_argument("--output", default="compute", help="results/<output>.md")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    machine_info()  # Taken now, so that its load average is from before the benchmark.
    layouts = parse_layouts(args.layouts)
    repeats = 1 if args.quick else args.repeats
    rounds = 1 if args.quick else args.kernel_rounds
    started = time.monotonic()
    foreign_load = ForeignLoad() if ForeignLoad is not None else None
    run = Run(tag=f"bench-compute-{uuid.uuid4().hex}", deadline=started + args.budget)
    try:
        walls = measure_toy(run, layouts, repeats, args.budget * TOY_SHARE)
        kernels = measure_kernels(run, layouts, rounds, args.quick)
    finally:
        kill_tagged(run.tag)
    foreign = f"; {foreign_load.describe()}" if foreign_load is not None else ""
    text = report(walls, kernels, layouts, repeats, rounds, args.quick, run.failures, time.monotonic() - started,
                  foreign)
    print(text)
    print(f"\nwritten to {write_results(args.output, text)}", file=sys.stderr)
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
