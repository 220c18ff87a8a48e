"""Checkpoint worker for bench_checkpoint.py: save and restore float32 parameters, timing each step.

    MESHAX_COORDINATOR_ADDRESS=HOST:PORT MESHAX_NUM_PROCESSES=N MESHAX_PROCESS_ID=I MESHAX_NUM_CPU_DEVICES=K \
        python ckpt_worker.py --backend meshax --dir DIR [--mib 1024 --arrays 4 --repeats 3 --budget S]
    JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=8 python ckpt_worker.py --backend orbax --ocdbt 0|1 --dir DIR ...
    python ckpt_worker.py --backend raw --dir DIR ...

The parameters are --arrays float32 matrices of 8192 columns, --mib MiB in all, sharded P('data', None)
over Mesh(devices, ('data',)), each shard's values drawn from its own seeded generator (the same
values under meshax and JAX). After an untimed save and restore of a small tree (imports and
first calls), each repeat: save (timed from a barrier until save returns on every
process), then, after the checkpoint's pages are dropped from the page cache
(posix_fadvise DONTNEED, so restores read the disk), three restores, each timed the same way: onto
the same sharding, onto Mesh((4, 2), ('a', 'b')) with P('a', 'b') and onto P(None, 'data') (every
process then needs a column slab of every chunk). The restored values are checked against the
saved ones (outside the timing). Peak extra memory of each step is the rise of the process's
peak resident set (VmHWM, reset before the step through /proc/self/clear_refs) over its resident
set before the step. `raw` writes the same number of bytes with 16 MiB `write` calls and an
`fsync` in --streams threads (each its own file), drops them from the cache and reads them back
into a preallocated buffer: the disk's speed. Records go to $BENCH_RECORD_DIR/<rank>.json after every repeat.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import os
import shutil
import sys
import time
from typing import Any, Callable

import numpy as np

from records import RecordWriter
from worker_support import start_watchdog

COLUMNS = 8192
BLOCK = 16 << 20


def drop_cache(path: str) -> None:
    """Evict every file under `path` from the page cache, so the next read comes from the disk."""
    for root, _, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def measured(step: Callable[[], Any]) -> tuple[Any, float, int]:
    """(result, seconds, peak extra bytes) of running `step`."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # memory freed by earlier steps must not hide this one's
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident set
    before = _status("VmRSS")
    start = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - start
    return result, seconds, max(0, _status("VmHWM") - before)


def shard_values(index: tuple[slice, ...], array: int, rows: int) -> np.ndarray:
    """The values of one shard: a generator seeded by the array and the shard's first row."""
    start = index[0].start or 0
    stop = index[0].stop if index[0].stop is not None else rows
    rng = np.random.default_rng([array, start])
    return rng.random((stop - start, COLUMNS), dtype=np.float32)


