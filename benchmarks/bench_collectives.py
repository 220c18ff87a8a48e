"""Collectives in shard_map: meshax vs JAX vs plain mpi4py, 8 devices as 1x8, 2x4 and 4x2 (processes x devices).

    python benchmarks/bench_collectives.py [--budget 420] [--quick] [--layouts 1x8,2x4,4x2] [--output collectives]
                                           [--no-profile]
    python benchmarks/bench_collectives.py --profile-only [--layouts ...]  (meshax under cProfile; prints only)

Programs, on a float32 array of D = 8 devices' blocks sharded along a mesh axis 'i'
(workers/coll_common.py has the data and the checks):

* psum of a 4 KB, 4 MB and 64 MB block per device: `jit(shard_map(lambda x: lax.psum(x, 'i'),
  mesh=make_mesh((8,), ('i',)), in_specs=P('i'), out_specs=P()))`;
* all_gather(x, 'i', tiled=True) of 4 MB per device (out_specs=P());
* ppermute ring shift (device g -> g+1 mod 8) of 4 MB per device (out_specs=P('i')).

Frameworks, each layout N x K (N processes with K CPU devices each), one job per
(layout, framework), one job after the other, the whole set --passes times (default 2,
frameworks in alternating order so that each sees the same drift in machine load; the
calls of all passes are pooled):

* meshax (workers/coll_meshax.py): N independent processes, each calling
  meshax.distributed.initialize() with MESHAX_COORDINATOR_ADDRESS / MESHAX_NUM_PROCESSES /
  MESHAX_PROCESS_ID and MESHAX_NUM_CPU_DEVICES=K in the environment (N = 1: no initialize);
* JAX (workers/coll_jax.py): N independent processes with jax.distributed.initialize(
  'localhost:PORT', N, i), JAX_PLATFORMS=cpu, JAX_NUM_CPU_DEVICES=K (N = 1: no initialize);
* mpi4py (workers/coll_mpi4py.py): `mpiexec -n N` (the venv's), each process holding its K
  blocks and moving the same bytes by hand (NumPy sum + Allreduce; Allgather; Sendrecv of
  the boundary block + local copies); N = 1: the NumPy local work only, no MPI.

Every call follows a barrier and is timed until its result is ready; a call's time is
the max over processes; reported are medians after warm-up. Each program has a cap on
calls and seconds (whichever comes first, at least 2 timed calls), every job a timeout
(its caps + JOB_SLACK) and the whole run a budget; children are killed on every path.

Then (unless --no-profile) the meshax jobs run once more with fewer calls, under cProfile
around the timed calls, and the report gets, per layout and program, the functions with
the most own time per call (process 0).
"""
from __future__ import annotations

import argparse
import os
import pstats
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from _common import (WORKERS_DIR, ForeignLoad, exit_cleanly_on_signals, free_port, machine_info, markdown_table, median,
                     python, quantile, run_job, venv_tool, write_results)

KB, MB = 1 << 10, 1 << 20
DEVICES = 8
# [program, bytes per device, warmup calls, timed calls, seconds cap]
PLAN = [["psum", 4 * KB, 5, 500, 4], ["psum", 4 * MB, 2, 60, 5], ["psum", 64 * MB, 1, 12, 10],
        ["all_gather", 4 * MB, 2, 40, 6], ["ppermute", 4 * MB, 2, 60, 5]]
QUICK_PLAN = [["psum", 4 * KB, 2, 10, 1], ["psum", 4 * MB, 1, 3, 1], ["psum", 64 * MB, 1, 2, 1],
              ["all_gather", 4 * MB, 1, 3, 1], ["ppermute", 4 * MB, 1, 3, 1]]
PROFILE_PLAN = [["psum", 4 * KB, 3, 100, 2], ["psum", 4 * MB, 1, 15, 3], ["psum", 64 * MB, 1, 4, 5],
                ["all_gather", 4 * MB, 1, 8, 4], ["ppermute", 4 * MB, 1, 15, 3]]
PROFILE_RESERVE = 75.0  # Seconds of the budget kept for the profiled meshax jobs.
JOB_SLACK = 45.0  # Seconds a job may take beyond its caps: start-up, data, first calls, checks, shutdown.
MIN_JOB_TIME = 20.0  # A job is not started with less than this left of the budget.
JAX_GOAL = 0.2  # meshax time / JAX time: at least 5x faster.
MPI_GOAL = 1.3  # meshax time / mpi4py time, from 4 MB up.
PREFIXES_TO_DROP = ("MESHAX_", "JAX_", "PMI_", "XLA_FLAGS", "MPI4PY_")


