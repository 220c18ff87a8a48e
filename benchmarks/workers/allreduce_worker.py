"""Allreduce worker for bench_allreduce.py: `python allreduce_worker.py HOST:PORT PROCESS_ID N PLAN_JSON BUDGET`.

Joins a meshax job, then for every (bytes, warmup, repetitions) of PLAN_JSON times
float32 sum-allreduces of that size, interleaving three ways of doing it on the
same communicator (meshax's group of all processes *is* runtime().world):

* meshax:      ProcessGroup.allreduce(send)           (allocates its result)
* meshax(out): ProcessGroup.allreduce(send, out=buf)  (preallocated result)
* mpi4py:      world.Allreduce(send, recv, op=MPI.SUM)

Each call is preceded by a barrier and timed on every process; process 0 writes
the per-repetition max over processes to $BENCH_RECORD_DIR/0.json. Results are
checked against the exact expected sums (small integers, exact in float32).
The process exits with status 3 if it runs longer than BUDGET seconds.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable

import numpy as np

import meshax
from meshax._src.runtime.distributed import runtime

Call = Callable[[], np.ndarray]


def start_watchdog(budget: float) -> None:
    """Kill this process if the benchmark overruns its time budget."""
    def expire() -> None:
        print(f"allreduce worker: time budget of {budget:g} s exceeded", file=sys.stderr, flush=True)
        os._exit(3)

    timer = threading.Timer(budget, expire)
    timer.daemon = True
    timer.start()


def make_data(count: int, rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's send buffer and the exact expected sum over all ranks."""
    base = (np.arange(count, dtype=np.int64) % 1000 + 1).astype(np.float32)
    send = base * np.float32(rank + 1)
    expected = base * np.float32(size * (size + 1) // 2)
    return send, expected


def make_calls(send: np.ndarray) -> dict[str, Call]:
    """The three ways to allreduce `send`, each returning its result array."""
    from mpi4py import MPI

    rt = runtime()
    group = rt.process_group(range(meshax.process_count()))
    world = rt.world
    recv = np.empty_like(send)
    out = np.empty_like(send)

    def mpi4py_call() -> np.ndarray:
        world.Allreduce(send, recv, op=MPI.SUM)
        return recv

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


def time_size(nbytes: int, warmup: int, repetitions: int) -> dict[str, Any]:
    """Time every call `repetitions` times (after `warmup`), in rotating order; check results."""
    world = runtime().world
    rank, size = world.Get_rank(), world.Get_size()
    send, expected = make_data(nbytes // 4, rank, size)
    calls = make_calls(send)
    names = list(calls)
    correct = {name: True for name in names}
    for _ in range(warmup):
        for name in names:
            correct[name] &= check(name, calls[name](), expected)
    times: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, np.ndarray] = {}
    for repetition in range(repetitions):
        shift = repetition % len(names)
        for name in names[shift:] + names[:shift]:
            world.Barrier()
            start = time.perf_counter()
            last[name] = calls[name]()
            times[name].append(time.perf_counter() - start)
    for name in names:
        correct[name] &= check(name, last[name], expected)
    return {"bytes": nbytes, "repetitions": repetitions, "times": times, "correct": correct}


def slowest_process(local: dict[str, Any], gathered: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine every process's result: per repetition the max time, correct only if correct everywhere."""
    names = list(local["times"])
    return {
        "bytes": local["bytes"],
        "repetitions": local["repetitions"],
        "times": {name: [max(values) for values in zip(*(g["times"][name] for g in gathered))] for name in names},
        "correct": {name: all(g["correct"][name] for g in gathered) for name in names},
    }


def main(address: str, process_id: int, num_processes: int, plan: list[list[int]], budget: float) -> None:
    start_watchdog(budget)
    meshax.distributed.initialize(address, num_processes, process_id, initialization_timeout=60,
                                  shutdown_timeout_seconds=30)
    world = runtime().world
    results = []
    for nbytes, warmup, repetitions in plan:
        local = time_size(nbytes, warmup, repetitions)
        gathered = world.gather(local, root=0)
        if process_id == 0:
            results.append(slowest_process(local, gathered))
            print(f"allreduce worker: {nbytes} bytes done", file=sys.stderr, flush=True)
    if process_id == 0:
        with open(os.path.join(os.environ["BENCH_RECORD_DIR"], "0.json"), "w") as file:
            json.dump({"processes": num_processes, "results": results}, file)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]), float(sys.argv[5]))