def run_raw(args: argparse.Namespace, writer: RecordWriter) -> None:
    """dd's write + fsync and read of the same bytes, in --streams threads each with its own file."""
    from concurrent.futures import ThreadPoolExecutor

    data = np.random.default_rng(0).random(args.mib << 18, dtype=np.float32)
    into = np.empty_like(data)
    bounds = [len(data) * i // args.streams for i in range(args.streams + 1)]
    spans = list(zip(bounds[:-1], bounds[1:]))
    paths = [os.path.join(args.dir, f"raw-{i}.bin") for i in range(args.streams)]
    pool = ThreadPoolExecutor(args.streams)

    def write(i: int) -> None:
        raw = memoryview(data[spans[i][0]:spans[i][1]].view(np.uint8))
        fd = os.open(paths[i], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for start in range(0, len(raw), BLOCK):
            block = raw[start:start + BLOCK]
            while block:
                block = block[os.write(fd, block):]
        os.fsync(fd)
        os.close(fd)

    def read(i: int) -> None:
        target = memoryview(into[spans[i][0]:spans[i][1]].view(np.uint8))
        fd = os.open(paths[i], os.O_RDONLY)
        done = 0
        while done < len(target):
            done += os.preadv(fd, [target[done:done + BLOCK]], done)
        os.close(fd)

    for _ in range(args.repeats):
        _, seconds, _ = measured(lambda: list(pool.map(write, range(args.streams))))
        writer.record["save"].append(seconds)
        drop_cache(args.dir)
        _, seconds, _ = measured(lambda: list(pool.map(read, range(args.streams))))
        writer.record["restore_same"].append(seconds)
        assert np.array_equal(into, data)
        for path in paths:
            os.remove(path)
        writer.write(complete=False, every=0)


def run_meshax(args: argparse.Namespace, writer: RecordWriter) -> None:
    import meshax
    from meshax import checkpoint
    from meshax.experimental import multihost_utils
    from meshax.sharding import NamedSharding, PartitionSpec as P

    meshax.distributed.initialize()
    rank = meshax.process_index()
    writer.record["rank"] = rank
    rows = (args.mib << 18) // COLUMNS // args.arrays
    shape = (rows, COLUMNS)
    mesh = meshax.make_mesh((meshax.device_count(),), ("data",))
    grid = meshax.make_mesh((4, meshax.device_count() // 4), ("a", "b"))
    saved = NamedSharding(mesh, P("data", None))
    params = {f"w{i}": meshax.make_array_from_callback(shape, saved, lambda idx, i=i: shard_values(idx, i, rows))
              for i in range(args.arrays)}
    writer.record["local_bytes"] = sum(b.nbytes for a in params.values() for b in a.local_boxes().values())
    barriers = iter(range(1 << 30))

    def barrier() -> None:
        multihost_utils.sync_global_devices(f"ckpt-bench-{next(barriers)}")

    targets = {"restore_same": saved, "restore_reshard": NamedSharding(grid, P("a", "b")),
               "restore_transpose": NamedSharding(mesh, P(None, "data"))}
    warm = os.path.join(args.dir, "meshax-warmup")  # imports and first-call costs, once per job, untimed
    checkpoint.save(warm, {"x": meshax.device_put(np.ones((8, 8), np.float32), saved)})
    checkpoint.restore(warm, {"x": saved})
    barrier()
    if rank == 0:
        shutil.rmtree(warm)
    for repeat in range(args.repeats):
        path = os.path.join(args.dir, f"meshax-{repeat}")
        barrier()
        _, seconds, extra = measured(lambda: checkpoint.save(path, params))
        writer.record["save"].append(seconds)
        writer.record["save_extra"].append(extra)
        for name, sharding in targets.items():
            if rank == 0:
                drop_cache(path)
            barrier()
            target = {k: meshax.ShapeDtypeStruct(shape, np.float32, sharding=sharding) for k in params}
            result, seconds, extra = measured(lambda: checkpoint.restore(path, target))
            writer.record[name].append(seconds)
            writer.record[name + "_extra"].append(extra)
            _check(params, result, sharding)
            del result
        barrier()
        if rank == 0:
            shutil.rmtree(path)
        writer.write(complete=False, every=0)


def _check(params: dict[str, Any], result: dict[str, Any], sharding: Any) -> None:
    """Each restored local box equals the saved values wherever this process holds the saved rows
    (all of them for the same and the 4x2 sharding, this process's half for P(None, 'data'))."""
    for name, array in result.items():
        assert array.sharding == sharding, (name, array.sharding)
        saved = params[name].local_boxes()
        for ((r0, r1), (c0, c1)), buffer in array.local_boxes().items():
            for ((a, b), _), source in saved.items():
                lo, hi = max(r0, a), min(r1, b)
                if lo < hi:
                    np.testing.assert_array_equal(buffer[lo - r0:hi - r0], source[lo - a:hi - a, c0:c1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("meshax", "orbax", "raw"), required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--arrays", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ocdbt", type=int, default=0)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--budget", type=float, default=600)
    args = parser.parse_args()
    start_watchdog(args.budget, f"ckpt_worker {args.backend}")
    steps = [f"restore_{kind}{extra}" for kind in ("same", "reshard", "transpose") for extra in ("", "_extra")]
    writer = RecordWriter({"rank": 0, "backend": args.backend, "save": [], "save_extra": [],
                           **{step: [] for step in steps}})
    if args.backend == "raw":
        run_raw(args, writer)
    elif args.backend == "meshax":
        run_meshax(args, writer)
    else:
        from ckpt_orbax import run_orbax

        run_orbax(args, writer, measured, drop_cache, shard_values, COLUMNS)
    writer.write(complete=True)
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
