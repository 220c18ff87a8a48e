"""Running real multi-process meshax jobs from tests, bounded in time, leaving nothing behind."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
MPIEXEC = str(Path(PYTHON).parent / "mpiexec")


@dataclass
class Result:
    """What one process of a job did."""

    returncode: int
    stdout: str
    stderr: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(cpu_devices: int | None = None, **extra: str) -> dict[str, str]:
    """The environment of a test process: no inherited meshax/JAX/MPI job variables."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("MESHAX_", "JAX_", "XLA_", "PMI_", "PMIX_", "OMPI_", "SLURM_", "MPI_LOCAL", "HYDRA_"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    if cpu_devices is not None:
        env["JAX_NUM_CPU_DEVICES"] = str(cpu_devices)
    env.update(extra)
    return env


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=REPO)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def collect(procs: list[subprocess.Popen], timeout: float) -> list[Result]:
    """Wait for every process (at most `timeout` s in all), killing whatever is left; never leaks."""
    deadline = time.monotonic() + timeout
    results = []
    try:
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(proc)
                out, err = proc.communicate()
                err += f"\n[test harness: killed after {timeout} s]"
            results.append(Result(proc.returncode, out, err))
    finally:
        for proc in procs:
            kill_group(proc)
    return results


def run_independent(script: str, n: int, cpu_devices: int, *args: str, timeout: float = 60,
                    env: dict[str, str] | None = None) -> list[Result]:
    """Start `n` processes by hand, as the seeds' shell loop does: script ADDRESS ID N args."""
    address = f"localhost:{free_port()}"
    base = env or child_env(cpu_devices)
    procs = [start([PYTHON, script, address, str(i), str(n), *args], base) for i in range(n)]
    return collect(procs, timeout)


def run_launcher(script: str, n: int, cpu_devices: int, *args: str, timeout: float = 60) -> Result:
    """`meshax launch -n N --cpu-devices K script args`; one combined result."""
    proc = start([PYTHON, "-m", "meshax", "launch", "-n", str(n), "--cpu-devices", str(cpu_devices),
                  script, *args], child_env())
    return collect([proc], timeout)[0]


def run_mpiexec(script: str, n: int, cpu_devices: int, *args: str, timeout: float = 60) -> Result:
    proc = start([MPIEXEC, "-n", str(n), PYTHON, script, *args], child_env(cpu_devices))
    return collect([proc], timeout)[0]


def lines_by_process(launcher_output: str) -> dict[int, list[str]]:
    """Split the launcher's '[i] line' output into each process's lines."""
    by_process: dict[int, list[str]] = {}
    for line in launcher_output.splitlines():
        if line.startswith("[") and "] " in line:
            index, _, text = line[1:].partition("] ")
            if index.isdigit():
                by_process.setdefault(int(index), []).append(text)
    return by_process


def checked_lines(script: str, n: int, cpu_devices: int, *, timeout: float = 180) -> dict[int, list[str]]:
    """Each process's lines of a checking program (tests/programs/*: CHECK name / FAIL ... lines) run under
    `meshax launch`, once the job is seen to exit 0 with every process present and no FAIL line."""
    result = run_launcher(script, n, cpu_devices, timeout=timeout)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    by_process = lines_by_process(result.stdout)
    assert sorted(by_process) == list(range(n)), result.stdout[-3000:]
    failures = [f"[{p}] {line}" for p, lines in by_process.items() for line in lines if line.startswith("FAIL")]
    assert not failures, failures
    return by_process


def check_names(lines: list[str]) -> set[str]:
    """The names of a checking program's passed checks (its `CHECK name` lines)."""
    return {line.split()[1] for line in lines if line.startswith("CHECK")}


INIT_ONLY = "tests/programs/init_only.py"


def wait_for_stderr_line(proc: subprocess.Popen, text: str, timeout: float) -> None:
    """Read `proc`'s stderr until a line contains `text` (the process must still be running)."""
    deadline = time.monotonic() + timeout
    while text not in proc.stderr.readline():
        assert time.monotonic() < deadline and proc.poll() is None, f"no {text!r} line"


def start_up_with_a_latecomer(address: str, env: dict[str, str], latecomer_id: str,
                              latecomer_env: dict[str, str]) -> tuple[Result, list[Result], float]:
    """Processes 0, 1 and 3 of a 4-process job start and register (process 0 reports it still waits for process 2),
    then a process claiming id `latecomer_id` starts with its own environment. Returns its result, the others'
    results, and how many seconds after the latecomer ended the others did."""
    procs = [start([PYTHON, INIT_ONLY, address, str(i), "4", "120"], env) for i in (0, 1, 3)]
    latecomer = None
    try:
        wait_for_stderr_line(procs[0], "still waiting for processes [2]", timeout=60)
        latecomer = start([PYTHON, INIT_ONLY, address, latecomer_id, "4", "120"], latecomer_env)
        late_result = collect([latecomer], timeout=60)[0]
        late_ended = time.monotonic()
        results = collect(procs, timeout=60)
        return late_result, results, time.monotonic() - late_ended
    finally:
        for proc in [*procs, latecomer]:
            if proc is not None:
                kill_group(proc)
