"""Jobs that survive a dead process (issue 43): jax_enable_recoverability and live_devices, with real processes.

tests/programs/recoverable_training.py trains a linear model data-parallel over the live processes' devices,
each step within live_devices; one process SIGKILLs itself at a random moment of a step. The survivors must
all take the except branch of that step (live_devices' atomicity), go on, and finish with equal weights.
"""
from __future__ import annotations

import random
import re
import signal
import time

import numpy as np
import pytest

from multiprocess import PYTHON, child_env, collect, free_port, kill_group, run_independent, start

TRAINING = "tests/programs/recoverable_training.py"
REJOIN = "tests/programs/recoverable_rejoin.py"
STEPS = 20


def reference_weights(devices: list[int]) -> np.ndarray:
    """The training program's weights after its steps, step i on devices[i] devices, in NumPy."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(600).astype(np.float32)
    y = (10 * x + 0.1 * rng.standard_normal(600)).astype(np.float32)
    w = np.ones((1,), np.float32)
    for step, count in enumerate(devices):
        batch = 4 * count
        start = (step * batch) % (len(x) - batch)
        xb, yb = x[start:start + batch], y[start:start + batch]
        w = w - np.float32(0.05) * np.mean(2 * (w * xb - yb) * xb)
    return w


def final_weights(stdout: str) -> tuple[int, str]:
    match = re.search(r"^FINAL \d+ (\d+) (\[.*\])$", stdout, re.M)
    assert match, stdout
    return int(match.group(1)), match.group(2)


def failed_steps(stdout: str) -> list[int]:
    return [int(step) for step in re.findall(r"^STEP (\d+) FAILED", stdout, re.M)]


@pytest.mark.parametrize("trial", range(10))
def test_a_process_killed_mid_step_leaves_the_others_training_with_equal_weights(trial):
    kill_step = random.Random(trial).randrange(1, STEPS - 1)
    results = run_independent(TRAINING, 4, 1, str(STEPS), "3", str(kill_step), timeout=120)
    assert results[3].returncode == -signal.SIGKILL, results[3].stderr
    survivors = results[:3]
    for result in survivors:
        assert result.returncode == 0, result.stderr
        assert "goes on without process 3" in result.stderr, result.stderr
    finals = [final_weights(r.stdout) for r in survivors]
    assert all(steps == STEPS for steps, _ in finals), finals
    assert len({weights for _, weights in finals}) == 1, finals  # every survivor holds the same weights
    # atomicity: every survivor took the except branch of the one step the death interrupted
    failed = [failed_steps(r.stdout) for r in survivors]
    assert failed[0] == failed[1] == failed[2] and len(failed[0]) == 1 and failed[0][0] >= kill_step, failed
    # the block failed on every survivor; its collective with process 3, if it was in one, was cancelled naming it
    assert all("ProcessFailureError" in r.stdout for r in survivors), [r.stdout for r in survivors]
    assert all("inside the block: None" in r.stdout or "process 3 (pid" in r.stdout for r in survivors)
    expected = reference_weights(devices=[4] * failed[0][0] + [3] * (STEPS - failed[0][0]))
    assert np.allclose(eval(finals[0][1]), expected, rtol=1e-5), (finals, expected)


def test_without_deaths_every_process_trains_every_step():
    results = run_independent(TRAINING, 4, 1, str(STEPS), "-1", "-1", timeout=120)
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results]
    finals = [final_weights(r.stdout) for r in results]
    assert len(set(finals)) == 1 and finals[0][0] == STEPS, finals
    assert np.allclose(eval(finals[0][1]), reference_weights([4] * STEPS), rtol=1e-5), finals
    assert not any(failed_steps(r.stdout) for r in results)


JOIN_WITH_RECOVERABILITY = """
import sys
import meshax
meshax.config.update("jax_enable_recoverability", sys.argv[3] == "1")
meshax.distributed.initialize(sys.argv[1], 2, int(sys.argv[2]), initialization_timeout=30)
try:
    meshax.config.update("jax_enable_recoverability", sys.argv[3] != "1")
except RuntimeError as error:
    print("REFUSED:", error, flush=True)
