"""Helpers shared by the benchmark scripts: child processes, statistics, reports.

Children are started in their own sessions, get SIGKILL if this process dies
(PR_SET_PDEATHSIG), are killed with their whole process group when a job ends,
times out or is interrupted, and write their output to files (never pipes, so
they cannot block on a full pipe). Children report measurements as JSON files in
the directory named by $BENCH_RECORD_DIR (see workers/), not on stdout, which
mpiexec may interleave.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import platform
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
WORKERS_DIR = BENCH_DIR / "workers"
RECORD_DIR_VARIABLE = "BENCH_RECORD_DIR"
_PR_SET_PDEATHSIG = 1


# --------------------------------------------------------------------------
# Machine description
# --------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo ('unknown' if absent)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001 - any failure just means "unknown".
        return "not installed"


# Set on some machines for old OpenBLAS builds; they slow a current NumPy, so a benchmark run
# drops both together (for itself and its children only; tests and CI keep them).
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def prepare_run() -> None:
    """Make this run's children start as an installed meshax would, with NumPy's own BLAS kernel.

    Compiles meshax's bytecode (as ``pip install`` does; an editable install under
    PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module in every process) and
    removes OPENBLAS_OVERRIDES from the environment the children inherit.
    """
    import compileall

    compileall.compile_dir(str(BENCH_DIR.parent / "src" / "meshax"), quiet=1)
    for name in OPENBLAS_OVERRIDES:
        os.environ.pop(name, None)


def blas_kernel() -> str:
    """NumPy's BLAS as a child of this run sees it (library, version, kernel, threads), via threadpoolctl."""
    code = ("import numpy, threadpoolctl\n"
            "for i in threadpoolctl.threadpool_info():\n"
            "    if i['user_api'] == 'blas':\n"
            "        print(f\"{i['internal_api']} {i['version']}, kernel {i.get('architecture')}, "
            "{i['num_threads']} threads\")")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "unknown (threadpoolctl timed out)"
    return out.stdout.strip() or f"unknown ({out.stderr.strip().splitlines()[-1:]})"


@functools.lru_cache(maxsize=None)
def machine_info() -> str:
    """One Markdown line: CPU, cores, versions, BLAS, load; computed once (call it before measuring)."""
    prepare_run()
    return (
        f"Machine: {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}, "
        f"numpy {_version('numpy')} ({blas_kernel()}; {' and '.join(OPENBLAS_OVERRIDES)} unset for this run), "
        f"mpich {_version('mpich')}, mpi4py {_version('mpi4py')}, "
        f"jax {_version('jax')}; Linux {platform.release()}; load average at start {_load_average()}"
    )


def _load_average() -> str:
    try:
        return "{:.2f}".format(os.getloadavg()[0])
    except OSError:
        return "unknown"


