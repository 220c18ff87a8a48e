"""Arrays across real processes, in layouts of 1x8, 2x4 and 4x2 (processes x devices per process).

Each job runs one program of tests/programs/ under `meshax launch` (or started by hand with an
explicit coordinator) with a time limit. The programs check every process's shards themselves and
print `CHECK name` after each part; the tests below also compare the lines the seeds show.
"""
from __future__ import annotations

import numpy as np
import pytest

from multiprocess import Result, lines_by_process, run_independent, run_launcher

LAYOUTS = [(1, 8), (2, 4), (4, 2)]
LAYOUT_IDS = [f"{n}x{k}" for n, k in LAYOUTS]
TIMEOUT = 120
STRIDE = 131072  # CPU device ids: process_index * 131072 + local index


def run(program: str, n: int, k: int) -> dict[int, list[str]]:
    result = run_launcher(f"tests/programs/{program}", n, k, timeout=TIMEOUT)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(n)), result.stdout[-3000:]
    return by_process


def checks(lines: list[str]) -> list[str]:
    return [line[len("CHECK "):] for line in lines if line.startswith("CHECK ")]


def device_ids(n: int, k: int) -> list[int]:
    return [p * STRIDE + i for p in range(n) for i in range(k)]


@pytest.mark.parametrize("n,k", LAYOUTS, ids=LAYOUT_IDS)
def test_reshard_battery(n, k):
    for index, lines in run("reshard_battery.py", n, k).items():
        assert "RESHARD-OK 1152" in lines, (index, lines[-5:])


# --------------------------------------------------------------------------
# "Running on a subset of devices"
# --------------------------------------------------------------------------


def box(labels: list[str], inner: int = 23) -> list[str]:
    """A one-column rich table as visualize_array_sharding draws it (no colour): a cell per label."""
    rule = "─" * inner
    lines = ["┌" + rule + "┐"]
    for i, label in enumerate(labels):
        left = (inner - len(label)) // 2
        lines.append("│" + " " * left + label + " " * (inner - left - len(label)) + "│")
        lines.append(("├" + rule + "┤") if i < len(labels) - 1 else ("└" + rule + "┘"))
    return lines