@dataclass
class Framework:
    name: str
    commands: Callable[[int, int, list[str]], list[list[str]]]  # (N, K, worker args) -> command lines
    env: Callable[[int, int], dict[str, str]]


def _clean_env() -> dict[str, str]:
    """The environment without variables that would reconfigure the frameworks."""
    return {k: v for k, v in os.environ.items() if not k.startswith(PREFIXES_TO_DROP)}


def _meshax_commands(n: int, k: int, args: list[str]) -> list[list[str]]:
    worker = [python(), str(WORKERS_DIR / "coll_meshax.py"), *args]
    if n == 1:
        return [worker]
    address = f"localhost:{free_port()}"
    return [["env", f"MESHAX_COORDINATOR_ADDRESS={address}", f"MESHAX_NUM_PROCESSES={n}", f"MESHAX_PROCESS_ID={i}",
             *worker] for i in range(n)]


def _jax_commands(n: int, k: int, args: list[str]) -> list[list[str]]:
    worker = [python(), str(WORKERS_DIR / "coll_jax.py"), *args]
    if n == 1:
        return [worker]
    address = f"localhost:{free_port()}"
    return [[*worker, "--address", address, "--process-id", str(i), "--processes", str(n)] for i in range(n)]


def _mpi4py_commands(n: int, k: int, args: list[str]) -> list[list[str]]:
    worker = [python(), str(WORKERS_DIR / "coll_mpi4py.py"), *args, "--local-devices", str(k)]
    return [worker] if n == 1 else [[venv_tool("mpiexec"), "-n", str(n), *worker]]


FRAMEWORKS = [
    Framework("meshax", _meshax_commands, lambda n, k: dict(_clean_env(), MESHAX_NUM_CPU_DEVICES=str(k))),
    Framework("JAX", _jax_commands, lambda n, k: dict(_clean_env(), JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(k))),
    Framework("mpi4py", _mpi4py_commands, lambda n, k: _clean_env()),
]


# --------------------------------------------------------------------------
# Running the jobs
# --------------------------------------------------------------------------


def combine(records: list[dict[str, Any]], n: int) -> list[dict[str, Any]] | None:
    """Per program: per call the max over processes (only calls every process finished)."""
    if len(records) != n:
        return None
    header = {key: value for key, value in records[0].items() if key not in ("entries", "complete", "rank")}
    combined = []
    for items in zip(*(r["entries"] for r in records)):

        def slowest(key: str) -> list[float]:
            return [max(values) for values in zip(*(item[key] for item in items))]

        combined.append({**header, **items[0], "times": slowest("times"), "warmup_times": slowest("warmup_times"),
                         "correct": all(i["correct"] for i in items), "checked": min(i["checked"] for i in items),
                         "complete": all(i["complete"] for i in items)})
    return combined


def run_cell(fw: Framework, n: int, k: int, plan: list[list[Any]], timeout: float,
             profile_dir: str | None = None, label: str = "") -> dict[tuple[str, int], dict[str, Any]]:
    """One job: every program of `plan` for one framework and layout; its measurements by (program, bytes)."""
    args = ["--plan", _json(plan), "--budget", f"{timeout + 10:.0f}"]
    if profile_dir is not None:
        args += ["--profile", profile_dir]
    job = run_job(fw.commands(n, k, args), timeout=timeout, env=fw.env(n, k))
    entries = combine(job.records, n) or []
    status = f"done in {job.exit_time - job.spawn_time:.1f} s" if job.ok else f"FAILED ({job.failure()})"
    print(f"[{n}x{k} {fw.name}{', ' + label if label else ''}] {status}", file=sys.stderr, flush=True)
    cells = {}
    for entry in entries:
        if not job.ok:
            entry["complete"] = False
        cells[(entry["program"], entry["bytes"])] = entry
    return cells


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