"""


def test_recoverability_is_set_before_initialize_and_alike_on_every_process():
    results = run_independent_code(JOIN_WITH_RECOVERABILITY, ["1", "1"])
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    assert all("REFUSED: jax_enable_recoverability must be set before" in r.stdout for r in results)
    results = run_independent_code(JOIN_WITH_RECOVERABILITY, ["1", "0"])
    assert all(r.returncode != 0 for r in results), [r.stderr for r in results]
    assert any("jax_enable_recoverability=False but process 0 with True" in r.stderr for r in results), \
        [r.stderr for r in results]


def run_independent_code(code: str, flags: list[str]) -> list:
    """Processes 0, 1... of a job running `code` (argv: address id flag), each with its flag."""
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, "-c", code, address, str(i), flag], child_env(1)) for i, flag in enumerate(flags)]
    try:
        return collect(procs, timeout=60)
    finally:
        for proc in procs:
            kill_group(proc)


def run_with_a_restart(steps: int, kill_step: int, timeout: float = 120) -> tuple[list, object]:
    """tests/programs/recoverable_rejoin.py on 4 processes; process 3 kills itself in step `kill_step` and is
    started again with its id as soon as it died. The results of the 4 first processes and of the restarted one."""
    address, env = f"localhost:{free_port()}", child_env(1)
    command = [PYTHON, REJOIN, address, "{}", "4", str(steps), "3", str(kill_step)]
    procs = [start([part.format(i) for part in command], env) for i in range(4)]
    again = None
    try:
        deadline = time.monotonic() + timeout
        while procs[3].poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        again = start([part.format(3) for part in command] + ["restarted"], env)
        results = collect(procs + [again], timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for proc in procs + [again]:
            if proc is not None:
                kill_group(proc)
    return results[:4], results[4]


@pytest.mark.parametrize("trial", range(10))
def test_a_killed_process_started_again_rejoins_and_all_finish_with_equal_weights(trial):
    results, again = run_with_a_restart(40, random.Random(100 + trial).randrange(1, 30))
    assert results[3].returncode == -signal.SIGKILL, results[3].stderr
    for result in results[:3] + [again]:
        assert result.returncode == 0, result.stderr
    finals = [final_weights(r.stdout) for r in results[:3] + [again]]
    assert len(set(finals)) == 1 and finals[0][0] == 40, finals  # all four: the same step, the same weights
    assert abs(eval(finals[0][1])[0] - 10) < 0.5, finals
    failed = [failed_steps(r.stdout) for r in results[:3]]
    assert failed[0] == failed[1] == failed[2] and len(failed[0]) == 1, failed


def test_survivors_save_and_restore_a_checkpoint_over_the_live_devices(tmp_path):
    results = run_independent("tests/programs/recoverable_checkpoint.py", 4, 1, str(tmp_path / "run"), timeout=90)
    assert results[3].returncode == -signal.SIGKILL
    for process, result in enumerate(results[:3]):
        assert result.returncode == 0, result.stderr
        assert f"OK {process} 3 [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]" in result.stdout, result.stdout


def test_a_frozen_process_is_left_behind_after_the_heartbeat_timeout():
    """SIGSTOPped mid-step, process 3 stops answering: after heartbeat_timeout_seconds (10 s) the others go on."""
    address, env = f"localhost:{free_port()}", child_env(1)
    procs = [start([PYTHON, TRAINING, address, str(i), "4", str(STEPS), "3", "5", "stop"], env) for i in range(4)]
    try:
        results = collect(procs[:3], timeout=90)
    finally:
        for proc in procs:
            kill_group(proc)
    for result in results:
        assert result.returncode == 0, result.stderr
        assert "goes on without process 3" in result.stderr and "stopped answering" in result.stderr, result.stderr
    finals = [final_weights(r.stdout) for r in results]
    assert len(set(finals)) == 1 and finals[0][0] == STEPS, finals


def test_a_process_failing_with_an_uncaught_exception_is_left_behind():
    """An uncaught exception ends process 3 (it tells the coordinator why): the others go on without it."""
    results = run_independent(TRAINING, 4, 1, str(STEPS), "3", "5", "raise", timeout=90)
    assert results[3].returncode == 1 and "ValueError: process 3 gives up at step 5" in results[3].stderr
    for result in results[:3]:
        assert result.returncode == 0, result.stderr
        assert "goes on without process 3" in result.stderr and "failed: uncaught ValueError" in result.stderr
    finals = [final_weights(r.stdout) for r in results[:3]]
    assert len(set(finals)) == 1 and finals[0][0] == STEPS, finals


def test_a_process_calling_mpi_abort_ends_alone():
    """MPI_Abort on a communicator of processes 2 and 3 (MPICH would order process 2 to exit too): only process 3
    ends, naming why, and the others go on without it."""
    results = run_independent(TRAINING, 4, 1, str(STEPS), "3", "5", "abort", timeout=90)
    for result in results[:3]:
        assert result.returncode == 0, result.stderr
        assert "goes on without process 3" in result.stderr and "its MPI library aborted it" in result.stderr
    assert results[3].returncode == 1 and "its MPI library aborted it" in results[3].stderr, results[3].stderr
    finals = [final_weights(r.stdout) for r in results[:3]]
    assert len(set(finals)) == 1 and finals[0][0] == STEPS, finals
