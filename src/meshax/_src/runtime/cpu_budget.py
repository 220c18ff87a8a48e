"""How many CPU threads this controller may compute with: its share of the host's usable cores.

A host runs one or more controllers (processes of one job); each gets an equal share of the cores
it may use (its CPU affinity, capped by a cgroup v2 or v1 CPU quota), the first ones one more when
the cores do not divide evenly, so that together they use every core and never more. Every compute
path of the controller (BLAS, its devices' kernels run side by side, reductions, numexpr) stays
within that share: `split` divides it between calls run side by side and threads per call.
MESHAX_CPU_THREADS overrides the share. The policy functions are pure; `compute_threads()` applies
them to this process and host, reading the cgroup files once.

Within the share, a call takes only what pays and what the machine can give now. A matrix product gets
BLAS threads by its size (`product_threads`): a thread that must be woken costs more than it saves on a
small product. And the share is cut to the cores other processes leave free (`threads_for_load`), read from
/proc/stat at most every LOAD_INTERVAL (`LoadReading`): a call split over more threads than there are free
cores waits, at each of its synchronisations, for a thread the scheduler gives a slice later. Measured on
2 cores, float32, OpenBLAS 0.3.34 with its threads sleeping at once, ms on 1 / 2 threads:

  product (m x k @ k x n)      quiet           1 busy loop     2 busy loops
  128 x 128 @ 128 x 128        0.044 / 0.096   0.050 / 0.108   0.044 / 8.0
  256 x 256 @ 256 x 256        0.33 / 0.29     0.34 / 8.0      0.33 / 8.0
  512 x 512 @ 512 x 512        2.6 / 1.7       6.7 / 5.5       2.7 / 8.0
  2048 x 784 @ 784 x 1024      33 / 21         40 / 32         34 / 44

A busy core costs every medium product a scheduler slice (8 ms): the free cores are rounded to the nearest,
and only products of PRODUCT_WHOLE_SHARE_FROM and more, which gain from their threads even then (40 against
32 ms beside one busy loop), keep the whole share. MESHAX_CPU_THREADS fixes the threads: products still get
one thread below the size that pays, but the load is not read.
"""
from __future__ import annotations

import math
import os
import time
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


# Multiply-adds (m * n * k) per BLAS thread from which a product gains from one more thread: quiet, 2 threads
# first beat 1 at 8.4M (1024x64 @ 64x128: 0.12 ms on 2, 0.17 on 1); 192^3 = 7.1M: 0.157 on 2, 0.139 on 1.
PRODUCT_PER_THREAD = 1 << 22
# Below this many multiply-adds a thread needs 128 rows of the result: 128x64 @ 64x1024 (8.4M) 0.21 ms on 2 threads
# against 0.19 on 1, 64x2048 @ 2048x64 0.24 against 0.18, 224^3 (11M) even; from 32M the columns split as well
# (16 x 128x1024 @ 1024x256: 9.3 ms on 2, 13.1 on 1).
PRODUCT_ROWS_PER_THREAD, PRODUCT_ANY_SHAPE_FROM = 128, 1 << 25
# From this many multiply-adds (20 ms and more on one thread) a product takes the whole share even while other
# processes keep cores busy: a wait for a thread's slice is small beside it, and more threads get more of the
# contended cores (the MLP's step, products of 1.6G-2.1G, beside 2 busy loops on 2 cores: 341 ms on 2 threads,
# 413 on 1, medians of 7 alternating runs; the GPT's of 0.4G-0.5G: even).
PRODUCT_WHOLE_SHARE_FROM = 1 << 30


def product_threads(multiply_adds: int, rows: int, available: int, share: int) -> int:
    """BLAS threads for one matrix product of `multiply_adds` (m * n * k; per matrix of a batched product, which
    BLAS runs one matrix at a time) and `rows` (m) when `available` of this controller's `share` are free: one
    per PRODUCT_PER_THREAD multiply-adds, and one per PRODUCT_ROWS_PER_THREAD rows below PRODUCT_ANY_SHAPE_FROM,
    within those available (the share from PRODUCT_WHOLE_SHARE_FROM); at least 1."""
    threads = share if multiply_adds >= PRODUCT_WHOLE_SHARE_FROM else available
    if threads < 2 or multiply_adds < 2 * PRODUCT_PER_THREAD:  # the common case first: no min/max (0.1 us each)
        return 1
    wanted = multiply_adds // PRODUCT_PER_THREAD
    if multiply_adds < PRODUCT_ANY_SHAPE_FROM and rows // PRODUCT_ROWS_PER_THREAD < wanted:
        wanted = rows // PRODUCT_ROWS_PER_THREAD
    return threads if wanted >= threads else wanted if wanted > 1 else 1


def threads_for_load(share: int, free: float) -> int:
    """The threads a controller with `share` may keep busy while `free` cores are left by other processes: the
    free cores rounded to the nearest (a core kept busy half the time or more by others is not free), within
    1 and the share (the share where nothing was read: `free` infinite)."""
    return share if free >= share else max(1, int(free + 0.5))


def free_cores(idle: float, own: float, wall: float) -> float:
    """The cores left to this process over `wall` seconds in which its CPUs were idle `idle` CPU-seconds and it
    computed `own` CPU-seconds: what other processes did not use (infinite for an empty interval)."""
    return (idle + own) / wall if wall > 0 else math.inf


def idle_ticks(stat: bytes, cpus: frozenset[int]) -> int:
    """The idle and I/O-wait ticks of the CPUs `cpus` in the text of /proc/stat (its `cpuN` lines)."""
    ticks = 0
    for line in stat.split(b"\n"):
        if not line.startswith(b"cpu"):
            break  # the cpu lines come first
        fields = line.split()
        if fields[0] != b"cpu" and int(fields[0][3:]) in cpus:
            ticks += int(fields[4]) + int(fields[5])
    return ticks


# ---- the load: the cores other processes leave free ---------------------------------------------------------

LOAD_INTERVAL = 0.5  # seconds between readings of /proc/stat (a reading costs 20-50 us)


class LoadReading:
    """The cores other processes left to this one over the last interval of at least LOAD_INTERVAL: its CPUs'
    idle time from /proc/stat plus its own CPU time, per second. `due` is when the next reading may be taken;
    `free` is infinite where /proc/stat cannot be read (no load is then assumed)."""

    def __init__(self, path: Path = Path("/proc/stat")) -> None:
        self.path = path
        self.due = 0.0  # monotonic time of the next reading
        self.free = math.inf
        self._last: tuple[float, int, float] | None = None  # (wall, idle ticks, own CPU seconds)
        self._cpus: frozenset[int] | None = None
        self._tick = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)

    def read(self, now: float) -> float:
        """Take a reading at monotonic time `now` and return the free cores since the previous one."""
        self.due = now + LOAD_INTERVAL
        try:
            if self._cpus is None:
                self._cpus = frozenset(os.sched_getaffinity(0))
            ticks = idle_ticks(self.path.read_bytes(), self._cpus)
        except (OSError, ValueError, IndexError, AttributeError):
            self.due, self.free = math.inf, math.inf  # nothing to read here: never again
            return self.free
        sample = (now, ticks, time.process_time())
        if self._last is not None:
            wall, idle, own = (a - b for a, b in zip(sample, self._last))
            self.free = free_cores(idle * self._tick, own, wall)
        self._last = sample
        return self.free

    def restart(self) -> None:
        """Take the next reading at the next chance (the share changed)."""
        self.due = 0.0


load = LoadReading()


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
    load.restart()


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
            f"{capped}; shared by {_host_controllers} controller(s) on this host), fewer while other processes keep "
            "cores busy")