def run_all(layouts: list[tuple[int, int]], plan: list[list[Any]], budget: float, frameworks: list[Framework],
            passes: int) -> dict[tuple[int, int, str], dict]:
    """Every (layout, framework) job, `passes` times (frameworks in alternating order); measurements pooled."""
    deadline = time.monotonic() + budget
    cells: dict[tuple[int, int, str], dict] = {(n, k, fw.name): {} for n, k in layouts for fw in frameworks}
    per_job = sum(float(p[4]) for p in plan) + JOB_SLACK
    for round_ in range(passes):
        for n, k in layouts:
            for fw in (frameworks if round_ % 2 == 0 else frameworks[::-1]):
                remaining = deadline - time.monotonic()
                if remaining < MIN_JOB_TIME:
                    print(f"[{n}x{k} {fw.name}] pass {round_ + 1} skipped: time budget used up", file=sys.stderr,
                          flush=True)
                    continue
                found = run_cell(fw, n, k, plan, min(per_job, remaining), label=f"pass {round_ + 1}/{passes}")
                pool(cells[(n, k, fw.name)], found)
    return cells


def pool(into: dict[tuple[str, int], dict[str, Any]], more: dict[tuple[str, int], dict[str, Any]]) -> None:
    """Add one job's measurements to those of earlier passes (same program and size)."""
    for key, cell in more.items():
        if key not in into:
            into[key] = dict(cell, passes=1)
            continue
        old = into[key]
        old["times"] = old["times"] + cell["times"]
        old["warmup_times"] = old["warmup_times"] + cell["warmup_times"]
        old["correct"] = old["correct"] and cell["correct"]
        old["complete"] = old["complete"] and cell["complete"]
        old["checked"] += cell["checked"]
        old["passes"] += 1


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def _size(nbytes: int) -> str:
    return f"{nbytes // MB} MB" if nbytes >= MB else f"{nbytes // KB} KB"


def _time(seconds: float) -> str:
    if seconds != seconds:
        return "n/a"
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms" if seconds < 1 else \
        f"{seconds:.2f} s"


def _median(cell: dict | None) -> float:
    """Median timed call; the warm-up calls' median if none was timed; NaN if nothing ran."""
    if not cell:
        return float("nan")
    return median(cell["times"] or cell["warmup_times"])


def _cell(cell: dict | None) -> str:
    if not cell:
        return "n/a"
    mark = "" if cell["complete"] else " †"
    wrong = "" if cell["correct"] else " **WRONG**"
    values = cell["times"]
    if not values:
        return f"≈{_time(median(cell['warmup_times']))} (warm-up only){mark}{wrong}" if cell["warmup_times"] \
            else f"none{mark}"
    spread = f"{_time(quantile(values, 0.25))}–{_time(quantile(values, 0.75))}"
    return f"**{_time(median(values))}** ({spread}, {len(values)}){mark}{wrong}"


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and a == a and b == b else float("nan")


def _fmt_ratio(r: float) -> str:
    return "n/a" if r != r else f"{r:.3f}" if r < 0.1 else f"{r:.2f}" if r < 10 else f"{r:,.0f}"


def _goal(r: float, limit: float, applies: bool = True) -> str:
    if not applies:
        return "—"
    if r != r:
        return "n/a"
    return "yes" if r <= limit else "**no**"


def _program(program: str) -> str:
    return {"psum": "psum", "all_gather": "all_gather (tiled)", "ppermute": "ppermute (ring)"}[program]


def main_table(cells: dict, layouts: list[tuple[int, int]], plan: list[list[Any]]) -> str:
    headers = ["layout", "program", "per device", "meshax", "JAX", "mpi4py", "meshax / JAX", "meshax / mpi4py",
               "≥5x faster than JAX", "≤1.3x mpi4py (≥4 MB)", "JAX / mpi4py"]
    rows = []
    for n, k in layouts:
        for program, nbytes, *_ in plan:
            key = (program, nbytes)
            m, j, r = (cells.get((n, k, name), {}).get(key) for name in ("meshax", "JAX", "mpi4py"))
            vs_jax, vs_mpi = _ratio(_median(m), _median(j)), _ratio(_median(m), _median(r))
            rows.append([f"{n}x{k}", _program(program), _size(nbytes), _cell(m), _cell(j), _cell(r),
                         _fmt_ratio(vs_jax), _fmt_ratio(vs_mpi), _goal(vs_jax, JAX_GOAL),
                         _goal(vs_mpi, MPI_GOAL, nbytes >= 4 * MB), _fmt_ratio(_ratio(_median(j), _median(r)))])
    return markdown_table(headers, rows)