@pytest.mark.parametrize("n,k", LAYOUTS, ids=LAYOUT_IDS)
def test_device_put_onto_a_subset_of_devices(n, k):
    by_process = run("arr_subset_put.py", n, k)
    ids = device_ids(n, k)
    half = len(ids) // 2
    mesh_ids = ids[half:]
    data = np.arange(64, dtype=np.int32).reshape(8, 8)
    rows = 8 // half
    holders = {i // STRIDE for i in mesh_ids}
    for p, lines in by_process.items():
        *seed_output, result_line = lines[:lines.index("END-OF-SEED-OUTPUT")]
        expected = []
        if p == 0:
            expected += box([f"CPU {i}" for i in mesh_ids])
            expected += ["", "NamedSharding(mesh=Mesh('a': 4, axis_types=(Explicit,)), "
                             "spec=PartitionSpec('a',), memory_kind=device)"]
        local = ids[p * k:(p + 1) * k]
        expected.append(f"Devices attached to process {p}: [{', '.join(f'CpuDevice(id={i})' for i in local)}]")
        expected.append(f"Addressable data for process {p}:")
        for position, device_id in enumerate(mesh_ids):
            if device_id in local:
                text = f"device TFRT_CPU_{device_id} has local data {data[position * rows:(position + 1) * rows]}"
                expected += text.splitlines()
        assert seed_output == expected, f"process {p}"
        # The example's last line, jnp.sum(jnp.sin(x)): its value where this process holds part of the
        # mesh (summation order may change the last digits), else the unreadable array.
        prefix = f"process={p} got result: "
        assert result_line.startswith(prefix), (p, result_line)
        if p in holders:
            assert float(result_line[len(prefix):]) == pytest.approx(float(np.sin(data).sum()), rel=1e-5)
        else:
            assert result_line == prefix + "Array(shape=(), dtype=float32)"
        assert checks(lines) == ["shards", "reading", "moved-back"]
        assert lines[-1] == "DONE"
    # Processes without devices in the mesh hold nothing (the seed's processes 0 and 1).
    for p, lines in by_process.items():
        assert any(line.startswith("device ") for line in lines) == (p in holders)


# --------------------------------------------------------------------------
# The other programs: every process must pass every check
# --------------------------------------------------------------------------

PROGRAM_CHECKS = {
    "arr_pipeline.py": ["first-to-second-half", "back-and-forth", "microbatches"],
    "arr_reshard_meshes.py": ["chain (16, 12)", "chain (7, 5, 3)", "chain (5, 9)", "chain (11, 1)",
                              "only-participants", "direct-vs-chained"],
    "arr_make_arrays.py": ["process-local-batch", "single-device-arrays", "single-device-arrays-subset", "callback"],
    "arr_multihost.py": ["process_allgather", "broadcast_one_to_all", "sync_global_devices", "assert_equal",
                         "host-local-1d", "host-local-host-dev", "host-local-replicated", "host-local-pytrees"],
}


@pytest.mark.parametrize("program", sorted(PROGRAM_CHECKS))
@pytest.mark.parametrize("n,k", LAYOUTS, ids=LAYOUT_IDS)
def test_program(program, n, k):
    expected = list(PROGRAM_CHECKS[program])
    for p, lines in run(program, n, k).items():
        wanted = expected
        if program == "arr_make_arrays.py" and n == 1:
            assert "SKIP subset: one process" in lines
            wanted = [name for name in expected if name != "single-device-arrays-subset"]
        assert checks(lines) == wanted, f"process {p}: {lines[-10:]}"
        assert lines[-1] == "DONE"


@pytest.mark.parametrize("program", ["arr_pipeline.py", "arr_subset_put.py"])
def test_example_programs_with_independently_started_processes(program):
    """The programs that run an example (which calls initialize() without arguments) hand their
    ADDRESS ID N arguments to it."""
    wanted = PROGRAM_CHECKS.get(program, ["shards", "reading", "moved-back"])
    results: list[Result] = run_independent(f"tests/programs/{program}", 2, 4, timeout=TIMEOUT)
    for p, result in enumerate(results):
        assert result.returncode == 0, f"process {p}: {result.stderr[-3000:]}"
        lines = result.stdout.splitlines()
        assert checks(lines) == wanted, f"process {p}"
        assert lines[-1] == "DONE"


@pytest.mark.parametrize("n,k", [(2, 4), (4, 2)], ids=["2x4", "4x2"])
def test_multihost_with_independently_started_processes(n, k):
    results: list[Result] = run_independent("tests/programs/arr_multihost.py", n, k, timeout=TIMEOUT)
    for p, result in enumerate(results):
        assert result.returncode == 0, f"process {p}: {result.stderr[-3000:]}"
        lines = result.stdout.splitlines()
        assert checks(lines) == PROGRAM_CHECKS["arr_multihost.py"], f"process {p}"
        assert lines[-1] == "DONE"


@pytest.mark.parametrize("n,k", LAYOUTS, ids=LAYOUT_IDS)
def test_allgather_and_broadcast_of_scalars_and_local_arrays_follow_jax(n, k):
    """process_allgather stacks scalars to (process_count,) and stacks fully addressable Arrays like host
    values; broadcast_one_to_all keeps a scalar 0-d (see the program's docstring)."""
    by_process = run("arr_allgather_local.py", n, k)
    failures = [f"[{p}] {line}" for p, lines in by_process.items() for line in lines if line.startswith("FAIL")]
    assert not failures, "\n".join(failures)
    for lines in by_process.values():
        assert lines[-1] == "DONE"


@pytest.mark.parametrize("n,k", [(2, 4), (4, 2)], ids=["2x4", "4x2"])
def test_hypothesis_round_trips_in_a_multi_process_job(n, k):
    result = run_launcher("tests/programs/reshard_property.py", n, k, timeout=200)
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = lines_by_process(result.stdout)
    assert all(any(line.startswith("PROPERTY-OK") for line in outputs[i]) for i in range(n)), result.stdout[-2000:]