class ForeignLoad:
    """How much CPU other processes (not this one or its children) used while a benchmark ran.

    Compares the machine's busy time (/proc/stat) with our own and our reaped
    descendants' CPU time (getrusage); the result is a share of all cores.
    """

    def __init__(self) -> None:
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float]:
        fields = [float(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # Minus idle and iowait.
        ours = sum(getattr(resource.getrusage(who), field) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                   for field in ("ru_utime", "ru_stime"))
        return time.monotonic(), busy, ours

    def share(self) -> float:
        """Other processes' CPU use since construction, as a fraction of all cores (NaN if unknown)."""
        try:
            now = self._sample()
        except (OSError, ValueError, IndexError):
            return float("nan")
        wall = now[0] - self.start[0]
        foreign = (now[1] - self.start[1]) - (now[2] - self.start[2])
        return max(0.0, foreign) / (wall * (os.cpu_count() or 1)) if wall > 0 else float("nan")

    def describe(self) -> str:
        return f"other processes used {self.share():.0%} of the machine's CPU time during this benchmark"


# --------------------------------------------------------------------------
# Statistics and Markdown
# --------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) by linear interpolation."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(name: str, text: str) -> Path:
    """Write `text` to benchmarks/results/<name>.md and return the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.md"
    path.write_text(text if text.endswith("\n") else text + "\n")
    return path


# --------------------------------------------------------------------------
# Child processes
# --------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """In the forked child: get SIGKILL when the benchmark process dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(procs: Sequence[subprocess.Popen], grace: float = 2.0) -> None:
    """Stop the children and their process groups: SIGTERM to the running ones, SIGKILL after `grace` s.

    SIGTERM first lets mpiexec take down (and reap) its own proxies and ranks; the
    final SIGKILL to every group also removes stragglers of children that exited.
    """
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        _signal_group(proc, signal.SIGKILL)
    for proc in procs:
        proc.wait()


@dataclass
class JobResult:
    """What a finished (or killed) group of child processes left behind."""

    spawn_time: float  # time.time() just before the first child was started.
    exit_time: float  # time.time() once every child had exited (or was killed).
    returncodes: list[int | None]
    outputs: list[str]
    errors: list[str]
    timed_out: bool
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(code == 0 for code in self.returncodes)

    def failure(self) -> str:
        """A short description of what went wrong, with the tail of the children's stderr."""
        what = "timed out" if self.timed_out else f"exit codes {self.returncodes}"
        tails = [err.strip().splitlines()[-3:] for err in self.errors if err.strip()]
        detail = " / ".join(" ".join(tail) for tail in tails)[:600]
        return f"{what}{': ' + detail if detail else ''}"


def read_records(directory: Path) -> list[dict[str, Any]]:
    """The JSON records that children wrote into `directory`, in file-name order."""
    records = []
    for path in sorted(directory.glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass  # A child killed while writing: its record is missing.
    return records


SHARED_MEMORY = Path("/dev/shm")


def _mpich_segments() -> set[str]:
    return {path.name for path in SHARED_MEMORY.glob("mpich_shm_*")} if SHARED_MEMORY.is_dir() else set()


def _mapped_segments() -> set[str]:
    """Names of the /dev/shm files some live process still maps."""
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            mapped.update(line.rsplit("/", 1)[-1] for line in maps.read_text().splitlines() if "/dev/shm/" in line)
        except OSError:
            pass  # the process ended, or is not ours to read
    return mapped


def remove_orphaned_segments(before: set[str]) -> None:
    """Remove the MPICH shared-memory files that appeared since `before` and that no process maps any more:
    MPI ranks killed at a job's time limit cannot remove their own."""
    new = _mpich_segments() - before
    for name in new - (_mapped_segments() if new else set()):
        try:
            (SHARED_MEMORY / name).unlink()
        except OSError:
            pass


MEMORY_DIR = "/dev/shm"


def run_job(commands: Sequence[Sequence[str]], timeout: float, env: dict[str, str] | None = None) -> JobResult:
    """Start `commands` at once, wait for all of them (at most `timeout` s), always clean up (processes and
    the shared memory of ranks that had to be killed). The workers' records and output go to a directory in
    memory where there is one (MEMORY_DIR): a worker rewrites its record after every step, and a file written to
    disk between two steps moved a gru step beside two busy loops from a core of its own to half of one (its
    process sleeping on the write lands elsewhere when it wakes), for either library."""
    procs: list[subprocess.Popen] = []
    timed_out = False
    segments_before = _mpich_segments()
    memory = MEMORY_DIR if os.path.isdir(MEMORY_DIR) and os.access(MEMORY_DIR, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="meshax-bench-", dir=memory) as tmp:
        record_dir = Path(tmp) / "records"
        record_dir.mkdir()
        child_env = dict(os.environ if env is None else env, **{RECORD_DIR_VARIABLE: str(record_dir)})
        files = [(open(Path(tmp) / f"{i}.out", "w+"), open(Path(tmp) / f"{i}.err", "w+"))
                 for i in range(len(commands))]
        try:
            spawn_time = time.time()
            for command, (out, err) in zip(commands, files):
                procs.append(subprocess.Popen(
                    list(command), env=child_env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    start_new_session=True, preexec_fn=_die_with_parent,
                ))
            deadline = time.monotonic() + timeout
            for proc in procs:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            exit_time = time.time()
        except subprocess.TimeoutExpired:
            timed_out = True
            exit_time = time.time()
        finally:
            stop_all(procs)
            remove_orphaned_segments(segments_before)
        texts = []
        for out, err in files:
            out.seek(0)
            err.seek(0)
            texts.append((out.read(), err.read()))
            out.close()
            err.close()
        records = read_records(record_dir)
    return JobResult(spawn_time, exit_time, [proc.returncode for proc in procs], [out for out, _ in texts],
                     [err for _, err in texts], timed_out, records)


BUSY_LOOP = "while True: pass"


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` processes spinning in pure Python (a shared machine's other work) while the block runs; each in
    its own session, killed with its group when the block ends (and by PR_SET_PDEATHSIG if we die)."""
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-S", "-c", BUSY_LOOP], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=_die_with_parent))
        yield
    finally:
        stop_all(procs, grace=0.0)


def _raise_system_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def exit_cleanly_on_signals() -> None:
    """Turn SIGTERM/SIGHUP into SystemExit and SIGINT into KeyboardInterrupt (even if it was
    inherited as ignored, as by background jobs of scripts), so that `finally` blocks kill the children."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_system_exit)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def python() -> str:
    """The interpreter running the benchmarks (the venv's)."""
    return sys.executable


def venv_tool(name: str) -> str:
    """A tool (e.g. mpiexec) from the interpreter's bin directory, else from PATH."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def failures_section(failures: Sequence[str]) -> list[str]:
    """Report lines quoting the output of every job that failed (none when all succeeded)."""
    parts: list[str] = []
    if failures:
        parts += ["", "### Failures (verbatim output)", ""]
        for failure in failures:
            parts += ["```", failure.rstrip(), "```"]
    return parts


def parse_layouts(text: str) -> list[tuple[int, int]]:
    """'2x4,4x2' as [(2, 4), (4, 2)]: processes x devices per process."""
    layouts = []
    for item in text.split(","):
        n, k = item.lower().split("x")
        layouts.append((int(n), int(k)))
    return layouts


def chosen(parser: Any, text: str, known: Sequence[str], what: str) -> list[str]:
    """The comma-separated names in `text`, each one of `known` (else a usage error naming the choices)."""
    names = text.split(",")
    for name in names:
        if name not in known:
            parser.error(f"unknown {what} {name!r}; choose from {', '.join(known)}")
    return names


def finish(output: str, text: str, failures: Sequence[str]) -> int:
    """Print the report, write it to results/<output>.md, and give the exit status (1 if a job failed)."""
    print(text)
    print(f"\nwritten to {write_results(output, text)}", file=sys.stderr)
    return 1 if failures else 0


STRIPPED_ENV_PREFIXES = ("MESHAX_", "JAX_", "XLA_FLAGS", "PMI_", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                         "MKL_NUM_THREADS")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def clean_env(threads: int) -> dict[str, str]:
    """Our environment without variables that configure either library, with `threads` BLAS/OpenMP threads."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIPPED_ENV_PREFIXES)}
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env
