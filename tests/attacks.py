"""An outsider attacking a running job's coordinator port, and the job it attacks; for the security tests.

The outsider knows the port but not the job token. Every attack returns what the
coordinator sent back, which must be nothing but its challenge (and `denied`).
"""
from __future__ import annotations

import json
import os
import random
import re
import secrets
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from multiprocess import kill_group

CHALLENGE_ONLY = re.compile(rb"(meshax-auth-1 [0-9a-f]{64}\n(denied\n)?)?")
WORKLOAD = "tests/programs/sec_workload.py"


def expected_checksum() -> float:
    """What sec_workload.py prints for its first round on 8 devices."""
    value = np.arange(8 * 6, dtype=np.float32).reshape(8, 6) / np.float32(7.0)
    parts = [value.sum(axis=0, keepdims=True), value, np.roll(value, 1, axis=0), value @ value.T]
    return float(sum(np.asarray(p, np.float64).sum() for p in parts))


# ---- a job whose output is read while it runs ------------------------------------------------------


@dataclass
class Job:
    """Processes whose stdout/stderr lines are collected by threads, so tests can wait for a line."""

    procs: list[subprocess.Popen]
    out: list[list[str]] = field(default_factory=list)
    err: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.out = [[] for _ in self.procs]
        self.err = [[] for _ in self.procs]
        self._threads = []
        for proc, out, err in zip(self.procs, self.out, self.err):
            for pipe, sink in ((proc.stdout, out), (proc.stderr, err)):
                thread = threading.Thread(target=lambda p=pipe, s=sink: s.extend(iter(p.readline, "")), daemon=True)
                thread.start()
                self._threads.append(thread)

    def wait_for(self, text: str, count: int, timeout: float) -> None:
        """Wait until `count` stdout lines (over all processes) contain `text`."""
        deadline = time.monotonic() + timeout
        while sum(text in line for out in self.out for line in list(out)) < count:
            if time.monotonic() > deadline or all(p.poll() is not None for p in self.procs):
                raise AssertionError(f"no {count} {text!r} lines within {timeout} s: {self.describe()}")
            time.sleep(0.05)

    def finish(self, timeout: float) -> list[int]:
        """Wait for every process (at most `timeout` s in all), then kill what is left; the exit codes."""
        deadline = time.monotonic() + timeout
        try:
            for proc in self.procs:
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
        finally:
            self.kill()
        for thread in self._threads:
            thread.join(5)
        return [proc.returncode for proc in self.procs]

    def kill(self) -> None:
        for proc in self.procs:
            kill_group(proc)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def stdout(self) -> str:
        return "".join(line for out in self.out for line in out)

    def stderr(self) -> str:
        return "".join(line for err in self.err for line in err)

    def describe(self) -> str:
        codes = [p.poll() for p in self.procs]
        return f"exit codes {codes}\nstdout:\n{self.stdout()}\nstderr:\n{self.stderr()[-3000:]}"


# ---- listening sockets from /proc -------------------------------------------------------------------


def _decode(address: str, v6: bool) -> tuple[str, int]:
    ip_hex, port_hex = address.split(":")
    raw = bytes.fromhex(ip_hex)
    if v6:
        ip = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    else:
        ip = socket.inet_ntoa(raw[::-1])
    return ip, int(port_hex, 16)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    stat = handle.read()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry))
    return found


def listeners(pids: list[int]) -> list[tuple[str, int]]:
    """(ip, port) of every listening TCP socket that one of `pids` holds open."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
        except OSError:
            continue
    found = []
    for path, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(path) as handle:
            for line in handle.readlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and int(parts[9]) in inodes:  # 0A: LISTEN
                    found.append(_decode(parts[1], v6))
    return found


# ---- attacks ------------------------------------------------------------------------------------------


def exchange(port: int, payload: bytes, *, hold: float = 0.0, wait: float = 15.0) -> tuple[bytes, float]:
    """Connect, send `payload`, keep the connection `hold` s, then read until the coordinator closes it
    (at most `wait` s more); returns what it sent and how long the connection lasted."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        received = b""
        try:
            sock.sendall(payload)
            time.sleep(hold)
            sock.settimeout(wait)
            while chunk := sock.recv(65536):
                received += chunk
        except (ConnectionResetError, BrokenPipeError, socket.timeout):
            pass
    return received, time.monotonic() - started


