"""Subnormal floats flushed to zero while meshax computes, as XLA's CPU backend computes: JAX's values, at full speed.

XLA runs CPU programs with the processor's flush-to-zero and denormals-are-zero modes on: a result below the
smallest normal float becomes zero and such an operand counts as zero (`x / 2` of float32 2e-38 is 0.0 on JAX's
CPU, `log` of 1e-40 is -inf). NumPy keeps gradual underflow, which Intel cores compute in microcode: a training
step whose gradients decay into subnormals (a GRU's) took 731 ms instead of 86 ms on a 2-core Xeon, its
32x256 @ 256x128 products 419 us instead of 64 (AMD cores pay little).

- The thread that calls meshax flushes while a meshax computation runs (`flushed`: an eager operation, a jitted
  call), and only then: NumPy code around it keeps gradual underflow (and libraries that check for it, as
  hypothesis does, find it). Entering and leaving costs about 2 us (three ctypes calls), once per outermost call.
- meshax's own compute threads flush for good (`flush_this_thread`, their pool's initializer).
- OpenBLAS's threads compute part of every multi-threaded product and are shared with NumPy: meshax restarts
  them on its first computation and starts them again from a flushing thread (blas_threads.py), so that its
  products flush in every part. A NumPy product on several BLAS threads then flushes in the part those threads
  compute (only subnormal operands and results differ).
MESHAX_FLUSH_DENORMALS=0 keeps gradual underflow everywhere (slower on Intel, subnormal results where JAX gives
zero). Done on Linux with glibc on x86-64 (the SSE control register, MXCSR) and arm64 (FPCR's FZ bit); elsewhere
subnormals stay.
"""
from __future__ import annotations

import os
import platform
import threading
from typing import Any

DISABLE_VARIABLE = "MESHAX_FLUSH_DENORMALS"
_LAYOUTS = {  # fenv_t: (offset of the control word, its flushing bits)
    "x86_64": (28, 0x8040),  # the x87 environment (28 bytes), then MXCSR; FTZ | DAZ
    "aarch64": (0, 1 << 24),  # FPCR first; FZ
}
_ENVIRONMENT_BYTES = 64  # larger than fenv_t on either machine


class _Library:
    """glibc's fegetenv/fesetenv and where the flushing bits are, once found (`ready` False where they are not)."""

    def __init__(self) -> None:
        self.ready = False
        self.why_not = ""
        self.get: Any = None
        self.set: Any = None
        self.offset, self.bits = 0, 0

    def load(self) -> None:
        if os.environ.get(DISABLE_VARIABLE, "").strip() == "0":
            self.why_not = f"{DISABLE_VARIABLE}=0"
            return
        machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
        if platform.system() != "Linux" or machine not in _LAYOUTS:
            self.why_not = f"done on Linux x86-64 and arm64, not {platform.system()} {machine}"
            return
        import ctypes

        try:
            libm = ctypes.CDLL("libm.so.6")
            self.get, self.set = libm.fegetenv, libm.fesetenv
        except (OSError, AttributeError):
            self.why_not = "no glibc libm"
            return
        self.get.argtypes = self.set.argtypes = [ctypes.c_void_p]
        self.offset, self.bits = _LAYOUTS[machine]
        self.ready = True


_library = _Library()
_loaded = threading.Lock()
_decided = False


def _loaded_library() -> _Library:
    global _decided
    if not _decided:
        with _loaded:
            if not _decided:
                _library.load()
                _decided = True
    return _library


def enabled() -> bool:
    """Whether meshax flushes subnormals (the platform allows it, MESHAX_FLUSH_DENORMALS is not 0)."""
    return _loaded_library().ready


def describe() -> str:
    """What is done, in words (for `meshax info` and the log)."""
    library = _loaded_library()
    return "flushed to zero while meshax computes, as XLA's CPU backend does" if library.ready else \
        f"kept (gradual underflow: {library.why_not})"


class _ThreadState(threading.local):
    depth = 0  # `flushed` blocks entered on this thread
    always = False  # this thread flushes for good (flush_this_thread)
    saved: Any = None  # the environment before the outermost block
    flushing: Any = None  # the environment with the flushing bits set


_thread = _ThreadState()


def _buffers() -> tuple[Any, Any]:
    """This thread's (saved, flushing) environment buffers, made on first use; `saved` holds the current one."""
    import ctypes

    library = _library
    saved, flushing = ctypes.create_string_buffer(_ENVIRONMENT_BYTES), ctypes.create_string_buffer(_ENVIRONMENT_BYTES)
    library.get(saved)
    ctypes.memmove(flushing, saved, _ENVIRONMENT_BYTES)
    word = int.from_bytes(saved.raw[library.offset:library.offset + 4], "little") | library.bits
    ctypes.memmove(ctypes.addressof(flushing) + library.offset, word.to_bytes(4, "little"), 4)
    _thread.saved, _thread.flushing = saved, flushing
    return saved, flushing


class _Flushed:
    """`with flushed:` computes with subnormals flushed on this thread, its mode restored at the outermost exit
    (nesting and threads that always flush cost a thread-local read)."""

    def __enter__(self) -> None:
        state = _thread
        state.depth += 1
        if state.depth == 1 and not state.always and enabled():
            if state.flushing is None:
                _buffers()
            else:
                _library.get(state.saved)
            _library.set(state.flushing)

    def __exit__(self, *exc: Any) -> None:
        state = _thread
        state.depth -= 1
        if state.depth == 0 and not state.always and state.saved is not None and _library.ready:
            _library.set(state.saved)


flushed = _Flushed()


def flush_this_thread() -> None:
    """Flush subnormals on this thread from now on (meshax's own compute threads)."""
    if enabled() and not _thread.always:
        saved, flushing = _buffers()
        _library.set(flushing)
        _thread.always = True
