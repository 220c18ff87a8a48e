"""Failure handling with real processes: dead peers, startup errors, bad arguments; all time-bounded."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest

from multiprocess import (INIT_ONLY, PYTHON, child_env, collect, free_port, kill_group, run_independent, run_mpiexec, start,
                          start_up_with_a_latecomer)


WAIT_THEN_DIE = "tests/programs/wait_then_die.py"


def wait_for_line(proc: subprocess.Popen, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if text in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode} before printing {text!r}")
    raise AssertionError(f"no {text!r} within {timeout} s")


def stop_one_of_four(mode: str, victim_index: int, how: signal.Signals, limit: float) -> tuple[list, float]:
    """Run 4 processes that wait in an MPI call, hit one with `how`; the survivors' results and delay."""
    address = f"localhost:{free_port()}"
    env = child_env(2)
    procs = [start([PYTHON, WAIT_THEN_DIE, address, str(i), "4", mode, str(victim_index)], env) for i in range(4)]
    try:
        for proc in procs:
            wait_for_line(proc, "READY", timeout=60)
        time.sleep(0.5)  # let the survivors enter the MPI call
        os.kill(procs[victim_index].pid, how)
        hit_at = time.monotonic()
        survivors = [p for i, p in enumerate(procs) if i != victim_index]
        results = collect(survivors, timeout=limit)
        return results, time.monotonic() - hit_at
    finally:
        for proc in procs:
            kill_group(proc)


@pytest.mark.parametrize("mode", ["barrier", "allreduce"])
def test_killing_a_process_stops_the_others_naming_it(mode):
    results, elapsed = stop_one_of_four(mode, 2, signal.SIGKILL, limit=15)
    assert elapsed < 15
    for result in results:
        assert result.returncode != 0
        assert "UNEXPECTEDLY PASSED" not in result.stdout
        assert "process 2" in result.stderr and "died" in result.stderr, result.stderr


def test_killing_the_coordinator_process_stops_the_others():
    results, elapsed = stop_one_of_four("allreduce", 0, signal.SIGKILL, limit=15)
    assert elapsed < 15
    for result in results:
        assert result.returncode != 0
        assert "process 0 died" in result.stderr, result.stderr


def test_a_frozen_process_is_named_after_the_heartbeat_timeout():
    results, elapsed = stop_one_of_four("barrier", 3, signal.SIGSTOP, limit=30)
    assert elapsed < 30  # heartbeat_timeout_seconds=5 in the program
    for result in results:
        assert result.returncode != 0
        assert "process 3" in result.stderr and "stopped answering" in result.stderr, result.stderr


def hit_two_of_four(mode: str, how: signal.Signals, limit: float) -> list:
    """Run 4 processes waiting in an MPI call, hit processes 2 and 3 at once with `how` (a host going down or
    freezing); the results of processes 0 and 1."""
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, WAIT_THEN_DIE, address, str(i), "4", mode, "3"], child_env(2)) for i in range(4)]
    try:
        for proc in procs:
            wait_for_line(proc, "READY", timeout=60)
        time.sleep(0.5)
        for victim in procs[2:]:
            os.kill(victim.pid, how)
        return collect(procs[:2], timeout=limit)
    finally:
        for proc in procs:
            kill_group(proc)


@pytest.mark.parametrize("how, mode, limit, words", [
    (signal.SIGKILL, "allreduce", 30, "died"),  # connections closed together
    (signal.SIGSTOP, "barrier", 40, "stopped answering"),  # silent together (heartbeat_timeout_seconds=5)
])
def test_processes_hit_together_are_all_named(how, mode, limit, words):
    for result in hit_two_of_four(mode, how, limit):
        assert result.returncode == 70, (result.returncode, result.stderr)
        assert "process 2 (pid" in result.stderr and "and process 3 (pid" in result.stderr, result.stderr
        assert words in result.stderr, result.stderr


