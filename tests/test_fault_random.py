"""Random faults in a busy job: 4 real processes (2 CPU devices each) run a loop of reshards, meshax.numpy ops
and shard_map collectives; one of them is killed (kill -9) at a random moment, or raises. Every survivor must
exit non-zero within 15 s naming the process that failed. Time-bounded; no process is left behind."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time

import pytest

from multiprocess import PYTHON, child_env, free_port, kill_group, start

WORKLOAD = "tests/programs/fault_workload.py"
N = 4
SURVIVOR_LIMIT = 15.0   # seconds the survivors may take to exit after the fault
STARTUP_LIMIT = 20.0    # seconds for the job to start and reach the kill point


class Job:
    """4 workload processes whose output is read as it comes (so that pipes never fill and the test can
    wait for a given number of progress lines)."""

    def __init__(self, *args: str) -> None:
        address = f"localhost:{free_port()}"
        env = child_env(2)
        self.procs = [start([PYTHON, WORKLOAD, address, str(i), str(N), *args], env) for i in range(N)]
        self.stdout: list[list[str]] = [[] for _ in range(N)]
        self.stderr: list[list[str]] = [[] for _ in range(N)]
        self.progress = [0] * N
        self._cond = threading.Condition()
        self._readers: list[list[threading.Thread]] = [[] for _ in range(N)]
        for i, proc in enumerate(self.procs):
            for stream, sink in ((proc.stdout, self.stdout[i]), (proc.stderr, self.stderr[i])):
                reader = threading.Thread(target=self._read, args=(i, stream, sink), daemon=True)
                reader.start()
                self._readers[i].append(reader)

    def _read(self, index: int, stream, sink: list[str]) -> None:
        for line in stream:
            with self._cond:
                sink.append(line)
                if line.startswith("PROGRESS"):
                    self.progress[index] += 1
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_progress(self, index: int, lines: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.progress[index] < lines:
                if self.procs[index].poll() is not None and self.progress[index] < lines:
                    raise AssertionError(f"process {index} exited ({self.procs[index].returncode}) after "
                                         f"{self.progress[index]} progress lines:\n{self.err(index)}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"process {index} printed {self.progress[index]} of {lines} progress lines "
                                         f"within {timeout} s:\n{self.err(index)}")
                self._cond.wait(min(left, 0.2))

    def wait_exit(self, indices: list[int], limit: float) -> list[int | None]:
        """The exit codes of `indices` (None: still running after `limit` s, then killed)."""
        deadline = time.monotonic() + limit
        codes: list[int | None] = []
        for i in indices:
            try:
                codes.append(self.procs[i].wait(timeout=max(0.01, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def drain(self, indices: list[int], timeout: float = 10.0) -> None:
        """Wait until the readers of the exited processes `indices` have taken all their output: a process's
        last line may still sit in the pipe when wait() returns (under load its reader runs much later)."""
        deadline = time.monotonic() + timeout
        for i in indices:
            if self.procs[i].poll() is not None:
                for reader in self._readers[i]:
                    reader.join(max(0.01, deadline - time.monotonic()))

    def segments(self) -> set[str]:
        """The MPICH shared-memory segments the job's processes created (they print them with READY)."""
        with self._cond:
            return {name for lines in self.stdout for line in lines if line.startswith("READY")
                    for name in line.split()[1:]}

    def err(self, index: int) -> str:
        with self._cond:
            return "".join(self.stderr[index])

    def out(self, index: int) -> str:
        with self._cond:
            return "".join(self.stdout[index])

    def close(self) -> None:
        for proc in self.procs:
            kill_group(proc)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for readers in self._readers:
            for reader in readers:
                reader.join(timeout=5)
        for proc in self.procs:
            for stream in (proc.stdout, proc.stderr):
                stream.close()


# Seeded random faults: victim and moment both come from the seed. The seeds are chosen so that process 0 (the
# coordinator's host) is among the victims and every process is a victim at least once.
SEEDS = [2, 4, 7, 11, 6, 13]


def plan(seed: int) -> tuple[int, int, float]:
    rng = random.Random(seed)
    victim = rng.randrange(N)
    after_lines = rng.randint(1, 30)
    extra_delay = rng.uniform(0.0, 0.05)  # lands inside a step: in a reshard, an op or a collective
    return victim, after_lines, extra_delay


assert {plan(seed)[0] for seed in SEEDS} == set(range(N)), [plan(seed) for seed in SEEDS]


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_a_random_process_at_a_random_point(seed):
    victim, after_lines, extra_delay = plan(seed)
    job = Job("loop")
    try:
        job.wait_progress(victim, after_lines, timeout=STARTUP_LIMIT)
        time.sleep(extra_delay)
        os.kill(job.procs[victim].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        survivors = [i for i in range(N) if i != victim]
        codes = job.wait_exit(survivors, SURVIVOR_LIMIT)
        elapsed = time.monotonic() - killed_at
        job.drain(survivors)
        for i, code in zip(survivors, codes):
            err = job.err(i)
            assert code is not None, f"process {i} still running {SURVIVOR_LIMIT} s after process {victim} was " \
                                     f"killed (plan {plan(seed)}):\n{err}"
            assert code != 0, f"process {i} exited 0 after process {victim} was killed:\n{err}"
            if victim == 0:
                assert "process 0 died" in err, f"process {i}:\n{err}"
            else:
                assert f"process {victim}" in err and "died" in err, f"process {i}:\n{err}"
            assert "Traceback" not in err, f"process {i} crashed instead of reporting the failure:\n{err}"
        assert elapsed < SURVIVOR_LIMIT
        assert job.wait_exit([victim], 5)[0] == -signal.SIGKILL
        left = [name for name in job.segments() if os.path.exists(os.path.join("/dev/shm", name))]
        assert not left, f"the failed job left MPICH shared memory behind: {left}"
    finally:
        job.close()


@pytest.mark.parametrize("raiser", [0, random.Random(17).randrange(1, N)])
def test_an_exception_in_one_process_stops_the_others_in_a_collective(raiser):
    job = Job("raise", str(raiser))
    try:
        job.wait_progress(raiser, 3, timeout=STARTUP_LIMIT)
        raised_at = time.monotonic()
        codes = job.wait_exit(list(range(N)), SURVIVOR_LIMIT)
        assert time.monotonic() - raised_at < SURVIVOR_LIMIT
        job.drain(list(range(N)))
        expected = f"process {raiser} failed: uncaught ValueError: fault injected in process {raiser}"
        for i, code in enumerate(codes):
            err = job.err(i)
            assert code is not None, f"process {i} still running {SURVIVOR_LIMIT} s after process {raiser} " \
                                     f"raised:\n{err}"
            assert code != 0, f"process {i} exited 0:\n{err}"
            if i == raiser:
                assert "ValueError: fault injected" in err, err
                continue
            assert expected in err, f"process {i}:\n{err}"
            assert "fault_workload.py" in err, f"the report should name the raising line:\n{err}"
            assert "PROGRESS 5" not in job.out(i)  # they were stuck waiting for the raiser (step 4)
        left = [name for name in job.segments() if os.path.exists(os.path.join("/dev/shm", name))]
        assert not left, f"the failed job left MPICH shared memory behind: {left}"
    finally:
        job.close()
