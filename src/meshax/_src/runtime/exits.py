"""Stopping a process of a job on SIGTERM or SIGINT: one line, nothing left in /dev/shm, the shell's exit code.

The main thread may be blocked inside MPI or NumPy when a signal comes, so the work is
done by a watcher thread woken through `signal.set_wakeup_fd` (the Python-level handler
only falls back to doing it when the watcher cannot). Stopping unlinks this job's MPICH
shared-memory segments, tells the coordinator (so the others stop at once, naming this
process and the signal), prints `meshax: process 2 stopped by SIGTERM` (not under
`meshax launch`, which prints the job's summary itself) and ends the process with
128 + the signal number (143 for SIGTERM, 130 for SIGINT) without MPI_Finalize, which is
not safe while another thread may be inside MPI.
"""
from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from typing import Any

from . import mpi

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_DEFAULTS = (signal.SIG_DFL, signal.default_int_handler)
COORDINATOR_GRACE = 2.0  # seconds process 0 keeps the coordinator up so the others hear why it stops

_previous: dict[int, Any] = {}
_state: dict[str, Any] = {"process_id": None, "client": None, "server": None}
_stopping = threading.Lock()
_stopped = threading.Event()  # set once a stop has begun
_watcher: dict[str, Any] = {"read": None, "write": None}


def under_launcher() -> bool:
    """Whether `meshax launch` started this process (it then reports signals and failures itself)."""
    return os.environ.get("MESHAX_LAUNCHER") == "1"


def install(process_id: int | None) -> None:
    """Stop cleanly on SIGTERM/SIGINT from now on, unless the program installed its own handlers."""
    if threading.current_thread() is not threading.main_thread() or _previous:
        return
    _state["process_id"] = process_id
    for sig in SIGNALS:
        if signal.getsignal(sig) in _DEFAULTS:
            _previous[sig] = signal.signal(sig, _on_signal)
    if _previous:
        _start_watcher()


def attach(process_id: int, client: Any, server: Any) -> None:
    """Tell the stopper who this process is and how to reach the others."""
    _state.update(process_id=process_id, client=client, server=server)


def report_native_faults() -> None:
    """A crash inside native code (a segmentation fault in MPI's transport when a peer dies mid-transfer) still
    says where every thread was, on stderr, instead of ending the process without a line (faulthandler; left as
    the program set it if it enabled it itself)."""
    if not faulthandler.is_enabled():
        try:
            faulthandler.enable(file=sys.stderr, all_threads=True)
        except (AttributeError, ValueError, OSError):  # stderr replaced by an object without a file descriptor
            pass


def uninstall() -> None:
    """Put back the handlers that were there before `install` (a job of one process needs none)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, handler in _previous.items():
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, handler)
    _previous.clear()
    if _watcher_listening():
        signal.set_wakeup_fd(-1)
        os.close(_watcher["write"])  # the watcher reads the end of the pipe and returns
        _watcher.update(read=None, write=None)


def _start_watcher() -> None:
    read, write = os.pipe()
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    if previous != -1:  # someone (e.g. an event loop) already listens there: leave it to the Python handler
        signal.set_wakeup_fd(previous)
        os.close(read)
        os.close(write)
        return
    _watcher.update(read=read, write=write)
    threading.Thread(target=_watch, args=(read,), name="meshax-signal-watcher", daemon=True).start()


def _watch(read: int) -> None:
    while True:
        try:
            data = os.read(read, 64)
        except OSError:
            return
        if not data:
            os.close(read)
            return
        for number in data:
            if number in _previous:
                stop(number)


def _on_signal(signum: int, frame: object) -> None:
    """The Python-level handler (main thread): the watcher normally stops the process before this returns."""
    if _watcher_listening():
        threading.Event().wait(COORDINATOR_GRACE + 1.0)
    stop(signum)


def _watcher_listening() -> bool:
    """Whether signals still wake the watcher (the program may have taken the wakeup fd since)."""
    write = _watcher["write"]
    if write is None:
        return False
    current = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    if current != write:
        signal.set_wakeup_fd(current)
        return False
    return True


def stopping(within: float = 0.0) -> bool:
    """Whether this process is stopping on a signal, or starts to within `within` s: a job is often signalled
    as a whole, and a peer's stop may be reported to this process before its own signal is handled."""
    return _stopped.wait(within) if _previous else False


def stop(signum: int) -> None:
    """Clean up after `signum` and end the process with 128 + signum; only the first call does anything."""
    if not _stopping.acquire(blocking=False):
        return
    _stopped.set()
    name = signal.Signals(signum).name
    process = "" if _state["process_id"] is None else f" {_state['process_id']}"
    if not under_launcher():
        os.write(2, f"meshax: process{process} stopped by {name}\n".encode())
    mpi.remove_shared_memory()
    try:
        tell_the_others(f"stopped by {name}")
    except Exception:  # the coordinator may be gone already: stopping matters more
        pass
    os._exit(128 + signum)


def tell_the_others(reason: str) -> None:
    """Have the coordinator fail the job naming this process and `reason` (this process hosts it, or not)."""
    server, client = _state["server"], _state["client"]
    if server is not None:  # this process hosts the coordinator: stopping it must not look like losing it
        server.fail(f"process {_state['process_id']} failed: {reason}", exclude=_state["process_id"])
        if client is not None:
            client.close()
        server.stop(timeout=COORDINATOR_GRACE)
    elif client is not None:
        client.send("abort", message=reason)
        client.close()