def test_a_stopped_process_is_named_while_the_others_wait_and_blames_itself_when_resumed():
    """SIGSTOP one of four while the others wait in a barrier: every "still waiting" line names it; after the
    heartbeat timeout the others stop naming it; resumed, it does not blame process 0 for its own silence."""
    address = f"localhost:{free_port()}"
    env = child_env(2, MESHAX_STILL_WAITING_SECONDS="10")  # the first line comes after a survey found it silent
    procs = [start([PYTHON, WAIT_THEN_DIE, address, str(i), "4", "barrier", "3", "25"], env) for i in range(4)]
    try:
        for proc in procs:
            wait_for_line(proc, "READY", timeout=60)
        time.sleep(0.5)
        os.kill(procs[3].pid, signal.SIGSTOP)
        hit_at = time.monotonic()
        results = collect(procs[:3], timeout=120)
        elapsed = time.monotonic() - hit_at
        os.kill(procs[3].pid, signal.SIGCONT)
        stopped = collect(procs[3:], timeout=30)[0]
    finally:
        for proc in procs:
            kill_group(proc)
    assert elapsed < 85  # heartbeat_timeout_seconds=25
    for result in results:
        assert result.returncode != 0
        waiting = [line for line in result.stderr.splitlines() if "still waiting" in line]
        assert waiting and all("process 3, which has not answered for" in line and "stopped?" in line
                               for line in waiting), result.stderr
        assert "process 3 (pid" in result.stderr and "stopped answering" in result.stderr, result.stderr
    assert stopped.returncode != 0
    assert "process 3 (pid" in stopped.stderr and "stopped answering" in stopped.stderr, stopped.stderr
    assert "process 0 (the coordinator" not in stopped.stderr and "lost the connection" not in stopped.stderr


def test_a_crash_in_native_code_is_reported_and_named_by_the_others():
    """A segmentation fault says where the process was (faulthandler), and the others name it at once."""
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, "tests/programs/crash_in_native_code.py", address, str(i), "3"], child_env(1))
             for i in range(3)]
    try:
        results = collect(procs, timeout=60)
    finally:
        for proc in procs:
            kill_group(proc)
    assert results[1].returncode != 0 and "Segmentation fault" in results[1].stderr, results[1].stderr
    assert "crash_in_native_code.py" in results[1].stderr, results[1].stderr  # the line it crashed on
    for result in (results[0], results[2]):
        assert result.returncode == 70, (result.returncode, result.stderr)
        assert "process 1" in result.stderr and "died" in result.stderr, result.stderr


def run_native_exit(mode: str, witness: int = 1) -> list:
    """tests/programs/native_exit.py on 3 processes in `mode`; their results."""
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, "tests/programs/native_exit.py", address, str(i), "3", mode, str(witness)], child_env(1))
             for i in range(3)]
    try:
        return collect(procs, timeout=90)
    finally:
        for proc in procs:
            kill_group(proc)


@pytest.mark.parametrize("witness", [0, 1])
def test_a_native_exit_after_a_peer_died_names_the_dead_not_the_witness(witness):
    """MPICH's transport asserting on a dead peer's connection ends a survivor through the C library's exit(1):
    that survivor (process 0, which hosts the coordinator, or another) still waits for the coordinator's word
    and, like the others, exits 70 naming the dead."""
    results = run_native_exit("after_death", witness)
    assert results[2].returncode == -signal.SIGKILL
    for result in (results[0], results[1]):
        assert result.returncode == 70, (result.returncode, result.stderr)
        assert "process 2" in result.stderr and "died" in result.stderr, result.stderr
        assert f"process {witness} " not in result.stderr.replace(f"process {witness} (pid", ""), result.stderr


def test_a_native_exit_alone_is_reported_and_named_by_the_others():
    """MPI ending a process from inside with nobody dead: that process says so and exits 1; the others name it."""
    results = run_native_exit("alone")
    assert results[1].returncode == 1, (results[1].returncode, results[1].stderr)
    assert "its MPI library ended it from inside" in results[1].stderr, results[1].stderr
    for result in (results[0], results[2]):
        assert result.returncode == 70, (result.returncode, result.stderr)
        assert "process 1" in result.stderr and "MPI library ended it" in result.stderr, result.stderr


def test_a_normal_end_does_not_run_the_native_exit_report():
    results = run_native_exit("normal")
    for result in results:
        assert result.returncode == 0 and "NORMAL END" in result.stdout, (result.returncode, result.stderr)
        assert "MPI library" not in result.stderr, result.stderr


def test_process_id_out_of_range():
    results = run_independent(INIT_ONLY, 1, 1, timeout=30)  # argv: address 0 1
    assert results[0].returncode == 0
    proc = start([PYTHON, INIT_ONLY, f"localhost:{free_port()}", "4", "4"], child_env(1))
    result = collect([proc], timeout=30)[0]
    assert result.returncode != 0
    assert "process_id=4 is out of range for num_processes=4" in result.stderr


def test_unresolvable_coordinator_host_fails_at_once():
    proc = start([PYTHON, INIT_ONLY, "no-such-host.invalid:1234", "1", "2", "3"], child_env(1))
    began = time.monotonic()
    result = collect([proc], timeout=30)[0]
    assert time.monotonic() - began < 20
    assert result.returncode != 0
    assert "cannot be resolved" in result.stderr and "no-such-host.invalid" in result.stderr