def first_call_table(cells: dict, layouts: list[tuple[int, int]], plan: list[list[Any]]) -> str:
    """The first call of each program (meshax: trace; JAX: compile), for context."""
    headers = ["layout"] + [f"{_program(p)} {_size(b)}: meshax / JAX" for p, b, *_ in plan]
    rows = []
    for n, k in layouts:
        row = [f"{n}x{k}"]
        for program, nbytes, *_ in plan:
            firsts = []
            for name in ("meshax", "JAX"):
                cell = cells.get((n, k, name), {}).get((program, nbytes))
                firsts.append(_time(cell["warmup_times"][0]) if cell and cell["warmup_times"] else "n/a")
            row.append(" / ".join(firsts))
        rows.append(row)
    return markdown_table(headers, rows)


def goals_summary(cells: dict, layouts: list[tuple[int, int]], plan: list[list[Any]]) -> str:
    jax_missed, mpi_missed, measured = [], [], 0
    for n, k in layouts:
        for program, nbytes, *_ in plan:
            m, j, r = (cells.get((n, k, name), {}).get((program, nbytes)) for name in ("meshax", "JAX", "mpi4py"))
            what = f"{n}x{k} {program} {_size(nbytes)}"
            vs_jax, vs_mpi = _ratio(_median(m), _median(j)), _ratio(_median(m), _median(r))
            measured += 1
            if not vs_jax <= JAX_GOAL:
                floor = _ratio(_median(j), _median(r))
                note = "; JAX is within 5x of mpi4py" if floor < 1 / JAX_GOAL else ""
                jax_missed.append(f"{what} ({_fmt_ratio(vs_jax)}{note})")
            if nbytes >= 4 * MB and not vs_mpi <= MPI_GOAL:
                mpi_missed.append(f"{what} ({_fmt_ratio(vs_mpi)})")
    missed_jax = f"missed in {len(jax_missed)} of {measured}: " + "; ".join(jax_missed)
    lines = [f"- Goal 'meshax at least 5x faster than JAX' (meshax / JAX ≤ {JAX_GOAL}): "
             + (missed_jax if jax_missed else "met everywhere"),
             f"- Goal 'within {MPI_GOAL}x of plain mpi4py from 4 MB up': "
             + (f"missed in {len(mpi_missed)}: " + "; ".join(mpi_missed) if mpi_missed else "met everywhere")]
    return "\n".join(lines)


def report(cells: dict, layouts: list[tuple[int, int]], plan: list[list[Any]], load: str, seconds: float,
           passes: int) -> str:
    caps = ", ".join(f"{p} {_size(b)}: {w} warm-up + ≤{r} calls / {c} s" for p, b, w, r, c in plan)
    jax_info = next((c for (n, k, name), row in cells.items() if name == "JAX" for c in row.values()), {})
    mpi_level = sorted({c.get("thread_level", "?") for (n, k, name), row in cells.items() if name == "mpi4py"
                        for c in row.values() if c.get("thread_level") not in (None, "none")})
    return "\n".join([
        f"## Collectives in shard_map over {DEVICES} CPU devices: meshax vs JAX vs plain mpi4py",
        "",
        f"{machine_info()}; {load}; measuring took {seconds:.0f} s",
        "",
        "Time per call: **median** (interquartile range, timed calls) — a call's time is the max over processes, "
        f"every call follows a barrier; each job ran {passes} time(s) (frameworks in alternating order) and the calls "
        "are pooled, the count is the last number in parentheses; † = a job stopped at its time limit (only what it "
        "measured is shown). "
        "Ratios are times: meshax / JAX ≤ 0.2 means meshax is at least 5x faster.",
        "",
        main_table(cells, layouts, plan),
        "",
        goals_summary(cells, layouts, plan),
        "",
        "### First call, first pass (meshax: trace + run; JAX: trace + compile + run)",
        "",
        first_call_table(cells, layouts, plan),
        "",
        "Programs: `jit(shard_map(f, mesh=make_mesh((8,), ('i',)), in_specs=P('i'), out_specs=...))` on a float32 "
        "array of 8 blocks (one per device; data are small integers, every result is checked exactly): "
        "`lax.psum(x, 'i')` (out P()), `lax.all_gather(x, 'i', tiled=True)` (out P(); JAX needs check_vma=False "
        "for that out_spec), `lax.ppermute(x, 'i', ring g→g+1)` (out P('i')). Layout NxK = N processes with K CPU "
        "devices each. meshax and JAX processes are started independently (meshax: MESHAX_* environment and "
        "initialize(); JAX: jax.distributed.initialize('localhost:PORT', N, i), CPU collectives "
        f"{jax_info.get('cpu_collectives', '?')}); N = 1: no initialize. mpi4py: `mpiexec -n N` (thread level "
        f"{'/'.join(mpi_level) or 'n/a'}), each process holding its K blocks as one (K, n) array, receive buffers "
        "allocated once: psum = `np.sum(blocks, axis=0, out=...)` + `Allreduce`; all_gather = `Allgather` of the "
        "K blocks; ppermute = `Sendrecv` of the last block to the next process + one copy shifting the other K-1; "
        "N = 1: the NumPy local work only (sum; one copy of the K blocks; the shift by copies). meshax and JAX "
        "allocate fresh results every call. JAX calls end at block_until_ready(); JAX's barrier is a compiled psum of "
        "one int32 per device (its own collectives; the coordination service's wait_at_barrier leaves processes "
        f"further apart), meshax's and mpi4py's are MPI_Barrier on the world. Caps per job: {caps} (at least 2 "
        f"timed calls per job and pass); job timeout = caps + {JOB_SLACK:.0f} s. 'JAX / mpi4py' shows whether the "
        "first goal is reachable at all: meshax cannot be 5x faster than JAX where JAX is within 5x of the "
        "plain-mpi4py floor (JAX / mpi4py < 5), unless meshax does less work than that floor (e.g. ppermute's "
        "local shifts, which meshax aliases instead of copying).",
    ])


