"""Processes that diverge end the job within seconds, on every process, naming each one's operation and line.

Desync detection is on by default: these run with default settings, as independent processes (the seeds'
style), and each process must exit non-zero on its own with the report, never print a result."""
from __future__ import annotations

import time

import pytest

from multiprocess import PYTHON, child_env, collect, free_port, start

PROGRAM = "tests/programs/desync_scenarios.py"
N = 4


def run(scenario: str, timeout: float = 60, **env: str) -> tuple[list, float]:
    address = f"127.0.0.1:{free_port()}"
    began = time.monotonic()
    procs = [
        start([PYTHON, PROGRAM, scenario],
              child_env(2, MESHAX_COORDINATOR_ADDRESS=address, MESHAX_NUM_PROCESSES=str(N), MESHAX_PROCESS_ID=str(i),
                        **env))
        for i in range(N)
    ]
    results = collect(procs, timeout=timeout)
    return results, time.monotonic() - began


# scenario -> what the report must say about process 1 (the odd one out) and about process 0
CASES = {
    "skipped_step": ("(after 4 jit calls on these processes)", "(after 5 jit calls on these processes)"),
    "dtype": ("in MPI Allreduce ('sum', (2,), '<i4')", "in MPI Allreduce ('sum', (2,), '<f4')"),
    "size": ("in MPI Allreduce ('sum', (262145,), '<f4')", "in MPI Allreduce ('sum', (262144,), '<f4')"),
    "psum_pmax": ("in MPI Allreduce ('max', (2,), '<f4')", "in MPI Allreduce ('sum', (2,), '<f4')"),
    "barrier_name": ("in barrier 'sync_global_devices:before_save'", "in barrier 'sync_global_devices:after_save'"),
    "seeds_deadlock": ("in MPI allgather", "in barrier 'sync_global_devices:step'"),
    "early_exit": ("in shutdown", "in device_put of host data"),
}


@pytest.mark.parametrize("scenario", sorted(CASES))
def test_a_diverging_process_fails_the_job_naming_every_operation(scenario):
    results, elapsed = run(scenario)
    odd, first = CASES[scenario]
    assert elapsed < 30, f"took {elapsed:.0f} s"
    for index, result in enumerate(results):
        report = result.stderr
        assert result.returncode != 0, f"process {index} exited 0:\n{result.stdout}\n{report}"
        assert "FINISHED" not in result.stdout and "SUM" not in result.stdout
        assert "collective watchdog" in report, f"process {index}:\n{report}"
        lines = {line.split(":", 1)[0].strip(): line for line in report.splitlines() if line.startswith("  process ")}
        assert odd in lines["process 1"], report
        assert first in lines["process 0"], report
        assert "desync_scenarios.py:" in lines["process 0"] and (
            "desync_scenarios.py:" in lines["process 1"] or "end of the program" in lines["process 1"])


def test_a_slow_process_is_waited_for_with_a_line_naming_it():
    results, _ = run("slow", MESHAX_STILL_WAITING_SECONDS="3")  # every 10 s by default
    for index, result in enumerate(results):
        assert result.returncode == 0, result.stderr
        assert "TOTAL 16.0" in result.stdout and "FINISHED" in result.stdout
        if index != 2:
            assert f"process {index} still waiting for process 2 (running" in result.stderr, result.stderr
            assert "desync_scenarios.py:55" in result.stderr


def test_initialize_names_the_processes_it_waits_for_every_10_s():
    address = f"localhost:{free_port()}"
    env = child_env(1, MESHAX_STILL_WAITING_SECONDS="3")  # 10 s by default
    procs = [start([PYTHON, "tests/programs/init_only.py", address, str(i), "3", "5"], env) for i in range(2)]
    for index, result in enumerate(collect(procs, timeout=60)):
        assert result.returncode != 0
        assert f"meshax: process {index} still waiting for processes [2] to start and connect" in result.stderr
        assert "processes [2] of 3 never connected" in result.stderr
