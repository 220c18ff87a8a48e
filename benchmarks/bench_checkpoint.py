"""Checkpoints: save and restore 1 GiB of float32 parameters, meshax vs Orbax, against the disk's own speed.

    python benchmarks/bench_checkpoint.py [--mib 1024] [--arrays 4] [--rounds 3] [--repeats 1] [--layout 2x4]
                                          [--only raw,meshax,orbax,orbax_ocdbt] [--dir DIR] [--budget 1200]
                                          [--output checkpoint]

The parameters are 4 float32 matrices of 8192 columns (1 GiB in all, random values that do not
compress), sharded P('data', None) over 8 CPU devices. Jobs (workers/ckpt_worker.py), each run in
each of --rounds rounds (the jobs taking turns, their order reversed every other round, since a shared
disk's speed drifts), with --repeats repeats per job:

* `raw`: one process writes the same number of bytes with 16 MiB `write` calls and an `fsync`, and
  reads them back from the disk into a preallocated buffer (dd's speed); `raw_parallel` does the same
  in one stream (thread and file) per meshax process, as meshax's processes write and read side by
  side. The faster of the two is the limit the goals refer to;
* `meshax`: N processes x K devices (default 2x4) call meshax.checkpoint.save, then restore onto the
  same sharding, onto Mesh((4, 2), ('a', 'b')) P('a', 'b'), and onto P(None, 'data');
* `orbax`, `orbax_ocdbt`: JAX with 8 CPU devices in one process, orbax-checkpoint's
  PyTreeCheckpointHandler with use_ocdbt=False (Zarr, Orbax's default zstd compression) and with
  its default OCDBT format, the same saves and restores.

Before every restore the checkpoint's pages are dropped from the page cache (posix_fadvise), so
restores read the disk. A step's time is the slowest process's, from a barrier until the call
returns; cells are the median over all repeats of all rounds, and throughput is bytes / time. Peak extra memory is the
rise of a process's peak resident set during the step over its resident set before it, as a
multiple of the parameter bytes that process holds (the restored arrays count: a restore needs 1x).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from typing import Any

from _common import (WORKERS_DIR, ForeignLoad, chosen, clean_env, exit_cleanly_on_signals, failures_section, finish,
                     free_port, machine_info, markdown_table, median, parse_layouts, python, run_job)

JOBS = ("raw", "raw_parallel", "meshax", "orbax", "orbax_ocdbt")
RAW = ("raw", "raw_parallel")
LABELS = {"raw": "raw disk, one stream (dd)", "raw_parallel": "raw disk, one stream per meshax process",
          "meshax": "meshax", "orbax": "Orbax, use_ocdbt=False",
          "orbax_ocdbt": "Orbax, default (OCDBT)"}
STEPS = {"save": "save", "restore_same": "restore, same sharding", "restore_reshard": "restore onto 4x2 P('a','b')",
         "restore_transpose": "restore onto P(None,'data')"}
GOALS = {"save": "≥ 60 % of raw write", "restore_same": "≥ 40 % of raw read",
         "restore_reshard": "≤ 1.5x same-sharding restore", "restore_transpose": "≤ 1.5x same-sharding restore"}


def commands(job: str, args: argparse.Namespace, directory: str) -> tuple[list[list[str]], dict[str, str]]:
    worker = [python(), str(WORKERS_DIR / "ckpt_worker.py"), "--dir", directory, "--mib", str(args.mib),
              "--arrays", str(args.arrays), "--repeats", str(args.repeats), "--budget", str(args.budget)]
    n, k = args.layout
    env = clean_env(1)
    if job in RAW:
        return [[*worker, "--backend", "raw", "--streams", str(n if job == "raw_parallel" else 1)]], env
    if job.startswith("orbax"):
        env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES="8")
        return [[*worker, "--backend", "orbax", "--ocdbt", str(int(job == "orbax_ocdbt"))]], env
    env["MESHAX_NUM_CPU_DEVICES"] = str(k)
    address = f"localhost:{free_port()}"
    return [["env", f"MESHAX_COORDINATOR_ADDRESS={address}", f"MESHAX_NUM_PROCESSES={n}", f"MESHAX_PROCESS_ID={i}",
             *worker, "--backend", "meshax"] for i in range(n)], env


def combine(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per step and repeat the slowest process's time and the largest extra memory / local bytes."""
    out: dict[str, Any] = {}
    for step in STEPS:
        times = [max(values) for values in zip(*(r[step] for r in records))]
        extras = [max(e / r["local_bytes"] for e, r in zip(values, records))
                  for values in zip(*(r.get(step + "_extra", []) for r in records))] if records[0].get("local_bytes") \
            else []
        out[step] = {"times": times, "extra": extras}
    return out