# --------------------------------------------------------------------------
# Profiling meshax
# --------------------------------------------------------------------------


def _where(filename: str, line: int, function: str) -> str:
    """A short name for a profiled function: path under src/meshax/ (or the file name), line, function."""
    if "/src/meshax/" in filename:
        filename = filename.split("/src/meshax/")[-1].removeprefix("_src/")
    elif filename.startswith("~"):
        return function.strip("<>")
    else:
        filename = Path(filename).name
    return f"{filename}:{line}({function})"


def hot_spots(path: Path, calls: int) -> tuple[float, list[tuple[float, float, str]]]:
    """(ms per call of the whole timed call, [(own ms per call, calls per call, function)] by own time).

    Own time of a Python function includes the C calls it makes that cProfile does not see as functions
    (NumPy ufuncs, mpi4py's MPI calls), so e.g. a list comprehension calling np.add owns the additions.
    """
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    per = max(calls, 1)
    total = max((cum for (f, _, name), (_, _, _, cum, _) in stats.items()
                 if f.endswith("coll_meshax.py") and name == "call"), default=float("nan"))
    rows = [(own / per * 1e3, ncalls / per, _where(f, line, name))
            for (f, line, name), (_, ncalls, own, _, _) in stats.items()
            if not f.endswith(("coll_meshax.py", "coll_common.py"))]
    rows.sort(reverse=True)
    return total / per * 1e3, rows


def profile(layouts: list[tuple[int, int]], plan: list[list[Any]], budget: float,
            top: int) -> dict[tuple[int, int], dict[tuple[str, int], tuple[int, float, float, list]]]:
    """Run the meshax jobs with cProfile around the timed calls (process 0's statistics).

    Returns {layout: {(program, bytes): (timed calls, median ms, profiled ms per call, hot spots)}}.
    """
    deadline = time.monotonic() + budget
    per_job = sum(float(p[4]) for p in plan) + JOB_SLACK
    found: dict[tuple[int, int], dict] = {}
    for n, k in layouts:
        remaining = deadline - time.monotonic()
        if remaining < MIN_JOB_TIME:
            print(f"[{n}x{k} meshax, profiled] skipped: time budget used up", file=sys.stderr, flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="meshax-coll-prof-") as tmp:
            cells = run_cell(FRAMEWORKS[0], n, k, plan, min(per_job, remaining), profile_dir=tmp, label="profiled")
            found[(n, k)] = {}
            for program, nbytes, *_ in plan:
                cell, path = cells.get((program, nbytes)), Path(tmp) / f"0-{program}-{nbytes}.prof"
                if not cell or not cell["times"] or not path.exists():
                    continue
                calls = len(cell["times"])
                total, rows = hot_spots(path, calls)
                found[(n, k)][(program, nbytes)] = (calls, _median(cell) * 1e3, total, rows[:top])
    return found


