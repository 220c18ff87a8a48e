"""The desync check never stops a correct program: hundreds of programs from the single-process suites (NumPy
differential cases, derivatives, sharded gradients, vmap, control flow, lax) and whole programs (remat, async
checkpointing while training, multihost utilities, reshards, placements) run with the check on, as real jobs of
4 processes x 2 devices and 2 x 4, one job per layout running every program in sequence
(tests/programs/no_false_positives.py). No check may fire, and every program's values must equal those of the
same program run on one process alone (whose values the single-process suites compare with JAX)."""
from __future__ import annotations

import re

import pytest

from multiprocess import lines_by_process, run_launcher

PROGRAM = "tests/programs/no_false_positives.py"
STRIDE = "8"  # every 8th case of the large case tables: ~600 programs, ~25 s a layout on two cores
MINIMUM = 300


@pytest.mark.parametrize("processes,devices", [(4, 2), (2, 4)], ids=["4x2", "2x4"])
def test_correct_programs_are_never_stopped(processes, devices, tmp_path):
    result = run_launcher(PROGRAM, processes, devices, str(tmp_path), STRIDE, timeout=240)
    output = result.stdout + result.stderr
    assert "collective watchdog" not in output and "disagree" not in output, output[-4000:]
    assert result.returncode == 0, output[-4000:]
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(processes)), output[-4000:]
    counts = set()
    for index, lines in by_process.items():
        failures = [line for line in lines if line.startswith("FAIL ")]
        assert not failures, f"process {index}:\n" + "\n".join(failures)
        summary = [re.match(r"SUMMARY \d+ programs=(\d+) ok=(\d+)", line) for line in lines]
        found = [m for m in summary if m]
        assert len(found) == 1, lines[-5:]
        programs, ok = map(int, found[0].groups())
        assert ok == programs >= MINIMUM, found[0].group(0)
        counts.add(programs)
    assert len(counts) == 1, counts  # every process ran the same programs
    print(f"\n{processes}x{devices}: {counts.pop()} programs ran with the desync check on, none stopped, "
          f"all equal to their single-process values; {next(l for l in by_process[0] if l.startswith('KINDS'))}")
