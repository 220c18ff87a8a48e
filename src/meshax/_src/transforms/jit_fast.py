"""A jitted function's repeated calls on one device, with none of the general call's layers.

A training step on small arrays is called thousands of times with arguments of the same structure, types and
placements. The general call (jit.py) flattens them into a new tree structure, builds and looks up a cache key,
checks devices, converts each argument, then wraps each result, canonicalizes its sharding and unflattens:
several microseconds per argument, ~0.3 ms for a step of 23 arrays in and 20 out, about what JAX's whole
compiled step takes. `FastCall` remembers what the last such call found: the arguments' structure, each
argument's type, sharding and commitment, the program and the results' templates. A call whose arguments match
all of it (checked in one pass over them) runs the program on their buffers directly; any other call takes the
general path, with its checks and errors. A long run of one thread's work on a host busy with other work runs on
a fresh thread (`_long_run`).
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..arrays.array import Array, from_template, read_only
from ..interpreters.eager import plain_eager_call
from ..profiler import recorder
from ..runtime import compute_pool
from ..sharding.mesh import current_mesh
from ..tree.structure_code import structure_code
from ..tree.tree_util import PyTreeDef

MISS = object()  # FastCall's answer where the general path is to run the call


def signatures(leaves: Sequence[Any]) -> list[tuple]:
    """What of each Array argument a FastCall depends on (AttributeError for a leaf that is no Array)."""
    return [(type(leaf), leaf._shape, leaf._dtype, leaf.weak_type, leaf._sharding, leaf.committed) for leaf in leaves]


def _laid_out(const: Any) -> Any:
    """A captured constant's value, C-ordered where it is a small broadcast view (a compiled program takes it so)."""
    if isinstance(const, np.ndarray) and not const.flags.c_contiguous and const.size <= SMALL_CONSTANT:
        const = read_only(np.ascontiguousarray(const))
    return const


SMALL_CONSTANT = 1 << 16  # elements
FRESH_THREAD_FROM = 0.005  # seconds: the thread's start (~0.1 ms) costs at most 2% of the run
SERIAL_CPU = 1.3  # the process's CPU time over the running thread's below which a run is one thread's work


class FastCall:
    """The last direct call of a jitted function (see the module's docstring): `__call__(args)` gives its outputs,
    or MISS."""

    __slots__ = ("_flatten", "_signatures", "_mesh", "_consts", "_run", "_templates", "_device", "_unflatten",
                 "_seconds", "_serial")

    def __init__(self, flatten: Callable[[Any], list | None], leaves: Sequence[Array], consts: Sequence[Any],
                 run: Callable[[list[Any]], list[Any]], templates: Sequence[Any], device: Any,
                 unflatten: Callable[[list], Any]) -> None:
        self._flatten, self._signatures = flatten, signatures(leaves)
        self._mesh, self._consts, self._run = current_mesh(), [_laid_out(c) for c in consts], run
        self._templates, self._device, self._unflatten = templates, device, unflatten
        self._seconds = 0.0  # how long the last run took
        self._serial = True  # whether the last run of FRESH_THREAD_FROM or more was one thread's work

    @staticmethod
    def make(structure: PyTreeDef, leaves: Sequence[Array], consts: Sequence[Any],
             run: Callable[[list[Any]], list[Any]], templates: Sequence[Any], device: Any,
             outputs: PyTreeDef) -> "FastCall | None":
        """The FastCall of a call whose arguments have `structure` and whose results `outputs` (None where one of
        them has a node other than tuples, lists, dicts, namedtuples and Nones)."""
        arguments, results = structure_code(structure), structure_code(outputs)
        if arguments is None or results is None:
            return None
        return FastCall(arguments[0], leaves, consts, run, templates, device, results[1])

    def __call__(self, args: tuple) -> Any:
        leaves = self._flatten(args)
        if leaves is None or current_mesh() is not self._mesh or not plain_eager_call():
            return MISS
        try:  # one comparison of every argument's signature
            if signatures(leaves) != self._signatures:
                return MISS
        except AttributeError:
            return MISS
        buffers = list(self._consts)
        for leaf in leaves:
            (buffer,) = leaf._buffers.values()  # a deleted Array raises JAX's error here
            buffers.append(buffer)
        device = self._device
        arrays = []
        for value, template in zip(self._timed_run(buffers), self._templates):
            if type(value) is not np.ndarray or value.dtype != template["_dtype"]:
                value = np.asarray(value, template["_dtype"])
            value.setflags(write=False)  # a result of its own is made read-only (0.3 us; `flags.writeable`: 1.3)
            arrays.append(from_template(template, {device: value}))
        return self._unflatten(arrays)

    def _timed_run(self, buffers: list[Any]) -> list[Any]:
        """The program's outputs on `buffers`, the run timed; a long one may run on a fresh thread (`_long_run`)."""
        start = time.perf_counter()
        values = self._run(buffers) if self._seconds < FRESH_THREAD_FROM else self._long_run(buffers)
        self._seconds = time.perf_counter() - start
        return values

    def _long_run(self, buffers: list[Any]) -> list[Any]:
        """A run after one of FRESH_THREAD_FROM or more: on a fresh thread where the last such run was one thread's
        work (the process's CPU time at most SERIAL_CPU times the running thread's) and the host is busy with other
        work (compute_pool.on_fresh_thread: the CPU with the least load; the threads of a product split over
        several would be placed anew for nothing: an MLP's step 12% slower)."""
        process_start = time.process_time()
        run = functools.partial(_thread_timed, self._run, buffers)
        if self._serial and not recorder.on and compute_pool.host_busy():
            values, thread_seconds = compute_pool.on_fresh_thread(run)
        else:
            values, thread_seconds = run()
        self._serial = time.process_time() - process_start <= SERIAL_CPU * thread_seconds
        return values


def _thread_timed(run: Callable[[list[Any]], list[Any]], buffers: list[Any]) -> tuple[list[Any], float]:
    """`run(buffers)` and the CPU time this thread spent in it."""
    start = time.thread_time()
    values = run(buffers)
    return values, time.thread_time() - start
