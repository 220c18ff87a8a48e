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
"""
from __future__ import annotations

import ctypes
import os
import time
from typing import Any

from . import exits, losses, mpi, progress, watch
from .client import FAILURE_EXIT_CODE, PEER_FAILURE_EXIT_CODE, exit_with_failure

_CALLBACK_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_state: dict[str, Any] = {"armed": False, "pid": None, "process_id": None, "client": None, "callback": None,
                          "handle": None}


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


def arm(process_id: int, client: Any) -> bool:
    """From now on, an exit called from native code reports as described above; whether that could be set up."""
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
    return True


def disarm() -> None:
    """This process ends normally from here on: run the handler now as a no-op, which also unregisters it."""
    if not _state["armed"]:
        return
    _state["armed"] = False
    functions = _glibc()
    if functions is not None and _state["pid"] == os.getpid():
        functions[1](ctypes.addressof(_state["handle"]))


def _on_native_exit(_argument: Any) -> None:
    """The C library's exit() was called from native code (Python's own exits disarm first, or skip handlers)."""
    if not _state["armed"] or _state["pid"] != os.getpid():  # disarming, or a child forked from this process
        return
    _state["armed"] = False
    client, process_id = _state["client"], _state["process_id"]
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
    reason = ("its MPI library ended it from inside (MPI's message is above: an internal assertion or abort), "
              "while no other process of the job was known to be lost")
    try:
        exits.tell_the_others(reason)
    except Exception:  # noqa: BLE001 - the coordinator may be gone already: ending this process matters more
        pass
    exit_with_failure(f"process {process_id}: {reason}.", FAILURE_EXIT_CODE)