def profile_text(found: dict, plan: list[list[Any]], shown: int) -> str:
    """Markdown: per layout and program, the functions with the most own time per call (process 0)."""
    headers = ["layout", "program", "per device", "calls", "median / mean per call, profiled",
               f"top {shown} functions by own time per call (ms, share of the profiled call)"]
    rows = []
    for (n, k), programs in found.items():
        for program, nbytes, *_ in plan:
            entry = programs.get((program, nbytes))
            if entry is None:
                continue
            calls, med, total, spots = entry
            spots_text = "; ".join(f"`{name}` {own:.2f} ({own / total:.0%})" for own, _, name in spots[:shown])
            rows.append([f"{n}x{k}", _program(program), _size(nbytes), str(calls), f"{med:.2f} / {total:.2f} ms",
                         spots_text])
    return markdown_table(headers, rows)


def print_profiles(found: dict, top: int) -> None:
    for (n, k), programs in found.items():
        for (program, nbytes), (calls, med, total, spots) in programs.items():
            print(f"\n### meshax {n}x{k} {program} {_size(nbytes)}: {calls} timed calls, median {med:.2f} ms, "
                  f"{total:.2f} ms per call under cProfile (process 0)")
            print(f"{'own ms':>9} {'calls':>7}  function")
            for own, ncalls, name in spots[:top]:
                print(f"{own:9.3f} {ncalls:7.1f}  {name}")


# --------------------------------------------------------------------------


def _layouts(text: str) -> list[tuple[int, int]]:
    layouts = []
    for item in text.split(","):
        n, k = (int(v) for v in item.lower().split("x"))
        if n * k != DEVICES:
            raise SystemExit(f"layout {item}: processes x devices must be {DEVICES}")
        layouts.append((n, k))
    return layouts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for all jobs together")
    parser.add_argument("--quick", action="store_true", help="few calls per program (smoke test)")
    parser.add_argument("--layouts", default="1x8,2x4,4x2", help="comma-separated NxK, N*K = 8")
    parser.add_argument("--output", default="collectives", help="results/<OUTPUT>.md (default: collectives)")
    parser.add_argument("--passes", type=int, default=2,
                        help="run every job this many times, frameworks in alternating order, and pool the calls")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled meshax jobs")
    parser.add_argument("--profile-only", action="store_true",
                        help="only the profiled meshax jobs; print their hot functions (no report file)")
    parser.add_argument("--top", type=int, default=20, help="functions per printed profile")
    args = parser.parse_args()
    exit_cleanly_on_signals()
    layouts = _layouts(args.layouts)
    plan = QUICK_PLAN if args.quick else PLAN
    profile_plan = QUICK_PLAN if args.quick else PROFILE_PLAN
    if args.profile_only:
        found = profile(layouts, profile_plan, args.budget, args.top)
        print_profiles(found, args.top)
        return 0 if found else 1
    machine_info()  # Taken now, so that its load average is from before the benchmark.
    load = ForeignLoad()
    started = time.monotonic()
    reserve = 0.0 if args.no_profile else min(PROFILE_RESERVE, args.budget / 4)
    cells = run_all(layouts, plan, args.budget - reserve, FRAMEWORKS, args.passes)
    measured_for = time.monotonic() - started
    load_text = load.describe()
    found = {} if args.no_profile else profile(layouts, profile_plan, args.budget - measured_for, args.top)
    text = report(cells, layouts, plan, load_text, measured_for, args.passes)
    if found:
        text += "\n\n" + "\n".join([
            "### Where meshax's time goes (cProfile of the timed calls, process 0, separate run)",
            "",
            profile_text(found, profile_plan, 4),
            "",
            "Own time of a function includes the C calls that cProfile does not list separately: NumPy ufuncs "
            "and array constructors (np.add, np.concatenate, np.zeros_like's fill) and mpi4py's MPI calls "
            "(comm.Allreduce, Allgatherv, Waitall), and freeing earlier results when it happens there. Shares are of "
            "the mean profiled call (cProfile adds overhead to Python-heavy calls such as the 4 KB ones). Paths are "
            "under src/meshax/_src/.",
        ])
    print(text)
    print(f"\nwritten to {write_results(args.output, text)}", file=sys.stderr)
    if found:
        print_profiles(found, args.top)
    measured = [c for row in cells.values() for c in row.values()]
    ok = all(c["correct"] for c in measured) and len(measured) == len(layouts) * len(FRAMEWORKS) * len(plan)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
