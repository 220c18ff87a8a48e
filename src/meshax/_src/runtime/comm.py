"""The data plane: buffer-based MPI operations among a group of processes.

Everything meshax moves between processes goes through a ProcessGroup, so that
later layers (collectives, resharding, desync checks) have one place to hook into.
Buffers are NumPy arrays passed to MPI without pickling or extra copies. While a profiler trace is recorded,
every operation is an event of the process's MPI track, with its bytes, and the time it blocks in MPI (agreeing,
exchanging) an event inside it.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import buffers
from ..config import config
from ..profiler import recorder
from . import inband
from .mpi import mpi_module
from .shared_reduce import SharedMemoryReducer
from . import watch
from .watch import Activity, communicating


_REDUCTIONS = ("sum", "prod", "max", "min")
_PLANS_KEPT = 1024  # reductions planned per group (shape, dtype, op); more, and the plans start over
_NUMPY_OPS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}
SHARED_MEMORY_FROM = 1 << 20  # bytes; smaller reductions are latency-bound and MPI's own path is best
CHECKED_BYTES = 4096 + 64  # the one size of every small checked reduction: 4 KiB of data and the check


class ProcessGroup:
    """MPI operations among `ranks` (world ranks, i.e. process indices), in that order.

    Every operation advances the group's history (history.py) and, unless checking is off (MESHAX_CHECK=0),
    verifies that every member is running the same operation at the same point of the same history:
    reductions carry the check in their data (inband.py), other operations first agree with a small allreduce.
    A disagreement fails the whole job with what each process is doing, never a wrong number."""

    def __init__(self, comm: Any, ranks: Sequence[int], one_machine: bool = False) -> None:
        self.comm = comm
        self.ranks = tuple(ranks)
        self.size = len(self.ranks)
        self.rank = comm.Get_rank()
        self._where = f"among processes {list(self.ranks)}"
        # Decided from the job's host table, not collectively: members that run different operations must never
        # meet in different collectives before their check has caught it.
        self._reducer = SharedMemoryReducer(comm) if one_machine and self.size > 1 else None
        MPI = mpi_module()
        self._in_place, self._max = MPI.IN_PLACE, MPI.MAX
        self._bare_check = bytearray(CHECKED_BYTES)  # what _agree reduces (as int64): zeros and a check
        self._bare_message = (self._bare_check, MPI.INT64_T)
        self._bare_trailer = inband.trailer(np.dtype(np.int64), "max", self.size, CHECKED_BYTES)
        self._reductions: dict[tuple, _Reduction] = {}  # by (shape, dtype, op, checking)

    @contextlib.contextmanager
    def _operation(self, name: str, signature: Any, agree_first: bool = True, nbytes: int = 0) -> Iterator[Activity]:
        """Run MPI operation `name` (of `nbytes` from this member) under the watchdog, as a step of the group's
        history; when checking and `agree_first`, first agree with every member that it is the same step."""
        entry = f"MPI {name} {signature}"
        with self._exchange(f"{entry} {self._where}", entry, agree_first and config.read("meshax_check"),
                            nbytes) as activity:
            yield activity

    @contextlib.contextmanager
    def _exchange(self, what: str, entry: str, agree_first: bool, nbytes: int = 0,
                  begin: int = 0) -> Iterator[Activity]:
        """An exchange among the members under the watchdog (`what`, history `entry`), after agreeing that it is the
        same step where `agree_first`; an MPI failure inside it fails the job as the members' disagreement. While
        recording: an event from `begin` (default: now) with its `nbytes`, the exchange itself its wait."""
        with communicating(what, self.ranks, entry) as activity:
            waiting = recorder.now() if recorder.on else 0
            if agree_first:
                self._agree(activity)
            try:
                yield activity
            except mpi_module().Exception as error:
                detail = f"MPI failed: {str(error).splitlines()[0]}"
                if error.Get_error_class() == mpi_module().ERR_TRUNCATE:  # the members' sizes differ
                    self._desync(activity, detail)
                watch.transport_failed(activity, self.ranks, detail)  # a peer's death, most often
            if waiting:
                self._record(entry, begin or waiting, waiting, nbytes)

    def _record(self, entry: str, begin: int, waiting: int, nbytes: int) -> None:
        """An operation as an event of the MPI track, from `begin`, blocked in MPI from `waiting` on."""
        waited = recorder.now()
        args = {"bytes": nbytes, "processes": list(self.ranks)}
        recorder.add("wait", "wait", (recorder.COLLECTIVES,), waiting, waited, args)
        recorder.add(entry, "collective", (recorder.COLLECTIVES,), begin, max(recorder.now(), waited + 1), args)

    def check_same(self, name: str, signature: Any) -> None:
        """Fail the job on every member unless all pass the same `signature` (checked even with checks off)."""
        with communicating(f"{name} {signature} {self._where}", self.ranks, f"{name} {signature}") as activity:
            self._agree(activity)

    def _agree(self, activity: Activity) -> None:
        """Check, in one small allreduce of only a trailer, that every member is at the same step of the same
        history."""
        check = self._bare_trailer
        assert check is not None
        expected = check.write(self._bare_check, activity.chain)
        self.comm.Allreduce(self._in_place, self._bare_message, op=self._max)
        if not check.agrees(self._bare_check, expected):
            self._bare_check[:] = bytes(CHECKED_BYTES)  # a member reducing something else may have left data
            self._desync(activity, "the members' histories differ")

    def _desync(self, activity: Activity, detail: str) -> None:
        watch.desync(activity, self.ranks, detail)

    def _mpi_op(self, op: str) -> Any:
        if op not in _REDUCTIONS:
            raise ValueError(f"reduction op={op!r} is not one of {_REDUCTIONS}.")
        MPI = mpi_module()
        return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[op]

    def allreduce(self, array: np.ndarray, op: str = "sum", out: np.ndarray | None = None) -> np.ndarray:
        """Reduce `array` elementwise over the group; every member gets the result (in `out` if given). NaN
        propagates through max and min, as in NumPy and XLA."""
        send = np.require(array, requirements="C")
        result = self._allreduce(send.shape, send.dtype, op, send)
        if out is None:
            return result
        out[...] = result
        return out

    def allreduce_filled(self, shape: tuple[int, ...], dtype: np.dtype, op: str,
                         fill: Callable[[np.ndarray], None]) -> np.ndarray:
        """Like allreduce, for an array that `fill(buffer)` writes into a C-contiguous `buffer` of `shape` and
        `dtype` that this method provides, so that it is made where the reduction needs it (no copy)."""
        return self._allreduce(shape, dtype, op, fill)

    def _allreduce(self, shape: tuple[int, ...], dtype: np.dtype, op: str,
                   source: np.ndarray | Callable[[np.ndarray], None]) -> np.ndarray:
        """The reduction `op` over the group of `source`: an array, or how to fill one of `shape` and `dtype`.
        When checking, the check travels in the reduced buffer itself (inband.py): small reductions in one
        buffer of the one checked size, larger ones after their data."""
        begin = recorder.now() if recorder.on else 0  # the reduction's event begins with making its buffer
        checking = config.read("meshax_check")
        plan = self._reductions.get((shape, dtype, op, checking))
        if plan is None:
            plan = self._plan_reduction(shape, dtype, op, checking)
        check, raw, flat = plan.check, None, None
        if (callable(source) and not plan.small and self._reducer is not None
                and (plan.size + (check.length if check else 0)) * dtype.itemsize >= SHARED_MEMORY_FROM):
            return self._allreduce_in_window(plan, shape, dtype, op, source, checking, begin)
        if plan.small:  # the data and the check in one buffer of the one checked size; zeros between them
            raw = bytearray(CHECKED_BYTES)  # zeros; struct writes the check into a bytearray faster than into NumPy
            send = result = np.frombuffer(raw, dtype, plan.size)
            if len(shape) != 1:
                send = result = send.reshape(shape)
        elif check is not None:  # a large checked reduction's buffer: the data, then the check
            flat = buffers.empty((plan.size + check.length,), dtype)
            send = result = flat[:plan.size]
            if len(shape) != 1:
                send = result = send.reshape(shape)
        elif callable(source):
            send = result = buffers.empty(shape, dtype)
        else:
            send, result = source, buffers.empty(shape, dtype)
        if callable(source):
            source(send)
        elif send is not source:
            send[...] = source
        nans = np.isnan(send) if plan.nans else None
        with self._exchange(plan.what, plan.entry, checking and check is None, plan.nbytes, begin) as activity:
            if raw is not None:
                expected = check.write(raw, activity.chain)
                self.comm.Allreduce(self._in_place, (raw, plan.datatype), op=plan.mpi_op)
                if not raw.startswith(expected, check.offset):  # check.agrees(raw, expected), inlined
                    self._desync(activity, "the members' histories differ")
            elif flat is not None:
                expected = check.write(flat, activity.chain)
                if self._reducer is not None and flat.nbytes >= SHARED_MEMORY_FROM:
                    self._reducer.allreduce(flat, flat, _NUMPY_OPS[op])  # NumPy propagates NaN itself
                    nans = None
                else:
                    self.comm.Allreduce(self._in_place, flat, op=plan.mpi_op)
                if not check.agrees(flat, expected):
                    self._desync(activity, "the members' histories differ")
            elif self._reducer is not None and send.nbytes >= SHARED_MEMORY_FROM:  # NumPy propagates NaN
                self._reducer.allreduce(send.reshape(-1), result.reshape(-1), _NUMPY_OPS[op])
                nans = None
            else:
                self.comm.Allreduce(self._in_place if send is result else send, result, op=plan.mpi_op)
            if nans is not None:
                self._propagate_nans(nans.reshape(-1), result.reshape(-1))
        return result

    def _allreduce_in_window(self, plan: "_Reduction", shape: tuple[int, ...], dtype: np.dtype, op: str,
                             fill: Callable[[np.ndarray], None], checking: bool, begin: int = 0) -> np.ndarray:
        """`_allreduce` of a large array made by `fill` among processes of one machine: filled straight into this
        member's slot of the shared window (shared_reduce.py; no copy in), the check after the data."""
        check = plan.check
        with self._exchange(plan.what, plan.entry, checking and check is None, plan.nbytes, begin) as activity:
            flat = self._reducer.own_slot(plan.size + (check.length if check else 0), dtype)
            fill(flat[:plan.size].reshape(shape))
            expected = check.write(flat, activity.chain) if check is not None else None
            flat = self._reducer.reduce_slots(buffers.empty(flat.shape, dtype), _NUMPY_OPS[op])  # NaN propagates
            if expected is not None and not check.agrees(flat, expected):
                self._desync(activity, "the members' histories differ")
        return flat[:plan.size].reshape(shape)

    def _plan_reduction(self, shape: tuple[int, ...], dtype: np.dtype, op: str, checking: bool) -> "_Reduction":
        """Work out, once per shape, dtype, op and checking, what every such reduction needs."""
        if len(self._reductions) >= _PLANS_KEPT:
            self._reductions.clear()
        plan = self._reductions[(shape, dtype, op, checking)] = _Reduction(self, shape, dtype, op, checking)
        return plan

    def _propagate_nans(self, nans: np.ndarray, result: np.ndarray) -> None:
        """Put NaN wherever any member had one: MPI's MAX and MIN may skip NaN, NumPy's propagate it."""
        MPI = mpi_module()
        anywhere = np.array([nans.any()], np.uint8)
        self.comm.Allreduce(MPI.IN_PLACE, anywhere, op=MPI.MAX)
        if anywhere[0]:
            mask = nans.view(np.uint8)
            self.comm.Allreduce(MPI.IN_PLACE, mask, op=MPI.MAX)
            result[mask.view(np.bool_)] = np.nan

    def allgather(self, array: np.ndarray) -> np.ndarray:
        """Stack every member's equally shaped `array` along a new leading axis."""
        send = np.require(array, requirements="C")
        result = buffers.empty((self.size,) + send.shape, send.dtype)
        with self._operation("Allgather", (send.shape, send.dtype.str), nbytes=send.nbytes):
            self.comm.Allgather(_wire(send), _wire(result))
        return result

    def allgatherv_inplace(self, result: np.ndarray, counts: Sequence[int]) -> np.ndarray:
        """Fill the flat `result` with every member's part: member i's counts[i] elements follow those of
        members before it, and each member has already written its own part in place."""
        MPI = mpi_module()
        if len(set(counts)) == 1:  # MPICH's Allgatherv is far slower than Allgather for equal parts
            with self._operation("Allgather", (counts[0], result.dtype.str), nbytes=result.nbytes // len(counts)):
                self.comm.Allgather(MPI.IN_PLACE, _wire(result))
        else:
            with self._operation("Allgatherv", (tuple(counts), result.dtype.str),
                                 nbytes=counts[self.rank] * result.itemsize):
                self.comm.Allgatherv(MPI.IN_PLACE, [_wire(result), list(counts)])
        return result

    def broadcast(self, array: np.ndarray, root: int) -> np.ndarray:
        """Every member gets member `root`'s `array` (others pass a buffer of the same shape)."""
        buffer = np.require(array, requirements="C")
        with self._operation("Bcast", (root, buffer.shape, buffer.dtype.str), nbytes=buffer.nbytes):
            self.comm.Bcast(_wire(buffer), root=root)
        return buffer

    def broadcast_object(self, value: Any, root: int) -> Any:
        with self._operation("bcast", root):
            return self.comm.bcast(value, root=root)

    def allgather_object(self, value: Any) -> list[Any]:
        with self._operation("allgather", None):
            return self.comm.allgather(value)

    def barrier(self) -> None:
        with self._operation("Barrier", None):
            if not config.read("meshax_check"):  # else agreeing (an allreduce) already synchronised everyone
                self.comm.Barrier()


class _Reduction:
    """What every reduction of one shape, dtype and op over one group needs, worked out once (a training step
    makes the same reductions every time): its history entry, MPI's op and datatype, and its in-band check if
    checking: `small` ones travel in a buffer of CHECKED_BYTES, others after their data."""

    __slots__ = ("size", "nbytes", "entry", "what", "mpi_op", "datatype", "check", "small", "nans")

    def __init__(self, group: ProcessGroup, shape: tuple[int, ...], dtype: np.dtype, op: str, checking: bool) -> None:
        self.size = math.prod(shape)
        self.nbytes = self.size * dtype.itemsize
        self.entry = f"MPI Allreduce {(op, shape, dtype.str)}"
        self.what = f"{self.entry} {group._where}"
        self.mpi_op = group._mpi_op(op)
        self.nans = op in ("max", "min") and dtype.kind in "fc"
        check = inband.trailer(dtype, op, group.size, CHECKED_BYTES) if checking else None
        self.small = check is not None and self.size * dtype.itemsize + check.nbytes <= CHECKED_BYTES
        self.datatype = mpi_module().Datatype.fromcode(dtype.char) if self.small else None  # predefined: no Free
        if check is not None and not self.small:
            check = inband.trailer(dtype, op, group.size, (self.size + check.length) * dtype.itemsize)
        self.check = check


def _wire(array: np.ndarray) -> np.ndarray:
    """`array` as MPI can carry it: dtypes MPI has no type for (bfloat16, float8: NumPy kind 'V') viewed, bit for
    bit, as unsigned integers of their size."""
    return array.view(f"u{array.itemsize}") if array.dtype.kind == "V" else array
