"""meshax.checkpoint in real multi-process jobs: round trips in 1x8, 4x2 and 2x4 (processes x devices), restores
onto other layouts, process counts and device subsets, and a process killed in the middle of a save."""
from __future__ import annotations

import os
import re

import pytest

from multiprocess import lines_by_process, run_launcher

PROGRAM = "tests/programs/ckpt_job.py"
SAVE_CHECKS = {"saved", "writes only its shards", "committed", "restore same", "restore flipped", "reads only its chunks",
               "restore subset", "restore one_device", "restore shardings", "restore host"}
RESTORE_CHECKS = SAVE_CHECKS - {"saved", "writes only its shards", "committed", "restore same"}


def checks(output: str, n: int) -> dict[int, set[str]]:
    """The CHECK names each of the `n` processes printed."""
    found = {i: {m.group(1) for line in lines if (m := re.match(r"CHECK (.+)$", line))}
             for i, lines in lines_by_process(output).items()}
    assert sorted(found) == list(range(n)), output[-3000:]
    return found


def run(n: int, k: int, *args: str) -> dict[int, set[str]]:
    result = run_launcher(PROGRAM, n, k, *map(str, args), timeout=120)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    return checks(result.stdout, n)


@pytest.mark.parametrize("n,k", [(1, 8), (2, 4)], ids=["1x8", "2x4"])
def test_round_trip(tmp_path, n, k):
    """Save on n x k devices, restore in the same job onto its own, transposed, subset and host layouts."""
    for found in run(n, k, "save", tmp_path, 3).values():
        assert found == SAVE_CHECKS


def test_save_4x2_restore_2x4_and_one_process(tmp_path):
    """A checkpoint written by 4 processes is read by 2 processes and by 1, each reading only its boxes."""
    for found in run(4, 2, "save", tmp_path, 5).values():
        assert found == SAVE_CHECKS
    for n, k in [(2, 4), (1, 8)]:
        for found in run(n, k, "restore", tmp_path, 5).values():
            assert found == RESTORE_CHECKS


def test_process_killed_mid_save_leaves_previous_checkpoint(tmp_path):
    """SIGKILL of one process while it writes step 2: step 1 stays the latest and restorable, the partial step is
    refused by restore and removed by the next save, and max_to_keep prunes old steps."""
    result = run_launcher(PROGRAM, 4, 2, "crash", str(tmp_path), timeout=120)
    assert result.returncode != 0
    assert "DYING mid-save" in result.stdout and "process 3" in result.stdout + result.stderr, result.stdout[-2000:]
    assert sorted(os.listdir(tmp_path)) == ["1", "2.meshax-checkpoint-tmp"], os.listdir(tmp_path)
    expected = {"latest is 1", "uncommitted refused", "resume step 1", "partial cleaned, kept 2", "latest 3", "async"}
    for found in run(4, 2, "resume", tmp_path).values():
        assert found == expected


def test_save_without_one_process_fails_the_job_naming_it(tmp_path):
    """A process that never calls save() but goes on to another barrier: the job fails within seconds naming
    where each process waits (the desync watchdog): the others in save()'s agreement, at their save() line; and
    nothing is written."""
    result = run_launcher(PROGRAM, 4, 2, "missing", str(tmp_path), timeout=120)
    assert result.returncode != 0 and "CHECK" not in result.stdout, result.stdout
    lines = [line for line in result.stderr.splitlines() if "  process " in line]
    assert any("process 1: in barrier 'sync_global_devices:after the failed save'" in line for line in lines), lines
    assert any("process 0: in MPI allgather" in line and "ckpt_job.py" in line for line in lines), lines
    assert os.listdir(tmp_path) == []


def test_processes_that_disagree_all_fail_naming_the_difference(tmp_path):
    """4x2: one process saving to another path, a tree with another shape, host values that differ, one process
    unable to save, processes restoring different steps: every process raises naming the difference and the
    processes, nothing is written; then agreeing saves and restores work, and an old step is refused."""
    expected = {"path", "tree", "host value", "one cannot", "old step refused", "restore steps", "agreeing restore"}
    for found in run(4, 2, "disagree", tmp_path).values():
        assert found == expected


def test_crash_between_the_renames_of_a_forced_save_keeps_the_old_checkpoint(tmp_path):
    """4x2: process 0 is killed inside save(force=True) after renaming the old checkpoint aside and before
    putting the new one in place; the next job restores the old one and replaces it."""
    result = run_launcher(PROGRAM, 4, 2, "force-crash", str(tmp_path), timeout=120)
    assert result.returncode != 0 and "DYING between the renames" in result.stdout, result.stdout[-2000:]
    assert sorted(os.listdir(tmp_path)) == ["ckpt.meshax-checkpoint-old", "ckpt.meshax-checkpoint-tmp"]
    for found in run(4, 2, "force-resume", tmp_path).values():
        assert found == {"restore step 1", "replaced by step 3"}


def test_restore_reading_part_of_a_damaged_chunk_fails_naming_it(tmp_path):
    """Saved on 4x2, restored on 3x2 onto Mesh((6,)) P('d'): processes 0 and 1 each read only some rows of the
    chunk (0, 0) of params.0.w, whose row 7 (process 1's) has a flipped bit: both verify the whole chunk and fail
    naming it; process 2 does not need it and restores every value exactly."""
    run(4, 2, "save", tmp_path, 5)
    chunk = tmp_path / "ckpt" / "params.0.w" / "c" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[7 * 3 * 4 + 1] ^= 0x04  # row 7 of a chunk of 8 x 3 float32
    chunk.write_bytes(bytes(data))
    result = run_launcher(PROGRAM, 3, 2, "restore-split", str(tmp_path), "5", timeout=120)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    by_process = lines_by_process(result.stdout)
    for process in (0, 1):
        corrupt = [line for line in by_process[process] if line.startswith("CHECK corrupt")]
        assert corrupt and "fails its CRC32C" in corrupt[0] and str(chunk) in corrupt[0], by_process[process]
    assert "CHECK restore split intact" in by_process[2], by_process[2]
