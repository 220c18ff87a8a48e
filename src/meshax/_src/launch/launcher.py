"""Local multi-process launcher: ``meshax launch -n N script.py [args...]``.

Starts N copies of a Python program on this machine, wired together through
``MESHAX_*`` environment variables, relays their output with ``[i]`` prefixes
and makes sure that they all stop together: when one process fails the others
get a grace period and are then terminated, and no child outlives the launcher.
With ``--profile DIR`` every child records a profiler trace from start to exit
and the launcher merges them into ``DIR/trace.json.gz`` when the job has ended.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from typing import IO

from .cli import PROG, TIMEOUT_EXIT_CODE, free_port, info, parse_args

from ..profiler import merge
from ..runtime.client import PEER_FAILURE_EXIT_CODE, report_cannot_join

KILL_DELAY = 2.0  # Seconds between SIGTERM and SIGKILL when stopping children.
IDLE_WAKEUP = 1.0  # Longest sleep of the supervising loop when no deadline is near.
REPORT_PREFIX = "meshax: "  # How meshax processes start a failure report on stderr.
READER_JOIN_TIMEOUT = 2.0
PLACEHOLDERS = ("{process_id}", "{num_processes}")


# --------------------------------------------------------------------------
# Children
# --------------------------------------------------------------------------


def _child_command(program: list[str], process_id: int, num_processes: int) -> list[str]:
    """``python <program>`` with the placeholders substituted."""
    values = (str(process_id), str(num_processes))
    argv = []
    for arg in program:
        for placeholder, value in zip(PLACEHOLDERS, values):
            arg = arg.replace(placeholder, value)
        argv.append(arg)
    return [sys.executable, *argv]


def _child_env(
    process_id: int, num_processes: int, address: str, cpu_devices: int | None, token: str,
    profile_dir: str | None = None,
) -> dict[str, str]:
    """Our environment plus the variables that tell a child its place in the job and its secret."""
    env = dict(os.environ)
    env.update(
        MESHAX_JOB_TOKEN=token,
        MESHAX_COORDINATOR_ADDRESS=address,
        MESHAX_NUM_PROCESSES=str(num_processes),
        MESHAX_PROCESS_ID=str(process_id),
        MESHAX_LAUNCHER="1",
        PYTHONUNBUFFERED="1",
    )
    if cpu_devices is not None:
        env["MESHAX_NUM_CPU_DEVICES"] = str(cpu_devices)
        env["JAX_NUM_CPU_DEVICES"] = str(cpu_devices)
    if profile_dir is not None:
        env["MESHAX_PROFILE_DIR"] = profile_dir  # read by `import meshax` (meshax.profiler.trace_whole_process)
    else:
        env.pop("MESHAX_PROFILE_DIR", None)
    return env


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the child's process group (its own session)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # The whole group is already gone.


def _exit_code(returncode: int) -> int:
    """Shell-style exit status: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def _describe(returncode: int) -> str:
    """E.g. ``exited with code 137 (killed by SIGKILL)`` or ``exited with code 143 (stopped by SIGTERM)``."""
    text = f"exited with code {_exit_code(returncode)}"
    if returncode < 0:
        try:
            text += f" (killed by {signal.Signals(-returncode).name})"
        except ValueError:
            text += f" (killed by signal {-returncode})"
    elif returncode - 128 in (signal.SIGINT, signal.SIGTERM):  # how meshax processes stop on these
        text += f" (stopped by {signal.Signals(returncode - 128).name})"
    return text


# --------------------------------------------------------------------------
# Output relay
# --------------------------------------------------------------------------

_output_lock = threading.RLock()  # Reentrant: the signal handler prints too.


def _write_line(stream: IO[str], line: str) -> None:
    """Write one whole line to ``stream`` atomically with respect to other relays."""
    with _output_lock:
        try:
            stream.write(line)
            stream.flush()
        except (OSError, ValueError):
            pass  # Our own output is gone (closed pipe); keep draining the child.