def gib_per_s(mib: int, seconds: float) -> str:
    return f"{mib / 1024 / seconds:.2f} GiB/s" if seconds == seconds and seconds > 0 else "n/a"


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace, elapsed: float, foreign: str,
           failures: list[str]) -> str:
    raws = [results[job] for job in RAW if job in results]
    raw_time = {"save": min((median(r["save"]["times"]) for r in raws), default=float("nan")),
                "read": min((median(r["restore_same"]["times"]) for r in raws), default=float("nan"))}
    rows = []
    for job in JOBS:
        if job not in results or job in RAW:
            continue
        r = results[job]
        same = median(r["restore_same"]["times"])
        for step, label in STEPS.items():
            seconds = median(r[step]["times"])
            if step == "save":
                versus = f"{raw_time['save'] / seconds:.0%} of the raw write"
            elif step == "restore_same":
                versus = f"{raw_time['read'] / seconds:.0%} of the raw read"
            else:
                versus = f"{seconds / same:.2f}x same-sharding restore"
            extra = max(r[step]["extra"]) if r[step]["extra"] else float("nan")
            rows.append([LABELS[job], label, f"**{seconds * 1e3:.0f} ms**", gib_per_s(args.mib, seconds), versus,
                         f"{extra:.2f}x"])
    for position, job in enumerate(job for job in RAW if job in results):
        write, read = (median(results[job][step]["times"]) for step in ("save", "restore_same"))
        rows.insert(position, [LABELS[job], "write + fsync / read", f"**{write * 1e3:.0f} / {read * 1e3:.0f} ms**",
                               f"{gib_per_s(args.mib, write)} / {gib_per_s(args.mib, read)}", "—", "—"])
    n, k = args.layout
    parts = [
        "## Checkpoints: save and restore, meshax vs Orbax, against the disk",
        "",
        machine_info() + f"; whole run {elapsed:.0f} s{foreign}",
        "",
        f"{args.mib} MiB of float32 parameters ({args.arrays} matrices of 8192 columns, random values), sharded "
        f"P('data', None) over 8 CPU devices: meshax as {n} processes x {k} devices, Orbax (orbax-checkpoint "
        f"{_version('orbax-checkpoint')}) in one JAX process with 8 devices. Cells: median of {args.rounds} x "
        f"{args.repeats} repeats (the jobs taking turns) of the slowest process's time; before each restore the "
        "checkpoint is dropped from the page cache, so restores read the disk. Extra memory: the largest rise of "
        "a process's peak resident set during the step, as a multiple of the parameter bytes the process holds "
        "(a restore's result is 1x). "
        "Goals for meshax: save " + GOALS["save"] + ", restore " + GOALS["restore_same"] + ", resharded restore "
        + GOALS["restore_reshard"] + ", peak extra memory ≤ 1.5x the local shard bytes.",
        "",
        markdown_table(["library", "step", "time", "throughput", "versus", "peak extra memory"], rows),
    ]
    return "\n".join(parts + failures_section(failures))


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - any failure just means "unknown".
        return "not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--arrays", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--layout", default="2x4")
    parser.add_argument("--only", default=",".join(JOBS))
    parser.add_argument("--dir", default=None, help="where the checkpoints go (default: a new folder in /tmp)")
    parser.add_argument("--budget", type=float, default=1200)
    parser.add_argument("--output", default="checkpoint")
    args = parser.parse_args()
    args.layout = parse_layouts(args.layout)[0]
    jobs = chosen(parser, args.only, JOBS, "job")
    exit_cleanly_on_signals()
    machine_info()
    foreign_load = ForeignLoad()
    start = time.monotonic()
    directory = tempfile.mkdtemp(prefix="meshax-bench-ckpt-", dir=args.dir)
    results: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    try:
        for round_ in range(args.rounds):  # the jobs take turns, so that the disk's changing speed hits all alike
            for job in (jobs if round_ % 2 == 0 else jobs[::-1]):
                label = f"{job} round {round_ + 1}/{args.rounds}"
                cmds, env = commands(job, args, directory)
                result = run_job(cmds, timeout=args.budget, env=env)
                if not result.ok or len(result.records) != len(cmds) or not all(r.get("complete")
                                                                                for r in result.records):
                    failures.append(f"[{label}] failed: {result.failure()}\n"
                                    + "\n".join(e[-2000:] for e in result.errors))
                    print(f"[{label}] FAILED: {result.failure()}", file=sys.stderr, flush=True)
                    continue
                found = combine(result.records)
                pooled = results.setdefault(job, {step: {"times": [], "extra": []} for step in STEPS})
                for step, values in found.items():
                    pooled[step]["times"] += values["times"]
                    pooled[step]["extra"] += values["extra"]
                print(f"[{label}] done in {result.exit_time - result.spawn_time:.1f} s: " + ", ".join(
                    f"{step} {median(v['times']) * 1e3:.0f} ms" for step, v in found.items() if v["times"]),
                    file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    foreign = f"; {foreign_load.describe()}"
    return finish(args.output, report(results, args, time.monotonic() - start, foreign, failures), failures)


if __name__ == "__main__":
    sys.exit(main())
