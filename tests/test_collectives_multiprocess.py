"""Every collective in shard_map over meshes whose groups span real processes, against NumPy.

tests/programs/coll_multiprocess.py runs the same seeded cases on every process: meshes over all 8
devices (make_mesh in shapes 8, 4x2, 2x4, 2x2x2 and the same shapes over shuffled device orders),
psum/pmean/pmax/pmin (float32, int32, bool; NaN and inf that must propagate as in NumPy),
all_gather (axis 0 and 1, tiled or not), psum_scatter (tiled or not), ppermute (full, partial and
ring permutations), all_to_all (tiled or not, 2-d and 3-d) and axis_index, over random ordered
subsets of the mesh axes, random in_specs, with and without jit. Each device's result block is
checked against NumPy, through process_allgather and through each process's own shards.

Layouts 2x4 and 4x2 (processes x CPU devices per process), through `meshax launch`, bounded in time.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

from multiprocess import lines_by_process, run_launcher

PROGRAM = Path(__file__).parent / "programs" / "coll_multiprocess.py"
LAYOUTS = [(2, 4), (4, 2)]
IDS = [f"{n}x{k}" for n, k in LAYOUTS]
TIMEOUT = 90  # a run takes a few seconds; the bound is for a loaded machine


def case_count() -> int:
    """How many cases the program draws (its case list needs only NumPy)."""
    spec = importlib.util.spec_from_file_location("coll_multiprocess_cases", PROGRAM)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return len(module.cases()[1])


@pytest.mark.parametrize("n,k", LAYOUTS, ids=IDS)
def test_every_collective_across_processes(n, k):
    start = time.monotonic()
    result = run_launcher(str(PROGRAM.relative_to(PROGRAM.parents[2])), n, k, timeout=TIMEOUT)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, \
        f"exit {result.returncode} after {elapsed:.1f} s\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(n)), result.stdout[-3000:]
    expected = f"collectives ok: {case_count()} cases"
    for index, lines in by_process.items():
        assert expected in lines, (index, lines[-5:])


def expect_every_process_prints(program: Path, n: int, k: int, line: str) -> None:
    """Run `program` as an n x k launcher job: it exits 0 and each process prints a line containing `line`."""
    result = run_launcher(str(program.relative_to(program.parents[2])), n, k, timeout=TIMEOUT)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(n)), result.stdout[-3000:]
    for index, lines in by_process.items():
        assert any(line in printed for printed in lines), (index, lines[-5:])


LARGE = Path(__file__).parent / "programs" / "coll_large_reduce.py"


@pytest.mark.parametrize("n,k", LAYOUTS, ids=IDS)
def test_large_reductions_across_processes(n, k):
    """Reductions of 2 MiB per device go through the shared-memory Allreduce; NaN and inf propagate."""
    expect_every_process_prints(LARGE, n, k, "large reductions ok: 12 cases")


SMALL = Path(__file__).parent / "programs" / "coll_small_dtypes.py"


@pytest.mark.parametrize("n,k", [(2, 1)] + LAYOUTS, ids=["2x1"] + IDS)
def test_small_reductions_of_every_checked_dtype(n, k):
    """Reductions that carry the in-band check (inband.py), in each dtype and block size; one device per process
    reduces blocks of their own shape, more devices one flat buffer of all their groups."""
    expect_every_process_prints(SMALL, n, k, "small reductions ok: 84 cases")
