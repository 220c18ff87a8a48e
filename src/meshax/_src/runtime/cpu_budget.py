"""How many CPU threads this controller may compute with: its share of the host's usable cores.

A host runs one or more controllers (processes of one job); each gets an equal share of the cores
it may use (its CPU affinity, capped by a cgroup v2 or v1 CPU quota), the first ones one more when
the cores do not divide evenly, so that together they use every core and never more. Every compute
path of the controller (BLAS, its devices' kernels run side by side, reductions, numexpr) stays
within that share: `split` divides it between calls run side by side and threads per call.
MESHAX_CPU_THREADS overrides the share. The policy functions are pure; `compute_threads()` applies
them to this process and host, reading the cgroup files once.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

OVERRIDE_VARIABLE = "MESHAX_CPU_THREADS"

_host_controllers = 1  # controllers of the job on this host, this one included
_host_index = 0  # this controller's position among them
_quota: list[float | None] = []  # the cgroup CPU quota, once read (a one-element cache)


# ---- the policy (pure functions) ------------------------------------------------------------------------------


def usable_cores(affinity: int, quota: float | None) -> int:
    """The cores a process may keep busy: its affinity, capped by a CPU quota (in CPUs, rounded up)."""
    cores = max(1, affinity)
    if quota is not None and quota > 0:
        cores = min(cores, max(1, math.ceil(quota - 1e-9)))
    return cores


def share(cores: int, controllers: int, index: int = 0, override: int | None = None) -> int:
    """The threads of controller `index` of `controllers` sharing `cores`: an equal share, the first
    `cores % controllers` one more; at least 1; `override` wins when given."""
    if override is not None:
        return max(1, override)
    controllers = max(1, controllers)
    base, extra = divmod(cores, controllers)
    return max(1, base + (1 if index < extra else 0))


def split(threads: int, calls: int) -> tuple[int, int]:
    """(calls run side by side, threads per call) for `calls` independent kernels within `threads`: one call
    gets every thread (through BLAS); many run side by side, each with an equal part of them (device_pool.py
    gives a call's part as single-threaded BLAS pieces: OpenBLAS runs concurrent multi-threaded calls one at
    a time)."""
    side_by_side = max(1, min(threads, calls))
    return side_by_side, max(1, threads // side_by_side)


def parse_override(text: str | None) -> int | None:
    """MESHAX_CPU_THREADS as a thread count (None when unset or empty)."""
    if text is None or not text.strip():
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{OVERRIDE_VARIABLE}={text!r} is not a positive thread count; set it to an integer >= 1 "
                         f"(e.g. {OVERRIDE_VARIABLE}=4) or unset it.")
    return value


# ---- cgroup CPU quota ---------------------------------------------------------------------------------------


def cgroup_quota(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup and its ancestors, in CPUs (the smallest one), or None if none
    is set or the files cannot be read. Handles cgroup v2 (cpu.max) and v1 (cpu.cfs_quota_us/cpu.cfs_period_us)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            quotas += _quotas_along(root, path, _v2_quota)
        elif "cpu" in controllers.split(","):
            for mount in (root / controllers, root / "cpu", root / "cpu,cpuacct"):
                found = _quotas_along(mount, path, _v1_quota)
                if found:
                    quotas += found
                    break
    return min(quotas) if quotas else None


def _quotas_along(mount: Path, path: str, read_quota) -> list[float]:
    """The quotas set in cgroup `path` under `mount` and its ancestors (the mount itself included: inside a
    container the mount is the container's own cgroup)."""
    quotas = []
    directory = mount / path.strip("/")
    while True:
        quota = read_quota(directory)
        if quota is not None:
            quotas.append(quota)
        if directory == mount or mount not in directory.parents:
            break
        directory = directory.parent
    return quotas


def _v2_quota(directory: Path) -> float | None:
    try:
        fields = (directory / "cpu.max").read_text().split()
        if len(fields) >= 1 and fields[0] != "max":
            period = float(fields[1]) if len(fields) > 1 else 100000.0
            return float(fields[0]) / period if period > 0 else None
    except (OSError, ValueError):
        pass
    return None


def _v1_quota(directory: Path) -> float | None:
    try:
        quota = float((directory / "cpu.cfs_quota_us").read_text())
        period = float((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


# ---- this process -------------------------------------------------------------------------------------------


def share_host(controllers: int, index: int) -> None:
    """Record that `controllers` controllers of the job (this one the `index`-th) run on this host."""
    global _host_controllers, _host_index
    _host_controllers, _host_index = max(1, controllers), max(0, index)


def host_controllers() -> int:
    return _host_controllers


def host_index() -> int:
    return _host_index


def override_text() -> str | None:
    return os.environ.get(OVERRIDE_VARIABLE)


def affinity_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


def host_cores() -> int:
    """The cores this process may use: its affinity, capped by its cgroup's CPU quota (read once)."""
    if not _quota:
        _quota.append(cgroup_quota())
    return usable_cores(affinity_cores(), _quota[0])


def compute_threads() -> int:
    """This controller's share of the host's usable cores (MESHAX_CPU_THREADS overrides it)."""
    return share(host_cores(), _host_controllers, _host_index, parse_override(os.environ.get(OVERRIDE_VARIABLE)))


def describe() -> str:
    """One line: this controller's threads and where the number comes from."""
    override = override_text()
    if override is not None and override.strip():
        return f"{compute_threads()} thread(s) per controller ({OVERRIDE_VARIABLE}={override})"
    quota = _quota[0] if _quota else cgroup_quota()
    capped = f", cgroup CPU quota {quota:g}" if quota is not None else ""
    return (f"{compute_threads()} thread(s) per controller (usable cores {host_cores()}: affinity {affinity_cores()}"
            f"{capped}; shared by {_host_controllers} controller(s) on this host)")