def forged_handshake(port: int, kind: str, process_id: int) -> bytes:
    """Answer the challenge with a well-formed handshake whose MAC is made up; returns all that came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        received = b""
        while not received.endswith(b"\n"):
            received += sock.recv(1024)
        sock.sendall(f"meshax-auth-1 {kind} {process_id} {secrets.token_hex(32)} {secrets.token_hex(32)}\n".encode())
        try:
            while chunk := sock.recv(1024):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def long_line(port: int, total: int) -> int:
    """Send up to `total` bytes without a newline; returns how many the coordinator took before closing."""
    sent = 0
    chunk = b"x" * (1 << 20)
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        try:
            while sent < total:
                sent += sock.send(chunk)
        except (ConnectionResetError, BrokenPipeError):
            pass
    return sent


REGISTRATION = {"op": "register", "rid": 1, "process_id": 1, "num_processes": 4, "hostname": "evil", "pid": 1,
                "info": {"devices": [[131072, 0]]}, "timeout": 300}
SIMPLE_ATTACKS = {
    "abort (PMI)": b"cmd=abort exitcode=1 message=pwned\n",
    "barrier_in (PMI)": b"cmd=barrier_in\n",
    "initack as process 0 (PMI)": b"cmd=initack pmiid=0\n",
    "get (PMI)": b"cmd=get kvsname=x key=PMI_process_mapping\n",
    "put (PMI)": b"cmd=put kvsname=x key=PMI_hwloc_xmlfile value=/etc/passwd\n",
    "init and get_my_kvsname (PMI)": b"cmd=init pmi_version=1 pmi_subversion=1\ncmd=get_my_kvsname\n",
    "fake registration": (json.dumps(REGISTRATION) + "\n").encode(),
    "abort (control)": b'{"op":"abort","rid":1,"message":"pwned"}\n',
    "kv_get (control)": b'{"op":"kv_get","rid":1,"key":"x","timeout":0}\n',
    "random bytes": bytes(random.Random(7).randrange(256) for _ in range(4096)),
}


def run_attacks(port: int) -> dict[str, str]:
    """Every attack of the brief, concurrently; returns the failures (attack -> what went wrong)."""
    failures: dict[str, str] = {}

    def check(name: str, attack) -> None:
        try:
            problem = attack()
        except Exception as error:  # noqa: BLE001 - any surprise is a failure to report
            problem = f"raised {error!r}"
        if problem:
            failures[name] = problem

    def simple(payload: bytes, hold: float = 0.0):
        def attack() -> str | None:
            received, lasted = exchange(port, payload, hold=hold)
            if not CHALLENGE_ONLY.fullmatch(received):
                return f"the coordinator answered {received[:300]!r}"
            if lasted > hold + 12:
                return f"the connection stayed open {lasted:.1f} s"
            return None
        return attack

    def forged(kind: str, process_id: int):
        def attack() -> str | None:
            received = forged_handshake(port, kind, process_id)
            return None if CHALLENGE_ONLY.fullmatch(received) and received.endswith(b"denied\n") else \
                f"the coordinator answered {received[:300]!r}"
        return attack

    def hundred_megabytes() -> str | None:
        taken = long_line(port, 100 << 20)
        return None if taken < 16 << 20 else f"the coordinator took {taken >> 20} MB of one line"

    attacks = {name: simple(payload) for name, payload in SIMPLE_ATTACKS.items()}
    attacks["barrier_in held open without a newline (PMI)"] = simple(b"cmd=barrier_in", hold=1.0)
    attacks["silent connection"] = simple(b"", hold=0.5)
    attacks["forged control handshake as process 1"] = forged("control", 1)
    attacks["forged PMI handshake as process 0"] = forged("pmi", 0)
    attacks["forged report that a process cannot join"] = forged("report", 0)
    attacks["a 100 MB line"] = hundred_megabytes
    threads = [threading.Thread(target=check, args=item) for item in attacks.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return failures


# ---- fuzzing ------------------------------------------------------------------------------------------


def _hostile_payload(rng: random.Random) -> bytes:
    kind = rng.randrange(9)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
    if kind == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) + b"\n"
    if kind == 2:
        command = rng.choice(["abort", "barrier_in", "initack", "init", "get", "put", "finalize", "get_maxes", "x"])
        return f"cmd={command} pmiid={rng.randrange(-2, 9)} key=k{rng.randrange(9)} value=v\n".encode()
    if kind == 3:
        op = rng.choice(["register", "abort", "barrier", "kv_set", "kv_get", "goodbye", "stuck", "state", None])
        return (json.dumps({"op": op, "rid": rng.randrange(9), "process_id": rng.randrange(-1, 9),
                            "name": "meshax-shutdown", "key": "k", "value": "v", "timeout": 1}) + "\n").encode()
    if kind == 4:
        fields = ["meshax-auth-1", rng.choice(["control", "pmi", "x", ""]), str(rng.choice([0, 3, -1, 10 ** 12])),
                  secrets.token_hex(rng.choice([32, 31, 0])), secrets.token_hex(rng.choice([32, 64]))]
        return (" ".join(fields[:rng.randrange(1, 6)]) + rng.choice(["\n", "", "\n\n"])).encode()
    if kind == 5:
        return b"\x00" * rng.randrange(1, 5000) + b"\n"
    if kind == 6:
        return ("[" * rng.randrange(1, 100000) + "\n").encode()
    if kind == 7:
        return "é\udcff".encode("utf-8", "surrogatepass") * rng.randrange(1, 300) + b"\n"
    return b"x" * rng.randrange(1 << 19, 4 << 20)


def fuzz(port: int, seed: int, rounds: int, workers: int = 6) -> tuple[int, list[str]]:
    """Send `rounds` hostile payloads (or bursts of connections) on each of `workers` threads; returns
    (payloads sent, problems seen). What is sent depends on `seed` only, not on timing."""
    problems: list[str] = []
    count = [0]
    lock = threading.Lock()

    def worker(index: int) -> None:
        rng = random.Random(seed * 100 + index)
        for _ in range(rounds):
            try:
                if rng.random() < 0.05:
                    _burst(port, rng.randrange(20, 60))
                    received = b""
                else:
                    received, _ = exchange(port, _hostile_payload(rng), hold=rng.choice([0, 0, 0, 0.2]), wait=10)
            except (ConnectionResetError, BrokenPipeError):
                received = b""
            except OSError as error:  # refused or timed out: the coordinator is gone or stuck
                with lock:
                    problems.append(f"could not connect: {error!r}")
                return
            with lock:
                count[0] += 1
                if not CHALLENGE_ONLY.fullmatch(received):
                    problems.append(f"answered {received[:200]!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(rounds * 30)
    return count[0], problems


class IdleFlood:
    """Context manager: holds `size` idle connections to the port open (reopening any the coordinator closes),
    sending nothing; `opened` counts every connection it made."""

    def __init__(self, port: int, size: int) -> None:
        self.port, self.size = port, size
        self.opened = 0
        self._socks: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)

    def __enter__(self) -> "IdleFlood":
        for _ in range(self.size):
            self._socks.append(self._open())
        self._thread.start()
        return self

    def _open(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.setblocking(False)
        self.opened += 1
        return sock

    def _hold(self) -> None:
        while not self._stop.wait(0.1):
            for index, sock in enumerate(self._socks):
                try:
                    closed = sock.recv(4096) == b""  # the challenge, or b"" once the coordinator closed it
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed and not self._stop.is_set():
                    sock.close()
                    try:
                        self._socks[index] = self._open()
                    except OSError:
                        pass

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self._socks:
            sock.close()


def _burst(port: int, size: int) -> None:
    """Open `size` connections at once (more than the coordinator takes unauthenticated), then drop them."""
    socks = []
    try:
        for _ in range(size):
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        time.sleep(0.2)
    finally:
        for sock in socks:
            sock.close()
