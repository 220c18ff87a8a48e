"""Lets OpenBLAS's idle threads sleep at once instead of spinning, so that they leave the cores to other
controllers and to meshax's own threads between matrix products.

After each multi-threaded call OpenBLAS keeps its threads spinning for 2^28 cycles (about 0.1 s) before
they sleep: a controller at rest burns a core per BLAS thread, and a step that alternates matmuls with
elementwise work on meshax's pool shares every core with a spinning BLAS thread (on a 16-core host an
add and max over (2048, 1024) float32 took 4.8 ms on 16 threads right after a matmul, 1.7-2.5 ms
otherwise). XLA runs both kinds of work on one pool. OpenBLAS reads its wait, OPENBLAS_THREAD_TIMEOUT,
when it loads; its shortest, 4, is 16 cycles. Waking sleeping threads costs microseconds, a matmul of a
step milliseconds.

- `import meshax` sets OPENBLAS_THREAD_TIMEOUT=4 in the environment (`choose_at_import`): an OpenBLAS
  loaded later (NumPy imported after meshax, the launcher's children) starts with it.
- Where NumPy was imported first, its OpenBLAS already waits long: on the first computation with
  `CONTENDED_FROM` compute threads or more (`quiet_idle_threads`; BLAS then has threads of its own)
  meshax has it re-read its settings with the short wait (`openblas_read_env`) and restarts its threads
  (`blas_thread_shutdown_`; they start again on the next multi-threaded call). Measured on 2 cores: two
  devices' matmuls side by side after a spinning BLAS thread 34 ms, 17 ms after a sleeping one; a
  one-device step the same either way (115.7 vs 116.5 ms, medians of 5 alternating runs).
Neither is done where the user set OPENBLAS_THREAD_TIMEOUT or MESHAX_QUIET_BLAS_THREADS=0, except the restart
where meshax flushes subnormals (denormals.py: threads started before `import meshax` would not); the restart
only for OpenBLAS on its own threads (pthreads) with those entry points.

Where to find them (`_entry_points`): scipy-openblas up to 0.3.31 (NumPy <= 2.4) exports both; the 0.3.34
build in NumPy 2.5's wheels keeps them (same code) but hidden: absent from the dynamic symbols, so dlsym
(ctypes) cannot see them, and listed only in the file's ELF symbol table (.symtab, kept: the wheel is not
stripped). There meshax reads their offsets from .symtab and adds the address the library was loaded at
(that of an exported function less its offset). Only plain functions of exactly those names, each once in
the table, and a page-aligned load address are used; anything else (a stripped build, another format) and
meshax says that the default wait stays.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from . import denormals

DISABLE_VARIABLE = "MESHAX_QUIET_BLAS_THREADS"
TIMEOUT_VARIABLE = "OPENBLAS_THREAD_TIMEOUT"
SHORTEST_TIMEOUT = "4"  # OpenBLAS's smallest: its threads wait 2^4 cycles before they sleep
CONTENDED_FROM = 2  # compute threads from which BLAS runs threads of its own

_numpy_first = False  # set at import: NumPy's OpenBLAS was loaded before meshax (its threads may run already)
_state: list[str] = []  # what was done, once decided (a one-element cache)


def choose_at_import() -> None:
    """Set the short wait in the environment unless the user chose a wait or turned this off."""
    global _numpy_first
    _numpy_first = "numpy" in sys.modules
    if TIMEOUT_VARIABLE in os.environ or _disabled():
        return
    os.environ[TIMEOUT_VARIABLE] = SHORTEST_TIMEOUT


def quiet_idle_threads(controller: Any, threads: int) -> str:
    """Restart the OpenBLAS libraries that `controller` (a threadpoolctl ThreadpoolController) found with
    the short wait where they loaded before meshax, once, when the controller's share is `threads` >=
    CONTENDED_FROM; returns what is in effect, in words (for `meshax info` and the log)."""
    if _state:
        return _state[0]
    if _numpy_first and _quiet_wanted() and threads < CONTENDED_FROM:
        return (f"OpenBLAS's default wait (NumPy was imported first; with {threads} compute thread BLAS runs "
                "no threads of its own)")
    _state.append(_apply(controller))
    return _state[0]


def _disabled() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "").strip() == "0"


def _quiet_wanted() -> bool:
    """Whether meshax set the short wait (the user chose neither another wait nor to keep the default)."""
    return not _disabled() and os.environ.get(TIMEOUT_VARIABLE) == SHORTEST_TIMEOUT


def _apply(controller: Any) -> str:
    if _disabled():
        wait = f"OpenBLAS's default wait ({DISABLE_VARIABLE}=0)"
    elif not _quiet_wanted():
        wait = f"the user's {TIMEOUT_VARIABLE}={os.environ.get(TIMEOUT_VARIABLE, '(unset)')}"
    else:
        wait = "they sleep at once (OPENBLAS_THREAD_TIMEOUT=4)"
    # threads started before meshax was imported do not sleep at once; threads started outside a meshax
    # computation do not flush subnormals (denormals.py): restarted, they start again from a flushing thread
    if not ((_numpy_first and _quiet_wanted()) or denormals.enabled()):
        return wait
    libraries = [lib for lib in controller.lib_controllers if lib.internal_api == "openblas"]
    if not libraries:
        return "no OpenBLAS"
    if all(lib.threading_layer == "pthreads" and _restart(lib.filepath) for lib in libraries):
        return wait + (", restarted: NumPy was imported first" if _numpy_first else ", restarted")
    return ("OpenBLAS's default wait and subnormals (loaded before meshax, and its build has no openblas_read_env "
            "and blas_thread_shutdown_ to restart its threads: import meshax before NumPy or set "
            "OPENBLAS_THREAD_TIMEOUT=4 before Python starts)")


def start_threads_flushing() -> None:
    """Have OpenBLAS start its threads (stopped by the restart) from this thread while it flushes subnormals,
    so that they flush for good: one product large enough for BLAS to run it on every thread."""
    if denormals.enabled():
        import numpy as np

        square = np.ones((256, 256), np.float32)
        with denormals.flushed:
            np.matmul(square, square)


def _restart(path: str) -> bool:
    """Have the OpenBLAS at `path` re-read its settings (the short wait is in the environment) and stop its
    threads; False where neither its dynamic symbols nor its symbol table have the entry points."""
    entry_points = _entry_points(path)
    if entry_points is None:
        return False
    read_settings, stop_threads = entry_points
    read_settings()
    stop_threads()
    return True


READ_SETTINGS, STOP_THREADS = "openblas_read_env", "blas_thread_shutdown_"


def _entry_points(path: str) -> tuple[Any, Any] | None:
    """`openblas_read_env` (void(void)) and `blas_thread_shutdown_` (int(void)) of the loaded OpenBLAS at
    `path`: exported (dlsym), else hidden and found through the file's ELF symbol table; None if neither."""
    import ctypes  # here: importing them costs 3 ms of every `import meshax`
    import struct

    try:
        library = ctypes.CDLL(path)  # the loaded one: same path, so dlopen returns it
    except OSError:
        return None
    try:
        return getattr(library, READ_SETTINGS), getattr(library, STOP_THREADS)
    except AttributeError:
        pass
    try:
        hidden, exported = _symbol_table(path, (READ_SETTINGS, STOP_THREADS))
    except (OSError, ValueError, IndexError, struct.error):
        return None
    if set(hidden) != {READ_SETTINGS, STOP_THREADS}:
        return None
    for name, offset in exported.items():  # the load address: an exported function's address less its offset
        try:
            address = ctypes.cast(getattr(library, name), ctypes.c_void_p).value
        except AttributeError:
            continue
        base = (address or 0) - offset
        if address and base >= 0 and base % 4096 == 0:
            return (ctypes.CFUNCTYPE(None)(base + hidden[READ_SETTINGS]),
                    ctypes.CFUNCTYPE(ctypes.c_int)(base + hidden[STOP_THREADS]))
    return None


