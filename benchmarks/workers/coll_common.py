"""Shared loop of the collective benchmark workers (coll_meshax.py, coll_jax.py, coll_mpi4py.py).

Every worker runs the same programs on a mesh of all D devices (D = processes x
devices per process, 8 in bench_collectives.py) along one axis 'i'; device g (its
position on the mesh) holds block g of a float32 array, block g = base * (g + 1)
with base = arange(n) % 1000 + 1, so every result is exact in float32:

* psum:       every device gets sum_g block g          = base * D(D+1)/2
* all_gather: every device gets the D blocks, in order (tiled: concatenated)
* ppermute:   ring shift g -> g+1 mod D, device g gets block g-1 mod D

--plan is a JSON list of [program, bytes per device, warmup calls, timed calls,
seconds cap]. For each entry process 0 decides every round (warmup, timed or
stop, once the calls are done or the cap is spent, with at least 2 timed calls)
and tells the others; each call follows a barrier and is timed on every process
until its result is ready. The first and the last result of every entry are
checked. Records go to $BENCH_RECORD_DIR/<rank>.json, rewritten as they grow so a
job killed for overrunning keeps what it measured. The process exits with status
3 if it runs longer than --budget seconds.

Optional --profile DIR: the timed calls run under cProfile, whose statistics go
to DIR/<rank>-<program>-<bytes>.prof (only the frameworks that support it).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from records import RecordWriter
from worker_support import start_watchdog  # noqa: F401  (used as common.start_watchdog)

STOP, WARMUP, TIMED = 0, 1, 2
MIN_TIMED = 2
PROGRAMS = ("psum", "all_gather", "ppermute")


def parse_args(who: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=f"{who}: collective benchmark worker")
    parser.add_argument("--plan", type=json.loads, required=True,
                        help="JSON list of [program, bytes per device, warmup, repetitions, seconds cap]")
    parser.add_argument("--budget", type=float, required=True, help="seconds before the worker kills itself")
    parser.add_argument("--profile", default=None, help="directory for cProfile statistics of the timed calls")
    parser.add_argument("--address", default=None, help="coordinator HOST:PORT (JAX worker, several processes)")
    parser.add_argument("--process-id", type=int, default=0, help="this process's index (JAX worker)")
    parser.add_argument("--processes", type=int, default=1, help="processes in the job (JAX worker)")
    parser.add_argument("--local-devices", type=int, default=1, help="blocks per process (mpi4py worker)")
    return parser.parse_args()


# --------------------------------------------------------------------------
# Data and expected results
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=2)
def base(count: int) -> np.ndarray:
    value = (np.arange(count, dtype=np.int32) % 1000 + 1).astype(np.float32)
    value.flags.writeable = False
    return value


def block(count: int, position: int) -> np.ndarray:
    """Block `position` (0-based mesh position) of the input."""
    return base(count) * np.float32(position + 1)


def expected_psum(count: int, devices: int) -> np.ndarray:
    return base(count) * np.float32(devices * (devices + 1) // 2)


def expected_gather(count: int, devices: int) -> np.ndarray:
    return np.concatenate([block(count, g) for g in range(devices)])


def expected_shift(count: int, position: int, devices: int) -> np.ndarray:
    return block(count, (position - 1) % devices)


def same(result: Any, expected: np.ndarray) -> bool:
    result = np.asarray(result)
    return result.dtype == expected.dtype and result.shape == expected.shape and bool(np.array_equal(result, expected))


# --------------------------------------------------------------------------
# What a framework provides
# --------------------------------------------------------------------------


@dataclass
class Framework:
    """One framework's side of the loop."""

    name: str
    rank: int
    processes: int
    local_devices: int
    barrier: Callable[[], None]
    decide: Callable[[int | None, str], int]  # (phase on rank 0 else None, unique key) -> the phase everywhere
    # (program, count) -> (call returning a result once it is ready, check of a result)
    build: Callable[[str, int], tuple[Callable[[], Any], Callable[[Any], bool]]]
    info: dict[str, Any]


class Measurements(RecordWriter):
    """This process's measurements, one entry per program and size."""

    def __init__(self, header: dict[str, Any]) -> None:
        super().__init__(dict(header, entries=[]))

    def entry(self, program: str, nbytes: int) -> dict[str, Any]:
        item = {"program": program, "bytes": nbytes, "warmup_times": [], "times": [], "correct": True,
                "checked": 0, "complete": False}
        self.record["entries"].append(item)
        return item


def _phase_on_root(started: float, calls: int, warmup: int, repetitions: int, cap: float) -> int:
    timed = max(0, calls - warmup)
    over = time.monotonic() - started > cap
    if calls < warmup and not (over and calls >= 1):
        return WARMUP
    if timed < repetitions and not (over and timed >= MIN_TIMED):
        return TIMED
    return STOP


def run(fw: Framework, plan: list[list[Any]], profile_dir: str | None = None) -> None:
    """Measure every entry of `plan` in order."""
    writer = Measurements(dict(fw.info, framework=fw.name, rank=fw.rank, processes=fw.processes,
                               local_devices=fw.local_devices))
    writer.write(every=0)
    for index, (program, nbytes, warmup, repetitions, cap) in enumerate(plan):
        if program not in PROGRAMS:
            raise ValueError(f"unknown program {program!r}")
        item = writer.entry(program, int(nbytes))
        call, check = fw.build(program, int(nbytes) // 4)
        profiler = None
        if profile_dir is not None:
            import cProfile

            profiler = cProfile.Profile()
        started, calls = time.monotonic(), 0
        while True:
            phase = fw.decide(_phase_on_root(started, calls, int(warmup), int(repetitions), float(cap))
                              if fw.rank == 0 else None, f"{index}-{calls}")
            if phase == STOP:
                break
            fw.barrier()
            if profiler is not None and phase == TIMED:
                profiler.enable()
            start = time.perf_counter()
            result = call()
            elapsed = time.perf_counter() - start
            if profiler is not None and phase == TIMED:
                profiler.disable()
            item["times" if phase == TIMED else "warmup_times"].append(elapsed)
            if calls == 0:
                item["correct"] &= _checked(check, result, item, fw.name, program)
            calls += 1
            result = None  # Free the result before the next call, as a loop over fresh inputs would.
            writer.write()
        if calls > 1:
            item["correct"] &= _checked(check, call(), item, fw.name, program)  # one more, untimed, checked call
        item["complete"] = True
        if profiler is not None:
            profiler.dump_stats(os.path.join(profile_dir, f"{fw.rank}-{program}-{nbytes}.prof"))
        del call, check
        writer.write(every=0)
    writer.write(complete=True)


def _checked(check: Callable[[Any], bool], result: Any, item: dict[str, Any], framework: str, program: str) -> bool:
    ok = bool(check(result))
    item["checked"] += 1
    if not ok:
        print(f"{framework}: {program} of {item['bytes']} bytes gave a wrong result", file=sys.stderr, flush=True)
    return ok