def test_unreachable_coordinator_times_out_naming_process_0():
    address = f"127.0.0.1:{free_port()}"
    proc = start([PYTHON, INIT_ONLY, address, "1", "2", "2"], child_env(1))
    result = collect([proc], timeout=30)[0]
    assert result.returncode != 0
    assert f"could not reach the coordinator at {address} within 2 s" in result.stderr
    assert "process 0" in result.stderr


def test_coordinator_port_in_use():
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = start([PYTHON, INIT_ONLY, f"localhost:{port}", "0", "2", "5"], child_env(1))
        result = collect([proc], timeout=30)[0]
    assert result.returncode != 0
    assert f"cannot listen on port {port}" in result.stderr and "already in use" in result.stderr


def test_startup_timeout_names_the_processes_that_never_connected():
    address = f"localhost:{free_port()}"
    env = child_env(1)
    procs = [start([PYTHON, INIT_ONLY, address, str(i), "4", "3"], env) for i in (0, 2)]
    results = collect(procs, timeout=40)
    for result in results:
        assert result.returncode != 0
        assert "processes [1, 3] of 4 never connected" in result.stderr, result.stderr


def test_two_processes_with_the_same_id():
    address = f"localhost:{free_port()}"
    env = child_env(1)
    procs = [start([PYTHON, INIT_ONLY, address, str(i), "3", "4"], env) for i in (0, 1)]
    time.sleep(1.0)
    procs.append(start([PYTHON, INIT_ONLY, address, "1", "3", "4"], env))
    results = collect(procs, timeout=40)
    assert all(r.returncode != 0 for r in results)
    assert any("process_id=1 is already registered" in r.stderr for r in results)


def test_disagreeing_process_counts():
    address = f"localhost:{free_port()}"
    env = child_env(1)
    procs = [start([PYTHON, INIT_ONLY, address, "0", "2", "20"], env)]
    time.sleep(0.5)
    procs.append(start([PYTHON, INIT_ONLY, address, "1", "3", "20"], env))
    results = collect(procs, timeout=40)
    assert all(r.returncode != 0 for r in results)
    assert all("num_processes=3 but process 0 with num_processes=2" in r.stderr for r in results), [
        r.stderr for r in results]


def test_initialize_after_device_access_and_twice():
    code = (
        "import meshax\n"
        "meshax.devices()\n"
        "try:\n"
        "    meshax.distributed.initialize('localhost:1', 2, 0)\n"
        "except RuntimeError as e:\n"
        "    print('REFUSED', e)\n"
    )
    out = subprocess.run([PYTHON, "-c", code], env=child_env(2), capture_output=True, text=True, timeout=30)
    assert "REFUSED meshax.distributed.initialize() must be called before" in out.stdout
    code = (
        "import meshax\n"
        "meshax.distributed.initialize('localhost:1', 1, 0)\n"
        "try:\n"
        "    meshax.distributed.initialize('localhost:1', 1, 0)\n"
        "except RuntimeError as e:\n"
        "    print('REFUSED', e)\n"
    )
    out = subprocess.run([PYTHON, "-c", code], env=child_env(2), capture_output=True, text=True, timeout=30)
    assert "REFUSED meshax.distributed.initialize should only be called once." in out.stdout


def test_uncaught_exception_in_one_process_stops_the_others():
    code = (
        "import sys, time, meshax\n"
        "from meshax._src.runtime.distributed import runtime\n"
        "meshax.distributed.initialize(sys.argv[1], 3, int(sys.argv[2]))\n"
        "if meshax.process_index() == 1:\n"
        "    raise ValueError('bad batch')\n"
        "runtime().process_group(range(3)).barrier()\n"
    )
    address = f"localhost:{free_port()}"
    env = child_env(1)
    procs = [start([PYTHON, "-c", code, address, str(i)], env) for i in range(3)]
    results = collect(procs, timeout=30)
    assert all(r.returncode != 0 for r in results)
    for index in (0, 2):
        assert "process 1 failed: uncaught ValueError: bad batch" in results[index].stderr, results[index].stderr


HANG = "tests/programs/hang.py"


def run_hang(mode: str) -> list:
    address = f"localhost:{free_port()}"
    env = child_env(1)
    procs = [start([PYTHON, HANG, address, str(i), "3", mode], env) for i in range(3)]
    return collect(procs, timeout=60)


