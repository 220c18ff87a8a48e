"""When MPI's native code ends this process itself, meshax still reports why, and blames the right process.

MPICH ends a process from inside the library on an internal assertion, which its OFI transport hits when a
collective goes on sending after a peer died (`ofi_send.h ... coll_attr == 0`): it prints its line and calls
the C library's exit(1), so no Python code runs, and the job's other processes would see this survivor
vanish and could blame it for the death it only witnessed. A handler registered with the C library
(glibc's `__cxa_atexit`, under a handle of our own) runs in that exit while the interpreter is still
alive: it waits briefly for the coordinator's notice naming the dead (which ends this process with exit
code 70, as for any survivor); failing that, it tells the job that MPI ended this process, and exits 1.
At a normal end, `disarm` runs the handler early as a no-op through `__cxa_finalize` on that handle,
which also unregisters it: once Python is finalised, no Python callback may run.

In a job that survives losses, MPICH's own abort must end this process alone. By default, a fatal error on
a communicator other than MPI_COMM_WORLD (a survivor's transfer to a dead peer, in MPICH's OFI layer) makes
it send every other member an order to exit and wait for each send (`MPIDIG_am_comm_abort`): the survivors
would all end, or this one would block for good sending to the dead (measured: 3 of 10 loaded multi-host
rejoin trials hung so). While armed in such a job, MPICH is told to call abort() instead (its control variable
MPIR_CVAR_COREDUMP_ON_ABORT, set through the MPI tool interface once MPI runs, unless the user set it), and
the SIGABRT handler installed with it ends this process with a line that says why, the job told at once.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Any

from . import exits, losses, mpi, progress, recovery, watch
from .client import FAILURE_EXIT_CODE, PEER_FAILURE_EXIT_CODE, exit_with_failure

_CALLBACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_SIGNAL_HANDLER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_int)
ABORT_VARIABLE = "MPIR_CVAR_COREDUMP_ON_ABORT"
_state: dict[str, Any] = {"armed": False, "pid": None, "process_id": None, "client": None, "callback": None,
                          "handle": None, "on_abort": None, "previous_abort": None, "previous_variable": None}


def _glibc() -> Any | None:
    """The C library's `__cxa_atexit` and `__cxa_finalize`, or None where it lacks them."""
    libc = ctypes.CDLL(None)
    try:
        register, finalize = libc.__cxa_atexit, libc.__cxa_finalize
    except AttributeError:
        return None
    register.argtypes = [_CALLBACK_TYPE, ctypes.c_void_p, ctypes.c_void_p]
    register.restype = ctypes.c_int
    finalize.argtypes = [ctypes.c_void_p]
    finalize.restype = None
    return register, finalize


def arm(process_id: int, client: Any, recoverable: bool = False) -> bool:
    """From now on, an exit called from native code reports as described above (`recoverable`: and so does an
    abort); whether that could be set up."""
    if _state["armed"]:
        return True
    functions = _glibc()
    if functions is None:
        return False
    register, _ = functions
    callback, handle = _CALLBACK_TYPE(_on_native_exit), ctypes.c_char()
    if register(callback, None, ctypes.addressof(handle)) != 0:
        return False
    _state.update(armed=True, pid=os.getpid(), process_id=process_id, client=client, callback=callback,
                  handle=handle)
    if recoverable and ABORT_VARIABLE not in os.environ:
        on_abort = _SIGNAL_HANDLER_TYPE(_on_abort)
        _state.update(on_abort=on_abort, previous_abort=_set_abort_handler(on_abort),
                      previous_variable=mpi.write_control_variable(ABORT_VARIABLE, 1))
    return True


def _set_abort_handler(handler: Any) -> Any:
    """Install `handler` (a C function pointer) for SIGABRT through the C library; the one it replaces."""
    install = ctypes.CDLL(None).signal
    install.argtypes = [ctypes.c_int, ctypes.c_void_p]
    install.restype = ctypes.c_void_p
    return install(signal.SIGABRT, ctypes.cast(handler, ctypes.c_void_p))


def disarm() -> None:
    """This process ends normally from here on: run the handler now as a no-op, which also unregisters it."""
    if not _state["armed"]:
        return
    _state["armed"] = False
    if _state["on_abort"] is not None:
        if _state["previous_variable"] is not None:
            mpi.write_control_variable(ABORT_VARIABLE, _state["previous_variable"])
        _set_abort_handler(_state["previous_abort"])
        _state["on_abort"] = None
    functions = _glibc()
    if functions is not None and _state["pid"] == os.getpid():
        functions[1](ctypes.addressof(_state["handle"]))


def _on_native_exit(_argument: Any) -> None:
    """The C library's exit() was called from native code (Python's own exits disarm first, or skip handlers)."""
    if not _state["armed"] or _state["pid"] != os.getpid():  # disarming, or a child forked from this process
        return
    _state["armed"] = False
    client = _state["client"]
    deadline, extended = time.monotonic() + watch.PEER_DEATH_WAIT, False
    while time.monotonic() < deadline:  # the coordinator's notice, if a peer died, ends this process meanwhile
        if progress.halted.is_set() and not extended:  # a peer was lost: its notice follows once all are gathered
            deadline, extended = max(deadline, time.monotonic() + progress.HALT_WAIT), True
        time.sleep(0.02)
    mpi.remove_shared_memory()
    lost = client.lost_peers if client is not None else []
    if lost:
        exit_with_failure(f"{losses.died(lost)} Then this process's MPI library ended it from inside (its "
                          "message is above).", PEER_FAILURE_EXIT_CODE)
    _end_telling_the_job("its MPI library ended it from inside (MPI's message is above: an internal assertion or "
                         "abort), while no other process of the job was known to be lost", FAILURE_EXIT_CODE)


def _on_abort(_signal: int) -> None:
    """MPICH called abort() in a job that survives losses: this process alone ends, and the job is told now (it
    goes on without this process). Returning lets abort() end the process as by default."""
    if not _state["armed"] or _state["pid"] != os.getpid():
        return
    _state["armed"] = False
    lost = recovery.lost()
    reason = "its MPI library aborted it (MPI's message is above)"
    if lost:
        reason += " after " + "; ".join(lost.values())
    mpi.remove_shared_memory()
    _end_telling_the_job(reason, PEER_FAILURE_EXIT_CODE if lost else FAILURE_EXIT_CODE)


def _end_telling_the_job(reason: str, code: int) -> None:
    """Tell the job why this process ends, then end it with exit code `code`."""
    try:
        exits.tell_the_others(reason)
    except Exception:  # noqa: BLE001 - the coordinator may be gone already: ending this process matters more
        pass
    exit_with_failure(f"process {_state['process_id']}: {reason}.", code)
