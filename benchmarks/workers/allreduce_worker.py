"""Allreduce worker for bench_allreduce.py.

    python allreduce_worker.py --mode meshax --address HOST:PORT --process-id I --processes N --size JSON --budget S
    mpiexec -n N python allreduce_worker.py --mode mpi4py --size JSON --budget S

Modes:

* meshax: join a meshax job (explicit coordinator), then interleave, on the same
  communicator (meshax's group of all processes *is* runtime().world):
  meshax `group.allreduce(send)` (allocates its result), meshax
  `group.allreduce(send, out=buf)` and mpi4py `world.Allreduce(send, recv, op=MPI.SUM)`.
* mpi4py: plain mpi4py under mpiexec (`from mpi4py import MPI` initialises MPI;
  MPI4PY_RC_THREAD_LEVEL selects the thread level), world.Allreduce only.

--size is [bytes, warmup_rounds, repetitions, seconds_cap]. A round calls every
variant once, in rotating order, each call after a barrier and timed on every
process. Process 0 decides each round (warmup, timed, or stop once the repetitions
are done or the time cap is spent) and broadcasts it. Every process checks the
warmup results and each call's last result against the exact sums (small
integers: exact in float32) and keeps its times in $BENCH_RECORD_DIR/<rank>.json,
rewritten as it goes, so a job killed for overrunning still leaves its measurements. The process exits with status 3 if it
runs longer than --budget seconds.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

from worker_support import start_watchdog

import numpy as np

from records import RecordWriter

Call = Callable[[], np.ndarray]
STOP, WARMUP, TIMED = 0, 1, 2
MIN_TIMED_ROUNDS = 2  # Even when a size runs over its time cap.


# --------------------------------------------------------------------------
# Joining the job
# --------------------------------------------------------------------------


def join_meshax(args: argparse.Namespace) -> tuple[Any, Any]:
    """Initialise meshax; returns (group of all processes, world communicator)."""
    import meshax
    from meshax._src.runtime.distributed import runtime

    meshax.distributed.initialize(args.address, args.processes, args.process_id, initialization_timeout=60,
                                  shutdown_timeout_seconds=30)
    rt = runtime()
    return rt.process_group(range(meshax.process_count())), rt.world


def join_mpi4py() -> Any:
    from mpi4py import MPI

    return MPI.COMM_WORLD


# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------


def make_data(count: int, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's send buffer and the exact expected sum over all ranks."""
    base = (np.arange(count, dtype=np.int64) % 1000 + 1).astype(np.float32)
    return base * np.float32(rank + 1), base * np.float32(size * (size + 1) // 2)


def make_calls(send: np.ndarray, world: Any, group: Any | None) -> dict[str, Call]:
    """The ways to allreduce `send` in this mode, each returning its result array."""
    from mpi4py import MPI

    recv = np.empty_like(send)

    def mpi4py_call() -> np.ndarray:
        world.Allreduce(send, recv, op=MPI.SUM)
        return recv

    if group is None:
        return {"mpi4py": mpi4py_call}
    out = np.empty_like(send)
    return {
        "meshax": lambda: group.allreduce(send),
        "meshax(out)": lambda: group.allreduce(send, out=out),
        "mpi4py": mpi4py_call,
    }


def check(name: str, result: np.ndarray, expected: np.ndarray) -> bool:
    ok = result.dtype == expected.dtype and result.shape == expected.shape and np.array_equal(result, expected)
    if not ok:
        print(f"allreduce worker: {name} gave a wrong result", file=sys.stderr, flush=True)
    return bool(ok)


def next_phase(world: Any, started: float, rounds: int, warmup: int, repetitions: int, cap: float) -> int:
    """Process 0 decides what the next round is; every process gets the same answer."""
    phase = None
    if world.Get_rank() == 0:
        timed = max(0, rounds - warmup)
        over = time.monotonic() - started > cap
        if rounds < warmup and not (over and rounds >= 1):
            phase = WARMUP
        elif timed < repetitions and not (over and timed >= MIN_TIMED_ROUNDS):
            phase = TIMED
        else:
            phase = STOP
    return world.bcast(phase, root=0)


class Measurements(RecordWriter):
    """This process's times and checks, per variant."""

    def __init__(self, header: dict[str, Any], names: list[str]) -> None:
        super().__init__(dict(header, warmup_times={n: [] for n in names}, times={n: [] for n in names},
                              correct={n: True for n in names}))

    def add(self, name: str, seconds: float, timed: bool, correct: bool) -> None:
        self.record["times" if timed else "warmup_times"][name].append(seconds)
        self.record["correct"][name] &= correct


def time_size(world: Any, group: Any | None, nbytes: int, warmup: int, repetitions: int, cap: float,
              header: dict[str, Any]) -> None:
    """Rounds of every call (rotating order) until done or `cap` s spent.

    Warmup results and each call's last result are checked; timed calls are not
    checked right away, because the check's temporary arrays would change how the
    memory allocator serves the next call (and so hide the cost of allocating results).
    """
    send, expected = make_data(nbytes // 4, world.Get_rank(), world.Get_size())
    calls = make_calls(send, world, group)
    names = list(calls)
    writer = Measurements(dict(header, bytes=nbytes), names)
    last: dict[str, np.ndarray] = {}
    started, rounds = time.monotonic(), 0
    while (phase := next_phase(world, started, rounds, warmup, repetitions, cap)) != STOP:
        shift = rounds % len(names)
        for name in names[shift:] + names[:shift]:
            world.Barrier()
            start = time.perf_counter()
            last[name] = calls[name]()
            elapsed = time.perf_counter() - start
            writer.add(name, elapsed, phase == TIMED, phase != WARMUP or check(name, last[name], expected))
        writer.write()
        rounds += 1
    for name, result in last.items():
        writer.record["correct"][name] &= check(name, result, expected)
    writer.write(complete=True)


def run(world: Any, group: Any | None, size: list[float], mode: str) -> None:
    """Measure one size: [bytes, warmup rounds, repetitions, seconds cap]."""
    from mpi4py import MPI

    nbytes, warmup, repetitions, cap = size
    header = {"mode": mode, "rank": world.Get_rank(), "processes": world.Get_size(),
              "thread_level": _thread_level(MPI.Query_thread())}
    time_size(world, group, int(nbytes), int(warmup), int(repetitions), float(cap), header)


def _thread_level(level: int) -> str:
    from mpi4py import MPI

    names = {MPI.THREAD_SINGLE: "SINGLE", MPI.THREAD_FUNNELED: "FUNNELED",
             MPI.THREAD_SERIALIZED: "SERIALIZED", MPI.THREAD_MULTIPLE: "MULTIPLE"}
    return "MPI_THREAD_" + names.get(level, str(level))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="allreduce benchmark worker")
    parser.add_argument("--mode", choices=("meshax", "mpi4py"), required=True)
    parser.add_argument("--address")
    parser.add_argument("--process-id", type=int)
    parser.add_argument("--processes", type=int)
    parser.add_argument("--size", type=json.loads, required=True,
                        help="JSON [bytes, warmup rounds, repetitions, seconds cap]")
    parser.add_argument("--budget", type=float, required=True)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    start_watchdog(args.budget, "allreduce worker")
    if args.mode == "mpi4py":
        world, group = join_mpi4py(), None
    else:
        group, world = join_meshax(args)
    run(world, group, args.size, args.mode)


if __name__ == "__main__":
    main()
