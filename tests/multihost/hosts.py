"""Simulated hosts on one machine: each its own network, UTS, IPC, PID and mount namespace.

A `Cluster` makes a bridge in a network namespace of its own and N hosts, each a named network namespace
(`ip netns`) joined to the bridge by a veth pair, with address 10.231.0.<k+1>/24 on its `eth0`, and an
"init" process (`unshare --uts --ipc --pid --mount --fork --mount-proc`) that mounts a private tmpfs on
/dev/shm, sets the hostname `<prefix>-h<k>` and sleeps. Programs start inside a host through `nsenter`
into that init's namespaces. `close()` kills every host's processes (its init is PID 1 of the host's PID
namespace: killing it kills them all; the mount namespace, and so the /dev/shm tmpfs, goes with the last
of them) and deletes the network namespaces, which removes the veths and the bridge with them.

Names start with `mhx<pid of the test process>-`, so parallel pytest workers never collide; `sweep()`
removes what a killed earlier run of a process that no longer exists left behind.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PREFIX_PATTERN = re.compile(r"^mhx(\d+)-")
SUBNET = "10.231.0"
REPO = Path(__file__).resolve().parents[2]
PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else "python3"


def unavailable_reason() -> str | None:
    """Why namespaced hosts cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "the multi-host tier makes network, PID and mount namespaces, which needs root"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"the multi-host tier needs the `{tool}` command, which is not installed"
    probe = f"mhx{os.getpid()}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run `ip ARGS`; with `check`, a failure is an error naming the command and what it said."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie waiting to be reaped has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _kill_netns_processes(name: str) -> None:
    """SIGKILL every process whose network namespace is `name`."""
    for pid in _ip("netns", "pids", name, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def sweep() -> list[str]:
    """Remove the namespaces left by earlier test processes that no longer run; returns their names."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = PREFIX_PATTERN.match(name)
        if match and not _alive(int(match.group(1))):
            _kill_netns_processes(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    return removed


@dataclass
class Host:
    """One simulated host: its network namespace, address, hostname and init process."""

    index: int
    netns: str
    address: str
    hostname: str
    init: subprocess.Popen | None = None
    init_pid: int = 0  # the host PID of the PID-namespace init (the child of `unshare --fork`)
    procs: list[subprocess.Popen] = field(default_factory=list)

    def popen(self, argv: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
        """Start `argv` inside this host (all five namespaces) with exactly `env`."""
        enter = ["nsenter", "-t", str(self.init_pid), "--net", "--uts", "--ipc", "--pid", "--mount",
                 "--wd=" + str(REPO), "--"]
        proc = subprocess.Popen(enter + ["env", "-i", *[f"{k}={v}" for k, v in env.items()], *argv],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a short command inside this host and return what it did."""
        enter = ["nsenter", "-t", str(self.init_pid), "--net", "--uts", "--ipc", "--pid", "--mount", "--"]
        return subprocess.run(enter + argv, capture_output=True, text=True, timeout=timeout)

    def link_bytes(self) -> tuple[int, int]:
        """(tx, rx) bytes of this host's link to the bridge, read in its network namespace."""
        info = json.loads(_ip("-n", self.netns, "-s", "-j", "link", "show", "dev", "eth0").stdout)[0]
        stats = info.get("stats64", info.get("stats"))
        return int(stats["tx"]["bytes"]), int(stats["rx"]["bytes"])

    def set_link(self, up: bool) -> None:
        """Bring this host's link to the bridge up or down (a partition)."""
        _ip("-n", self.netns, "link", "set", "eth0", "up" if up else "down")

    def kill_programs(self) -> None:
        """SIGKILL every process of this host but its init, all at once (a host that dies)."""
        victims = [pid for pid in namespace_members(self.init_pid) if pid != self.init_pid]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def namespace_members(pid: int) -> list[int]:
    """The host PIDs of every process in the PID namespace of process `pid`."""
    try:
        target = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return []
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == target:
                    members.append(int(entry))
            except OSError:
                pass
    return members


class Cluster:
    """N namespaced hosts on one bridge; use as a context manager (or call `close()`) to tear it down."""

    def __init__(self, num_hosts: int, tag: str = "c") -> None:
        self.prefix = f"mhx{os.getpid()}-{tag}{time.monotonic_ns() % 100000}"
        self.bridge_netns = f"{self.prefix}-br"
        self.hosts: list[Host] = []
        try:
            self._build(num_hosts)
        except BaseException:
            self.close()
            raise

    def _build(self, num_hosts: int) -> None:
        _ip("netns", "add", self.bridge_netns)
        _ip("-n", self.bridge_netns, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge_netns, "link", "set", "br0", "up")
        for k in range(num_hosts):
            host = Host(k, f"{self.prefix}-h{k}", f"{SUBNET}.{k + 1}", f"{self.prefix}-h{k}")
            self.hosts.append(host)
            _ip("netns", "add", host.netns)
            _ip("-n", host.netns, "link", "add", "eth0", "type", "veth", "peer", "name", f"v{k}",
                "netns", self.bridge_netns)
            _ip("-n", self.bridge_netns, "link", "set", f"v{k}", "master", "br0", "up")
            _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _ip("-n", host.netns, "link", "set", "eth0", "up")
            _ip("-n", host.netns, "link", "set", "lo", "up")
            self._start_init(host)

    def _start_init(self, host: Host) -> None:
        script = (f"mount -t tmpfs -o size=1g,mode=1777 tmpfs /dev/shm && hostname {host.hostname} && "
                  "echo up && exec sleep 86400")
        host.init = subprocess.Popen(
            ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--ipc", "--pid", "--mount", "--fork",
             "--mount-proc", "--kill-child", "sh", "-c", script],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        line = host.init.stdout.readline()
        if line.strip() != "up":
            raise RuntimeError(f"host {host.hostname} did not start: {host.init.stderr.read()}")
        children = Path(f"/proc/{host.init.pid}/task/{host.init.pid}/children").read_text().split()
        host.init_pid = int(children[0])

    def close(self) -> None:
        """Kill every process and delete every namespace (with them the veths, the bridge and the tmpfs)."""
        for host in self.hosts:
            for proc in host.procs:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if host.init is not None:
                try:
                    os.killpg(host.init.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if host.init_pid:
                try:
                    os.kill(host.init_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _kill_netns_processes(host.netns)
        for proc in [p for host in self.hosts for p in host.procs] + [h.init for h in self.hosts if h.init]:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 10
        while not all(gone(host.init_pid) for host in self.hosts if host.init_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        for host in self.hosts:
            _ip("netns", "del", host.netns, check=False)
        _ip("netns", "del", self.bridge_netns, check=False)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