def _symbol_table(path: str, names: tuple[str, ...]) -> tuple[dict[str, int], dict[str, int]]:
    """From the ELF64 little-endian file at `path`: the offsets of the functions `names` defined exactly once
    in its .symtab, and of up to 8 exported (global, defined) functions with 'openblas' in their names in
    its .dynsym (anchors for the load address)."""
    import mmap
    import struct

    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:6] != b"\x7fELF\x02\x01":  # 64-bit, little-endian
            raise ValueError(path)
        (section_offset,) = struct.unpack_from("<Q", data, 0x28)
        entry_size, count = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size) for i in range(count)]
        wanted = {name.encode(): name for name in names}
        hidden: dict[str, list[int]] = {}
        exported: dict[str, int] = {}
        for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
            if kind not in (2, 11) or symbol_size != 24:  # SHT_SYMTAB, SHT_DYNSYM; Elf64_Sym
                continue
            strings = sections[link][4]
            table = data[offset:offset + size]
            for name_at, info, _, section, value, _ in struct.iter_unpack("<IBBHQQ", table):
                if info & 0xF != 2 or section == 0 or value == 0:  # STT_FUNC, defined
                    continue
                end = data.find(b"\0", strings + name_at)
                name = data[strings + name_at:end]
                if kind == 2 and name in wanted:
                    hidden.setdefault(wanted[name], []).append(value)
                elif kind == 11 and info >> 4 == 1 and b"openblas" in name and len(exported) < 8:  # STB_GLOBAL
                    exported[name.decode()] = value
    return {name: values[0] for name, values in hidden.items() if len(set(values)) == 1}, exported