def test_watchdog_names_a_process_that_skips_a_collective():
    """The seeds' mistake: only process 0 calls device_put; everyone exits naming it and its line."""
    began = time.monotonic()
    results = run_hang("lonely")
    assert time.monotonic() - began < 40
    for result in results:
        assert result.returncode != 0
        assert "collective watchdog" in result.stderr, result.stderr
        assert "process 0: in device_put/reshard" in result.stderr and "hang.py:17" in result.stderr
        assert "process 1: in shutdown" in result.stderr


def test_watchdog_names_a_process_stuck_in_python():
    began = time.monotonic()
    results = run_hang("sleeper")
    assert time.monotonic() - began < 40
    for result in results:
        assert result.returncode != 0
        assert "FINISHED" not in result.stdout
        assert "process 2: not in a communication; running" in result.stderr, result.stderr
        assert "process 0: in MPI Allreduce" in result.stderr and "hang.py:21" in result.stderr


def test_desync_check_names_every_process_operation():
    """On by default: a reduction of another size on one process fails the job, naming every operation."""
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, "tests/programs/desync.py", address, str(i)], child_env(1)) for i in range(3)]
    results = collect(procs, timeout=60)
    for result in results:
        assert result.returncode != 0
        assert "ran different operations: they are at communication #1 among processes [0,1,2]" in result.stderr
        assert "process 1: in MPI Allreduce ('sum', (5,), '<f4') among processes [0, 1, 2]" in result.stderr
        assert "process 0: in MPI Allreduce ('sum', (4,), '<f4')" in result.stderr and "desync.py:7" in result.stderr


def test_host_data_of_different_shapes_is_refused_everywhere():
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, "tests/programs/host_mismatch.py", address, str(i)], child_env(1)) for i in range(3)]
    for result in collect(procs, timeout=60):
        assert result.returncode != 0 and "FINISHED" not in result.stdout
        assert "process 1: in device_put of host data ((6, 4), '<f4')" in result.stderr, result.stderr


def test_a_process_with_a_negative_id_ends_the_start_up_of_every_process():
    """process_id=-1 knows the job token, so it tells the coordinator why it cannot join: the others stop at
    once (they would wait 120 s), naming it and the reason."""
    env = child_env(1, MESHAX_STILL_WAITING_SECONDS="1")
    misfit_result, results, elapsed = start_up_with_a_latecomer(f"localhost:{free_port()}", env, "-1", env)
    assert elapsed < 15
    assert misfit_result.returncode != 0
    assert "ValueError: process_id=-1 is out of range for num_processes=4" in misfit_result.stderr
    for result in results:
        assert result.returncode != 0 and "OK" not in result.stdout
        assert "could not join the job: process_id=-1 is out of range for num_processes=4" in result.stderr, \
            result.stderr


def test_a_process_that_dies_after_connecting_ends_the_start_up():
    """Process 2 registers, then is killed while the job waits for process 3: the others stop at once."""
    address = f"localhost:{free_port()}"
    env = child_env(1, MESHAX_STILL_WAITING_SECONDS="1")
    procs = [start([PYTHON, INIT_ONLY, address, str(i), "4", "120"], env) for i in range(3)]
    try:
        deadline = time.monotonic() + 60
        while "still waiting for processes [3]" not in procs[2].stderr.readline():  # it has registered
            assert time.monotonic() < deadline and procs[2].poll() is None
        os.kill(procs[2].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        results = collect(procs[:2], timeout=60)
        elapsed = time.monotonic() - killed_at
    finally:
        for proc in procs:
            kill_group(proc)
    assert elapsed < 15
    for result in results:
        assert result.returncode != 0 and "OK" not in result.stdout
        assert "process 2 (pid" in result.stderr and "died during start-up" in result.stderr, result.stderr


def test_a_launcher_start_that_never_completes_times_out_naming_the_cause(tmp_path):
    """Under mpiexec a process that exits before initialize() leaves the others in MPI_Init (mpiexec does not
    stop them): they end at initialization_timeout saying so."""
    script = tmp_path / "prog.py"
    script.write_text(
        "import os, sys\n"
        "if os.environ.get('PMI_RANK') == '2':\n"
        "    sys.exit('rank 2: bad configuration')\n"
        "import meshax\n"
        "meshax.distributed.initialize(initialization_timeout=8)\n"
        "print('JOINED', flush=True)\n"
    )
    result = run_mpiexec(str(script), 4, 1, timeout=60)
    assert result.returncode != 0 and "JOINED" not in result.stdout
    assert "rank 2: bad configuration" in result.stderr
    assert "MPI_Init under the MPI launcher did not complete within 8 s" in result.stderr, result.stderr  # then
    # mpiexec stops the others: one such line or more
