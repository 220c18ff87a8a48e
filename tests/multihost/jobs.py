"""Starting a meshax job across simulated hosts with the documented start-up, and collecting what it did."""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .hosts import PYTHON, REPO, Cluster, Host

PROGRAMS = Path(__file__).resolve().parent / "programs"
COORDINATOR_PORT = 7070
PEER_FAILURE_EXIT_CODE = 70  # meshax's exit code for "the job failed elsewhere" (runtime/client.py)


@dataclass
class Outcome:
    """What one process did: its exit code, output, and the `RESULT {json}` lines it printed."""

    process_id: int
    returncode: int | None
    stdout: str
    stderr: str
    results: list[dict] = field(default_factory=list)

    def result(self, check: str) -> dict:
        """The RESULT line whose `check` is `check`; an error showing the output when there is none."""
        for item in self.results:
            if item.get("check") == check:
                return item
        raise AssertionError(f"process {self.process_id} printed no result {check!r}:\n{self.stdout}\n{self.stderr}")


def environment(process_id: int, num_processes: int, devices: int, coordinator: str, token: str,
                **extra: str) -> dict[str, str]:
    """A process's whole environment: the documented variables, the venv's meshax, nothing inherited."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8",
           "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{PROGRAMS}", "PYTHONUNBUFFERED": "1",
           "PYTHONFAULTHANDLER": "1", "MESHAX_COORDINATOR_ADDRESS": coordinator,
           "MESHAX_NUM_PROCESSES": str(num_processes), "MESHAX_PROCESS_ID": str(process_id),
           "MESHAX_NUM_CPU_DEVICES": str(devices), "MESHAX_JOB_TOKEN": token, "MESHAX_CPU_THREADS": "1"}
    env.update(extra)
    return env


class Job:
    """`per_host` processes of `program` on each host of `cluster` (or of its hosts `on_hosts`), consecutive ids
    host by host; the coordinator is on the first of them."""

    def __init__(self, cluster: Cluster, program: str, *args: str, per_host: int = 2, devices: int = 2,
                 on_hosts: list[int] | None = None, **extra: str) -> None:
        chosen = [cluster.hosts[k] for k in (range(len(cluster.hosts)) if on_hosts is None else on_hosts)]
        self.cluster = cluster
        self.token = secrets.token_hex(32)
        self.coordinator = f"{chosen[0].address}:{COORDINATOR_PORT}"
        self.num_processes = per_host * len(chosen)
        self.commands = [([PYTHON, str(PROGRAMS / program), *args], environment(
            i, self.num_processes, devices, self.coordinator, self.token, **extra)) for i in range(self.num_processes)]
        self.hosts: list[Host] = [chosen[i // per_host] for i in range(self.num_processes)]
        self.procs: list[subprocess.Popen] = [host.popen(*command) for host, command in zip(self.hosts, self.commands)]
        self.output: list[list[str]] = []
        self.readers: list[list[threading.Thread]] = []
        for proc in self.procs:
            self._read(proc)

    def _read(self, proc: subprocess.Popen) -> None:
        into = ["", ""]
        threads = [threading.Thread(target=_drain, args=(stream, into, slot), daemon=True)
                   for slot, stream in enumerate((proc.stdout, proc.stderr))]
        for thread in threads:
            thread.start()
        self.output.append(into)
        self.readers.append(threads)

    def start_again(self, process_id: int, *extra_args: str) -> int:
        """Start process `process_id` again on its host, with its environment and `extra_args` after its arguments;
        its index among the job's processes (for collect)."""
        command, env = self.commands[process_id]
        proc = self.hosts[process_id].popen(command + list(extra_args), env)
        self.procs.append(proc)
        self.hosts.append(self.hosts[process_id])
        self._read(proc)
        return len(self.procs) - 1

    def wait_for_line(self, text: str, timeout: float, which: list[int] | None = None) -> None:
        """Wait until every process in `which` (default all) has printed a line equal to `text`."""
        deadline = time.monotonic() + timeout
        for i in (range(len(self.procs)) if which is None else which):
            while text not in self.output[i][0].splitlines():
                if self.procs[i].poll() is not None and not any(t.is_alive() for t in self.readers[i]):
                    raise AssertionError(f"process {i} ended (code {self.procs[i].returncode}) before printing "
                                         f"{text!r}:\n{self.output[i][0]}\n{self.output[i][1]}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"process {i} did not print {text!r} within {timeout} s:\n"
                                         f"{self.output[i][0]}\n{self.output[i][1]}")
                time.sleep(0.05)

    def collect(self, timeout: float, which: list[int] | None = None) -> list[Outcome]:
        """Wait at most `timeout` s in all for the processes `which` (default all); kill what is left."""
        deadline = time.monotonic() + timeout
        outcomes = []
        for i in (range(len(self.procs)) if which is None else which):
            proc = self.procs[i]
            note = ""
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                note = f"\n[multihost tier: killed after {timeout} s]"
            for reader in self.readers[i]:
                reader.join(timeout=5)
            out, err = self.output[i]
            results = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
            outcomes.append(Outcome(i, proc.returncode, out, err + note, results))
        return outcomes


def _drain(stream, into: list[str], slot: int) -> None:
    """Append everything `stream` gives to `into[slot]` until its end."""
    for line in stream:
        into[slot] += line
    stream.close()


def run_alone(program: str, *args: str, devices: int, timeout: float, **extra: str) -> Outcome:
    """Run `program` as one namespace-free process with `devices` devices (the single-host reference)."""
    env = {k: v for k, v in environment(0, 1, devices, "", "", **extra).items()
           if k not in ("MESHAX_COORDINATOR_ADDRESS", "MESHAX_NUM_PROCESSES", "MESHAX_PROCESS_ID",
                        "MESHAX_JOB_TOKEN")}
    done = subprocess.run([PYTHON, str(PROGRAMS / program), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    results = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return Outcome(0, done.returncode, done.stdout, done.stderr, results)
