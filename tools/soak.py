"""Soak test: a mixed workload on 4 processes for --minutes M, checking every result and the memory.

    python tools/soak.py [--minutes 10] [--processes 4] [--cpu-devices 2] [--seed 0]

Each process runs, step after step, collectives in shard_map (psum, all_gather, ppermute) on blocks of random
sizes and dtypes, reshards between random shardings of two meshes, and jit calls, and checks every result
against NumPy. Sizes come from a fixed menu (47 block sizes from 2 bytes to 2 MiB per device, results up to
16 MiB, so the buffer pool sees many size classes): like a real program, the soak has a bounded set of shapes,
each traced once (jit keeps a trace per shape; endless new shapes would grow that cache, which is not a leak).
It records each process's resident set size (RSS) after 1 minute and at the end, and fails if any result is
wrong, a process fails, or any process's RSS at the end exceeds 1.5x its 1-minute value. Run it under `nice`
on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

GROWTH_LIMIT = 1.5
ROWS = sorted({int(2 ** (k / 2.5)) for k in range(48)} | {1 << 19})  # per device; the menu of block sizes
EDGES = [1, 3, 8, 17, 32, 63]  # per device; the menu of 2-D array sides
FIRST_SAMPLE = 60.0  # seconds
MARK = "SOAK_RESULT "


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def worker(minutes: float, seed: int) -> None:
    """One process of the soak job (started by `meshax launch`); prints one MARK line with its numbers."""
    import numpy as np

    import meshax
    import meshax.numpy as jnp
    from meshax import lax
    from meshax.experimental import multihost_utils
    from meshax._src import buffers
    from meshax.sharding import NamedSharding, PartitionSpec as P

    meshax.distributed.initialize()
    n = meshax.device_count()
    mesh1 = meshax.make_mesh((n,), ("x",))
    mesh2 = meshax.make_mesh((n // 2, 2), ("a", "b"))
    shardings = [NamedSharding(mesh1, P("x")), NamedSharding(mesh1, P(None, "x")), NamedSharding(mesh1, P()),
                 NamedSharding(mesh2, P("a", "b")), NamedSharding(mesh2, P("b", "a")),
                 NamedSharding(mesh2, P(("a", "b")))]
    shift = [(i, (i + 1) % n) for i in range(n)]
    programs = {
        "psum": meshax.jit(meshax.shard_map(lambda b: lax.psum(b, "x"), mesh=mesh1, in_specs=P("x"),
                                            out_specs=P())),
        "all_gather": meshax.jit(meshax.shard_map(lambda b: lax.all_gather(b, "x", tiled=True), mesh=mesh1,
                                                  in_specs=P("x"), out_specs=P(), check_vma=False)),
        "ppermute": meshax.jit(meshax.shard_map(lambda b: lax.ppermute(b, "x", shift), mesh=mesh1,
                                                in_specs=P("x"), out_specs=P("x"))),
    }
    expected = {
        "psum": lambda v: v.reshape(n, -1, *v.shape[1:]).sum(axis=0, dtype=v.dtype),
        "all_gather": lambda v: v,
        "ppermute": lambda v: np.roll(v.reshape(n, -1, *v.shape[1:]), 1, axis=0).reshape(v.shape),
    }
    matmul = meshax.jit(lambda a, b: jnp.tanh(a) @ b + 1.0)
    rng = np.random.default_rng(seed)  # the same stream on every process: they agree on every choice
    me, errors, steps = meshax.process_index(), [], 0
    started = time.monotonic()
    rss_first = pool_first = None

    def check(name: str, got: object, want: np.ndarray, exact: bool = True) -> None:
        for shard in got.addressable_shards:
            piece, reference = np.asarray(shard.data), want[shard.index]
            ok = np.array_equal(piece, reference) if exact else np.allclose(piece, reference, rtol=1e-4, atol=1e-4)
            if not ok and len(errors) < 10:
                errors.append(f"step {steps}: {name} {want.shape} {want.dtype} wrong on {shard.device}")

    while True:
        steps += 1
        dtype = rng.choice([np.float32, np.int32, np.float16])
        rows = n * int(rng.choice(ROWS))
        value = rng.integers(-8, 8, size=(rows,)).astype(dtype)
        x = meshax.device_put(value, shardings[0])
        kind = ("psum", "all_gather", "ppermute")[steps % 3]
        check(kind, programs[kind](x), expected[kind](value))
        cols = n * int(rng.choice(EDGES))
        grid = rng.integers(-8, 8, size=(n * int(rng.choice(EDGES)), cols)).astype(np.float32)
        y = meshax.device_put(grid, shardings[int(rng.integers(len(shardings)))])
        for _ in range(2):
            y = meshax.device_put(y, shardings[int(rng.integers(len(shardings)))])
            check("reshard", y, grid)
        weights = (rng.standard_normal((cols, 8)) / 8).astype(np.float32)
        check("jit matmul", matmul(y, weights), np.tanh(grid) @ weights + 1.0, exact=False)
        elapsed = time.monotonic() - started
        if rss_first is None and elapsed >= min(FIRST_SAMPLE, minutes * 60):
            rss_first, pool_first = rss_bytes(), buffers.pooled_bytes()
        done = multihost_utils.process_allgather(np.int32(elapsed >= minutes * 60)).max()
        if done:
            break
    report = {"process": me, "steps": steps, "errors": errors, "rss_1min": rss_first, "rss_end": rss_bytes(),
              "pool_1min": pool_first, "pool_end": buffers.pooled_bytes(),
              "seconds": round(time.monotonic() - started, 1)}
    print(MARK + json.dumps(report), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--cpu-devices", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.minutes, args.seed)
        return 0
    command = [sys.executable, "-m", "meshax", "launch", "-n", str(args.processes), "--cpu-devices",
               str(args.cpu_devices), "--timeout", str(args.minutes * 60 + 300), str(Path(__file__).resolve()),
               "--worker", "--minutes", str(args.minutes), "--seed", str(args.seed)]
    job = subprocess.run(command, capture_output=True, text=True)
    results = [json.loads(line.partition(MARK)[2]) for line in job.stdout.splitlines() if MARK in line]
    failures = [] if job.returncode == 0 else [f"the job exited with code {job.returncode}:\n{job.stderr[-4000:]}"]
    if len(results) != args.processes:
        failures.append(f"{len(results)} of {args.processes} processes reported")
    mib = 1 << 20
    for r in sorted(results, key=lambda r: r["process"]):
        growth = r["rss_end"] / r["rss_1min"]
        print(f"process {r['process']}: {r['steps']} steps in {r['seconds']} s, RSS {r['rss_1min'] / mib:.0f} MiB "
              f"at 1 min -> {r['rss_end'] / mib:.0f} MiB at the end ({growth:.2f}x; buffer pool "
              f"{r['pool_1min'] / mib:.0f} -> {r['pool_end'] / mib:.0f} MiB), {len(r['errors'])} wrong results")
        failures += [f"process {r['process']}: {e}" for e in r["errors"]]
        if growth > GROWTH_LIMIT:
            failures.append(f"process {r['process']}: RSS grew {growth:.2f}x (limit {GROWTH_LIMIT}x)")
    print("soak " + ("FAILED:\n" + "\n".join(failures) if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
