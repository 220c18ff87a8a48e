"""Clean exits with real processes: signals, the launcher's timeout and Ctrl-C, one report per failure, quiet
logs and waits that sleep. Every job is time-bounded; each test checks that no process and no /dev/shm
segment of the job is left behind."""
from __future__ import annotations

import io
import os
import queue
import signal
import subprocess
import threading
import time

from multiprocess import PYTHON, child_env, collect, free_port, kill_group, start

JOB = "tests/programs/exits_job.py"
STARTUP = 60.0  # seconds for a 4-process job to print READY on a busy machine


class Lines:
    """Reads a process's stdout as it comes, so a test can wait for lines without blocking forever."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line)

    def wait_for(self, text: str, count: int, timeout: float) -> list[str]:
        deadline = time.monotonic() + timeout
        while sum(text in line for line in self.seen) < count:
            try:
                self.seen.append(self.lines.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"{count} {text!r} lines not printed within {timeout} s: {self.seen}") from None
        return [line for line in self.seen if text in line]


def ready_info(lines: list[str]) -> tuple[list[int], set[str]]:
    """Pids and MPICH segment names from "READY pid segments..." lines (launcher-prefixed or not)."""
    pids, segments = [], set()
    for line in lines:
        words = line.split("READY", 1)[1].split()
        pids.append(int(words[0]))
        segments.update(words[1:])
    return pids, segments


def assert_nothing_left(pids: list[int], segments: set[str]) -> None:
    """Once every process of the job has ended (within 10 s), none of its MPICH segments is left. (A process
    lists only the segments still linked when it prints READY: under load MPICH may have unlinked them all by
    then, and none can be left behind.)"""
    deadline = time.monotonic() + 10
    for pid in pids:
        while _alive(pid):
            assert time.monotonic() < deadline, f"process {pid} is still running"
            time.sleep(0.05)
    left = [name for name in segments if os.path.exists(os.path.join("/dev/shm", name))]
    assert not left, f"left in /dev/shm: {left}"


def _alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def launch(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return start([PYTHON, "-m", "meshax", "launch", *args], env or child_env())


def test_sigterm_to_one_process_of_four_stops_all_with_one_line_each():
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, JOB, "wait", address, str(i), "4"], child_env(1)) for i in range(4)]
    try:
        ready = [Lines(p).wait_for("READY", 1, STARTUP)[0] for p in procs]
        time.sleep(0.5)  # process 2 is now waiting inside an MPI barrier
        os.kill(procs[2].pid, signal.SIGTERM)
        results = collect(procs, timeout=30)
    finally:
        for proc in procs:
            kill_group(proc)
    assert results[2].returncode == 143
    assert results[2].stderr.splitlines() == ["meshax: process 2 stopped by SIGTERM"]
    for i in (0, 1, 3):
        assert results[i].returncode == 70, results[i].stderr
        assert results[i].stderr.splitlines() == ["meshax: process 2 failed: stopped by SIGTERM"]
    assert_nothing_left(*ready_info(ready))


def test_sigint_to_the_launcher_prints_one_line_and_exits_130():
    launcher = launch("-n", "4", "--cpu-devices", "1", JOB, "wait")
    try:
        ready = Lines(launcher).wait_for("READY", 4, STARTUP)
        time.sleep(0.5)
        os.kill(launcher.pid, signal.SIGINT)
        result = collect([launcher], timeout=30)[0]
    finally:
        kill_group(launcher)
    assert result.returncode == 130, result.stderr
    assert result.stderr.splitlines() == ["meshax launch: interrupted by SIGINT; stopping processes 0, 1, 2, 3"]
    assert_nothing_left(*ready_info(ready))


def test_launcher_timeout_stops_the_job_and_exits_124():
    launcher = launch("-n", "4", "--cpu-devices", "1", "--timeout", "9", JOB, "wait",
                      env=child_env(MESHAX_STILL_WAITING_SECONDS="3"))  # every 10 s by default
    try:
        ready = Lines(launcher).wait_for("READY", 4, 15)
        result = collect([launcher], timeout=45)[0]
    finally:
        kill_group(launcher)
    assert result.returncode == 124, result.stderr
    waiting = [line for line in result.stderr.splitlines() if "still waiting for process 1" in line]
    assert len(waiting) >= 3  # the others say every 3 s that they wait for process 1, which sleeps
    assert [line for line in result.stderr.splitlines() if line not in waiting] == [
        "meshax launch: timed out after 9s; processes still running: 0, 1, 2, 3; killing them"]
    assert_nothing_left(*ready_info(ready))


def test_a_failure_under_the_launcher_is_reported_once_naming_the_users_line():
    launcher = launch("-n", "4", "--cpu-devices", "1", JOB, "fail")
    try:
        lines = Lines(launcher)
        result = collect([launcher], timeout=60)[0]
    finally:
        kill_group(launcher)
    assert result.returncode == 1, result.stderr
    err = result.stderr
    report = ("meshax: process 1 failed: uncaught ValueError: cannot reshape an array of shape (6,) (size 6) into "
              "shape (4,). at ")
    assert err.count(report) == 1, err
    assert f"{JOB}:31 in <module>" in err.split(report)[1].splitlines()[0]  # the user's line, not meshax's
    assert err.count("Traceback") == 1 and "[1] Traceback" in err  # only the failing process's own
    launcher_lines = [line for line in err.splitlines() if line.startswith("meshax launch:")]
    assert len(launcher_lines) == 1  # "; stopping the others" only if they had not stopped before it exited
    assert launcher_lines[0].startswith("meshax launch: process 1 exited with code 1"), launcher_lines
    time.sleep(0.5)
    ready = [line for line in lines.seen if "READY" in line]
    while not lines.lines.empty():
        line = lines.lines.get()
        if "READY" in line:
            ready.append(line)
    assert_nothing_left(*ready_info(ready))


def test_logs_are_quiet_by_default_and_waits_sleep():
    """A job that runs fine prints nothing on stderr; processes waiting 3 s for a slow one use little CPU."""
    launcher = launch("-n", "4", "--cpu-devices", "1", JOB, "slow")
    result = collect([launcher], timeout=90)[0]
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    waited = [line for line in result.stdout.splitlines() if "WAITED" in line]
    assert len(waited) == 3, result.stdout
    for line in waited:
        cpu, wall = (float(word.split("=")[1]) for word in line.split()[2:])
        assert wall > 2.5 and cpu < 0.5, line  # a spinning wait would use ~wall seconds of CPU


def test_meshax_log_info_shows_how_the_job_was_configured():
    env = child_env()
    env["MESHAX_LOG"] = "info"
    result = collect([launch("-n", "2", JOB, "slow", env=env)], timeout=60)[0]
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("configured by environment variables") == 2, result.stderr
    env["MESHAX_LOG"] = "loud"
    result = collect([launch("-n", "2", JOB, "slow", env=env)], timeout=60)[0]
    assert result.returncode != 0
    assert "MESHAX_LOG='loud' is not a log level; set it to one of debug, info, warning, error." in result.stderr


def test_a_job_of_one_process_and_a_programs_own_handlers_keep_their_signal_handling():
    code = (
        "import signal, meshax\n"
        "meshax.distributed.initialize('localhost:1', 1, 0)\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.set_wakeup_fd(-1))\n"
    )
    out = subprocess.run([PYTHON, "-c", code], env=child_env(1), capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "-1"], out.stderr
    mine = (
        "import signal, sys, meshax\n"
        "handler = lambda *a: None\n"
        "signal.signal(signal.SIGTERM, handler)\n"
        "meshax.distributed.initialize(sys.argv[1], 2, int(sys.argv[2]))\n"
        "print(signal.getsignal(signal.SIGTERM) is handler, signal.getsignal(signal.SIGINT) is not "
        "signal.default_int_handler)\n"
    )
    address = f"localhost:{free_port()}"
    results = collect([start([PYTHON, "-c", mine, address, str(i)], child_env(1)) for i in range(2)], timeout=60)
    for result in results:
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["True", "True"]


def test_the_launcher_shows_each_distinct_child_report_once_and_none_once_it_stops_the_job(capsys):
    from meshax._src.launch.launcher import _relay, _Reports

    watchdog = (b"meshax: collective watchdog: process 0 waited more than 3 s; what each process is doing:\n"
                b"  process 0: in MPI Allreduce called at train.py:9 in <module>\n"
                b"  process 1: not in a communication; running train.py:12 in <module>\n")
    reports = _Reports()
    for i in range(3):
        _relay(io.BytesIO(b"Traceback (most recent call last):\n" * (i == 1) + watchdog + b"bye\n"),
               f"[{i}] ", "stderr", reports)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["[0] meshax: collective watchdog: process 0 waited more than 3 s; what each process is doing:",
                     "[0]   process 0: in MPI Allreduce called at train.py:9 in <module>",
                     "[0]   process 1: not in a communication; running train.py:12 in <module>",
                     "[0] bye", "[1] Traceback (most recent call last):", "[1] bye", "[2] bye"]
    reports.muted = True
    _relay(io.BytesIO(b"meshax: process 3 failed: stopped by SIGINT\nother\n"), "[3] ", "stderr", reports)
    assert capsys.readouterr().err.splitlines() == ["[3] other"]


def test_sigint_to_every_process_of_a_job_gives_one_line_each_and_130():
    """As mpiexec forwards Ctrl-C: each process reports its own signal, not a peer's stop."""
    address = f"localhost:{free_port()}"
    procs = [start([PYTHON, JOB, "wait", address, str(i), "4"], child_env(1)) for i in range(4)]
    try:
        ready = [Lines(p).wait_for("READY", 1, STARTUP)[0] for p in procs]
        time.sleep(0.5)
        for proc in procs:
            os.kill(proc.pid, signal.SIGINT)
        results = collect(procs, timeout=30)
    finally:
        for proc in procs:
            kill_group(proc)
    for i, result in enumerate(results):
        assert result.returncode == 130, result.stderr
        assert result.stderr.splitlines() == [f"meshax: process {i} stopped by SIGINT"]
        assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    assert_nothing_left(*ready_info(ready))


def test_a_launcher_killed_by_sigkill_takes_its_children_with_it():
    """SIGKILL cannot be handled by the launcher: its children are told by the kernel (parent-death signal)."""
    launcher = launch("-n", "4", "--cpu-devices", "1", JOB, "wait")
    try:
        ready = Lines(launcher).wait_for("READY", 4, STARTUP)
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(10)
    finally:
        kill_group(launcher)
    assert_nothing_left(*ready_info(ready))
