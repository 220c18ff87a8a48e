"""NumPy's floating-point warnings silenced while meshax computes, as JAX reports none.

JAX computes `log(0)` as -inf, `1 / 0` as inf and `exp(1000.)` as inf without a word; NumPy warns for each
("divide by zero encountered in log"), which a program run with `-W error` (or a test suite that turns warnings
into errors, as optax's and chex's do) takes for a failure. Inside a meshax computation (`silenced`: an eager
operation, a jitted call, the same places as denormals.flushed) NumPy's error state ignores every floating-point
error; outside it the caller's own state holds (`np.geterr()` is unchanged). meshax's compute threads ignore
them for good (`silence_this_thread`). Where a program asks for the errors (`jax_debug_nans`,
`jax_debug_infs`), meshax checks the results itself (interpreters/eager.py).
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

try:  # NumPy 2: the error state is a context variable; setting it directly costs 0.2 us, np.errstate 2 us
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

    _IGNORED: Any = _make_extobj(all="ignore")
except ImportError:  # NumPy 1: np.seterr, per thread
    _extobj_contextvar = None
    _IGNORED = None


class _ThreadState(threading.local):
    depth = 0  # `silenced` blocks entered on this thread
    restore: Any = None  # what restores the error state at the outermost exit


_thread = _ThreadState()


class _Silenced:
    """`with silenced:` computes with NumPy's floating-point errors ignored on this thread, the caller's error
    state restored at the outermost exit (nesting costs a thread-local read)."""

    def __enter__(self) -> None:
        state = _thread
        state.depth += 1
        if state.depth == 1:
            state.restore = _extobj_contextvar.set(_IGNORED) if _extobj_contextvar is not None \
                else np.seterr(all="ignore")

    def __exit__(self, *exc: Any) -> None:
        state = _thread
        state.depth -= 1
        if state.depth == 0:
            restore, state.restore = state.restore, None
            if _extobj_contextvar is not None:
                _extobj_contextvar.reset(restore)
            else:
                np.seterr(**restore)


silenced = _Silenced()


def silence_this_thread() -> None:
    """Ignore NumPy's floating-point errors on this thread from now on (meshax's own compute threads)."""
    np.seterr(all="ignore")