class _Reports:
    """Which failure reports of the children to show: each distinct one once, and none once the launcher
    itself is stopping the job (they then only echo the signal or timeout it has already reported)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.muted = False
        self._lock = threading.Lock()

    def show(self, report: str) -> bool:
        with self._lock:
            fresh = not self.muted and report not in self.seen
            self.seen.add(report)
            return fresh


def _relay(pipe: IO[bytes], prefix: str, stream_name: str, reports: _Reports | None = None) -> None:
    """Copy lines from a child's pipe to our stdout/stderr, prefixed; with `reports`, filter meshax's failure
    reports (a "meshax: " line and the indented lines after it) through it."""
    showing = True  # whether the report the current indented lines belong to is shown
    with pipe:
        for raw in iter(pipe.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            if reports is not None:
                if text.startswith(REPORT_PREFIX):
                    showing = reports.show(text)
                elif not text.startswith(" "):
                    showing = True
                if not showing:
                    continue
            # Looked up per line so that redirections of sys.stdout are honoured.
            _write_line(getattr(sys, stream_name), f"{prefix}{text}\n")


def _message(text: str) -> None:
    """Print one line from the launcher itself to stderr."""
    _write_line(sys.stderr, f"{PROG} launch: {text}\n")


# --------------------------------------------------------------------------
# Supervision
# --------------------------------------------------------------------------


_PR_SET_PDEATHSIG = 1


def _die_with_launcher() -> None:
    """In a child, before it runs the program: be sent SIGTERM when the launcher dies, even by SIGKILL, so
    that no child outlives it (Linux; elsewhere the launcher's own handlers are all there is)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class _Job:
    """N running children plus the policy for stopping them together."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.procs: list[subprocess.Popen] = []
        self.readers: list[threading.Thread] = []
        self.first_failure: int | None = None  # Exit code of the first failure.
        self.peer_failures: list[int] = []  # Processes that stopped because another one failed.
        self.received_signal: int | None = None
        self.timed_out = False
        self.term_at: float | None = None  # When to SIGTERM the survivors.
        self.kill_at: float | None = None  # When to SIGKILL the survivors.
        self.wakeup = threading.Event()  # Set when a child exits or a signal arrives.
        self.reports = _Reports()
        self.address = ""
        self.token = ""
        self.profile_dir = os.path.abspath(args.profile) if args.profile else None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Start the children and the threads relaying their output."""
        n = self.args.num_processes
        self.address = address = self.args.coordinator or f"127.0.0.1:{free_port()}"
        self.token = token = secrets.token_hex(32)  # this job's own secret, whatever the environment holds
        for i in range(n):
            if self.received_signal is not None:
                break  # Interrupted while starting: start no more.
            proc = subprocess.Popen(
                _child_command(self.args.program, i, n),
                env=_child_env(i, n, address, self.args.cpu_devices, token, self.profile_dir),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_launcher,
            )
            self.procs.append(proc)
            threading.Thread(target=self._watch, args=(proc,), daemon=True).start()
            for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
                reports = self.reports if name == "stderr" else None
                reader = threading.Thread(
                    target=_relay, args=(pipe, f"[{i}] ", name, reports), daemon=True
                )
                reader.start()
                self.readers.append(reader)

    def wait(self) -> int:
        """Supervise until every child has exited; return the launcher's exit code."""
        deadline = None
        if self.args.timeout is not None:
            deadline = time.monotonic() + self.args.timeout
        reported: set[int] = set()
        while True:
            self.wakeup.clear()  # Before polling: an exit after the poll still ends the wait below.
            for i, proc in enumerate(self.procs):
                if proc.poll() is not None and i not in reported:
                    reported.add(i)
                    self._on_exit(i, proc.returncode)
            if len(reported) == len(self.procs):
                return self._result()
            now = time.monotonic()
            if deadline is not None and now >= deadline and not self._stopping():
                self._on_timeout()
            self._escalate(now)
            self.wakeup.wait(self._sleep_until(deadline) - time.monotonic())

    def cleanup(self) -> None:
        """Kill every child's process group (stray grandchildren included)."""
        for proc in self.procs:
            _signal_group(proc, signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
        join_deadline = time.monotonic() + READER_JOIN_TIMEOUT
        for reader in self.readers:
            reader.join(max(0.0, join_deadline - time.monotonic()))

    # -- events --------------------------------------------------------------

    def _watch(self, proc: subprocess.Popen) -> None:
        """Wake the supervising loop as soon as ``proc`` exits."""
        proc.wait()
        self.wakeup.set()

    def _sleep_until(self, deadline: float | None) -> float:
        """When the supervising loop next has something to do, unless woken earlier."""
        times = [t for t in (deadline, self.term_at, self.kill_at) if t is not None]
        if self.timed_out:
            times.remove(deadline)
        return min(times + [time.monotonic() + IDLE_WAKEUP])

    def on_signal(self, signum: int, _frame: object = None) -> None:
        """Forward SIGINT/SIGTERM to the children; a second signal means SIGKILL."""
        if self.received_signal is not None:
            self._signal_running(signal.SIGKILL)
            self.wakeup.set()
            return
        self.received_signal = signum
        self.reports.muted = True
        running = self._running()
        if running:
            _message(f"interrupted by {signal.Signals(signum).name}; stopping processes "
                     f"{', '.join(map(str, running))}")
        self._signal_running(signum)
        self._schedule_kill(time.monotonic() + self.args.grace)
        self.wakeup.set()

    def _on_exit(self, process_id: int, returncode: int) -> None:
        if returncode == PEER_FAILURE_EXIT_CODE and self.first_failure is None:
            # Not the failure itself: wait (the grace period) for the process that failed to exit.
            self.peer_failures.append(process_id)
            if self.term_at is None and self.kill_at is None:
                self.term_at = time.monotonic() + self.args.grace
            return
        if returncode == 0 or self.first_failure is not None:
            return
        if not self._stopping():  # Otherwise this failure is not news.
            text = f"process {process_id} {_describe(returncode)}"
            if self._running():
                text += "; stopping the others"
                self._tell_coordinator(process_id, returncode)
            _message(text)
            self.term_at = time.monotonic() + self.args.grace
        self.first_failure = _exit_code(returncode)

    def _tell_coordinator(self, process_id: int, returncode: int) -> None:
        """If the job is still starting, have the coordinator end every process's start-up now, naming the child
        that exited (the others would wait for it until --grace ends); a running job notices deaths itself."""
        report = {
            "who": f"process {process_id} (pid {self.procs[process_id].pid}, started by {PROG} launch)",
            "reason": f"it {_describe(returncode)} before every process had joined",
            "source": "launcher",
        }
        # Tried until the others are stopped anyway: the coordinator may not be up yet, or it was the child that died.
        threading.Thread(target=report_cannot_join, args=(self.address, self.token.encode(), report, self.args.grace),
                         daemon=True).start()

    def _on_timeout(self) -> None:
        self.timed_out = True
        self.reports.muted = True
        running = ", ".join(str(i) for i in self._running())
        _message(
            f"timed out after {self.args.timeout:g}s; "
            f"processes still running: {running}; killing them"
        )
        self.term_at = time.monotonic()

    # -- helpers -------------------------------------------------------------

    def _stopping(self) -> bool:
        """Whether a shutdown (failure, timeout or signal) is under way."""
        return (
            self.timed_out
            or self.first_failure is not None
            or self.received_signal is not None
        )

    def _running(self) -> list[int]:
        return [i for i, proc in enumerate(self.procs) if proc.poll() is None]

    def _signal_running(self, sig: int) -> None:
        for i in self._running():
            _signal_group(self.procs[i], sig)

    def _schedule_kill(self, when: float) -> None:
        self.kill_at = when if self.kill_at is None else min(self.kill_at, when)

    def _escalate(self, now: float) -> None:
        """Apply the SIGTERM -> SIGKILL schedule."""
        if self.term_at is not None and now >= self.term_at:
            self.term_at = None
            self._signal_running(signal.SIGTERM)
            self._schedule_kill(now + KILL_DELAY)
        if self.kill_at is not None and now >= self.kill_at:
            self.kill_at = None
            self._signal_running(signal.SIGKILL)

    def _result(self) -> int:
        if self.timed_out:
            return TIMEOUT_EXIT_CODE
        if self.received_signal is not None:  # The children's exits only follow from it.
            return 128 + self.received_signal
        if self.first_failure is not None:
            return self.first_failure
        if self.peer_failures:  # Every failing process stopped for a failure it reported, e.g. a hang.
            return PEER_FAILURE_EXIT_CODE
        return 0


def _install_handlers(job: _Job) -> dict[int, object]:
    """Route SIGINT/SIGTERM to ``job``; returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}  # Signal handlers can only be installed from the main thread.
    return {sig: signal.signal(sig, job.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}


def _forget_old_traces(profile_dir: str) -> None:
    """Remove the per-process traces an earlier job left in `profile_dir`: only this job's are merged."""
    for path in merge.process_files(profile_dir):
        os.remove(path)


def _merge_traces(profile_dir: str, num_processes: int) -> None:
    """Merge the job's per-process traces into `profile_dir/trace.json.gz`, saying which processes left none."""
    missing = [i for i in range(num_processes) if not os.path.exists(merge.process_file(profile_dir, i))]
    try:
        path = merge.merge_job(profile_dir)
    except (OSError, ValueError) as error:  # a file cut short or unreadable: the job's result stands
        _message(f"--profile: cannot merge the traces in {profile_dir}: {error}")
        return
    if path is None:
        _message(f"--profile: no process wrote a trace into {profile_dir}")
        return
    left = f" (processes {', '.join(map(str, missing))} wrote none: they did not exit normally)" if missing else ""
    _message(f"trace of {num_processes - len(missing)} process(es) in {path}{left}")


def launch(args: argparse.Namespace) -> int:
    """Run the job described by parsed ``launch`` arguments; return the exit code."""
    job = _Job(args)
    if job.profile_dir is not None:
        _forget_old_traces(job.profile_dir)
    previous = _install_handlers(job)
    try:
        job.start()
        return job.wait()
    finally:
        job.cleanup()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if job.profile_dir is not None:
            _merge_traces(job.profile_dir, len(job.procs))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``meshax`` command; returns the process exit code."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse usage errors, --help and --version.
        return int(exc.code or 0)
    if args.command == "info":
        return info()
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
