"""numba kernels compiled off the critical path, and kept on disk.

A kernel (a function `kernel` in Python source made by numba_executor.py) is wanted for a signature; until
it is compiled the caller runs its cluster as NumPy calls, with the same values. Compilation happens in one
thread of its own (started on the first request, `background`), so no call waits for numba's import
(~0.2 s), its start-up (~0.3 s) or a compilation (0.1-0.4 s per kernel); with `background` off (tests,
`MESHAX_COMPILE_KERNELS=now`) the first call compiles and waits. A kernel that fails to compile is never
asked for again: its cluster keeps running as NumPy calls.

Sources are written to the kernel cache (`$MESHAX_CACHE_DIR`, else `$XDG_CACHE_HOME/meshax`, else
`~/.cache/meshax`, under `kernels/`), named by their hash, and imported from there, so numba keeps their
machine code beside them: each kernel compiles once per machine, later processes load it. Without a
writable cache they compile in memory.
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import logging
import os
import queue
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator, Sequence

logger = logging.getLogger("meshax")
EXIT_WAIT_S = 10.0  # at exit, how long the compilation under way may take to finish


class KernelCompiler:
    """Compiled kernels by signature, compiled on request."""

    def __init__(self) -> None:
        self.background = _background_by_default()
        self._lock = threading.Lock()
        self._ready: dict[Hashable, Callable[..., None]] = {}
        self._asked: set[Hashable] = set()  # compiled, being compiled, or failed (never asked again)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._closing = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._waiting = 0  # requests queued or compiling

    def ready(self, key: Hashable) -> Callable[..., None] | None:
        """The kernel compiled for `key`, if it is."""
        return self._ready.get(key)

    def request(self, key: Hashable, source: str, examples: Sequence[Any]) -> Callable[..., None] | None:
        """The kernel of `source` for `key` (the signature of `examples`, arguments of that type after `start,
        stop`): compiled now and returned when not `background`, else queued (once) and None until ready."""
        with self._lock:
            if key in self._asked:
                return self._ready.get(key)
            self._asked.add(key)
            if self.background:
                self._waiting += 1
                self._jobs.put((key, source, examples))
                if not _held_back(self):
                    self._start_worker()
                return None
        self._compile(key, source, examples)
        return self._ready.get(key)

    def wait(self, timeout: float) -> bool:
        """Wait until no compilation is queued or under way (at most `timeout` seconds); whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: self._waiting == 0, timeout)

    def _start_worker(self) -> None:
        """Start the compiling thread (once); the caller holds the lock."""
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="meshax-kernel-compiler", daemon=True)
            self._worker.start()
            atexit.register(self._close)

    def start(self) -> None:
        """Start compiling what is queued (after a deferral, see `deferred`)."""
        with self._lock:
            self._start_worker()

    def _work(self) -> None:
        while not self._closing.is_set():
            job = self._jobs.get()
            if job is None:
                break
            try:
                self._compile(*job)
            finally:
                with self._idle:
                    self._waiting -= 1
                    self._idle.notify_all()

    def _close(self) -> None:
        """At exit: no new compilation starts; the one under way may finish (numba writes its cache files)."""
        self._closing.set()
        self._jobs.put(None)
        if self._worker is not None:
            self._worker.join(EXIT_WAIT_S)

    def _compile(self, key: Hashable, source: str, examples: Sequence[Any]) -> None:
        try:
            kernel = _load(source)
            kernel(0, 0, *examples)  # compiles (or loads from the cache) this signature; no iteration runs
        except Exception as error:  # a kernel numba cannot compile: its cluster keeps running as NumPy calls
            logger.info("meshax: a fused cluster's kernel did not compile (%s: %s); it runs as NumPy calls",
                        type(error).__name__, str(error).splitlines()[0] if str(error) else "")
            return
        self._ready[key] = kernel


# Kernels requested during a program's first call wait for the call to end: numba's import and start-up in the
# compiling thread take the interpreter lock from it (a CNN's first step on 2 cores: 1.39 s, 0.88 s with numba
# off). `_deferrals` counts the calls under way that defer; `_held` are the compilers with work waiting for them.
_deferrals = 0
_held: list[KernelCompiler] = []
_deferral_lock = threading.Lock()


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within the block, requested kernels are queued but not compiled; they start when the outermost such block
    ends (their clusters run as NumPy calls meanwhile, with the same values)."""
    global _deferrals
    with _deferral_lock:
        _deferrals += 1
    try:
        yield
    finally:
        with _deferral_lock:
            _deferrals -= 1
            starting = list(_held) if _deferrals == 0 else []
            if _deferrals == 0:
                _held.clear()
        for compiler in starting:
            compiler.start()


def deferral_active() -> bool:
    """Whether a call that defers kernels is under way (a kernel waited for now would wait for its end)."""
    return _deferrals > 0


def _held_back(compiler: KernelCompiler) -> bool:
    """Whether `compiler`'s work must wait for a deferral to end (it is then started at its end)."""
    with _deferral_lock:
        if _deferrals and compiler not in _held:
            _held.append(compiler)
        return _deferrals > 0


def describe() -> str:
    """One line for `meshax info`: numba's version, when kernels compile, and the kernel cache."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        numba = f"numba {version('numba')}"
    except PackageNotFoundError:
        numba = "numba missing (clusters run as NumPy calls)"
    when = "in the background" if _background_by_default() else "on first use (MESHAX_COMPILE_KERNELS=now)"
    folder = kernel_cache()
    where = f"cache {folder} ({len(list(folder.glob('*.py')))} kernels)" if folder else "no writable cache"
    return f"{numba}, compiled {when}, {where}"


def _background_by_default() -> bool:
    """Whether kernels compile in the background (unless MESHAX_COMPILE_KERNELS=now)."""
    return os.environ.get("MESHAX_COMPILE_KERNELS", "background") != "now"


def kernel_cache() -> Path | None:
    """The folder where kernel sources and numba's machine code for them are kept (None: none is writable)."""
    root = os.environ.get("MESHAX_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "meshax")
    folder = Path(root) / "kernels"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def _load(source: str) -> Callable[..., None]:
    """The `kernel` function of `source`, imported from a file of the kernel cache (so that numba keeps its
    machine code there), or run in memory without one."""
    name = "meshax_kernel_" + hashlib.sha256(source.encode()).hexdigest()[:24]
    folder = kernel_cache()
    if folder is None:
        namespace: dict[str, Any] = {}
        exec(compile(source.replace("cache=True", "cache=False"), name, "exec"), namespace)
        return namespace["kernel"]
    path = folder / f"{name}.py"
    if not path.exists():  # written whole and never replaced: numba's cache is keyed on the file's time stamp
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "w") as file:
            file.write(source)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(temporary)
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module.kernel
