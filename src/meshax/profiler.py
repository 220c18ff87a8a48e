"""jax.profiler: record what each process runs, as a trace Perfetto and TensorBoard open.

While a trace is on (`start_trace`/`stop_trace`, or `with trace(log_dir):`), each process records every primitive
it runs (on the track of each device it runs for, or on the process's own track for a call over all of its devices'
blocks at once), every MPI call with its bytes and its blocking wait, jit's compilation, and the user's
annotations (`TraceAnnotation`, `StepTraceAnnotation`, `annotate_function`). `stop_trace` writes, per process,
`<log_dir>/plugins/profile/<run>/<host>.trace.json.gz` (`<host>.process_<i>.trace.json.gz` in a job of several
processes): Chrome Trace Event JSON, the layout TensorBoard's profile plugin reads; ui.perfetto.dev opens the file
itself. `meshax launch --profile DIR` traces every process of a job from start to exit and merges their files into
`DIR/trace.json.gz`.

Differences from JAX: there is no XLA profiler server (`start_server` raises NotImplementedError: no TensorBoard
can sample a meshax process; trace to a folder instead), no XPlane file (`.xplane.pb`) is written, and
`create_perfetto_link` prints the trace file's path to open at ui.perfetto.dev instead of serving it.
`device_memory_profile` returns, as JAX's does, a gzip'd pprof protocol buffer: one sample per live buffer of each
local device (the Arrays' buffers; meshax holds no executables on devices).
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import os
import socket
from typing import Any, Callable, Iterator

from meshax._src.profiler import merge, recorder, writer
from meshax._src.profiler.pprof import memory_profile

__all__ = ["ProfileOptions", "StepTraceAnnotation", "TraceAnnotation", "annotate_function", "device_memory_profile",
           "save_device_memory_profile", "start_server", "start_trace", "stop_server", "stop_trace", "trace"]

PROFILE_DIR_VARIABLE = "MESHAX_PROFILE_DIR"  # set by `meshax launch --profile DIR` in each process it starts


class ProfileOptions:
    """The options of a trace, as JAX's (accepted for compatibility; meshax's recorder has no collectors to tune)."""

    def __init__(self) -> None:
        self.host_tracer_level = 2
        self.python_tracer_level = 1
        self.enable_hlo_proto = True
        self.include_dataset_ops = True
        self.duration_ms = 0
        self.start_timestamp_ns = 0
        self.repository_path = ""
        self.session_id = ""
        self.raise_error_on_start_failure = False
        self.advanced_configuration: dict[str, Any] = {}


class _Session:
    """Where the trace being recorded goes (`log_dir`: None when none is), and whether the whole process is being
    recorded (`meshax launch --profile`): a trace is then the window of that recording from `begin` on."""

    log_dir: str | None = None
    perfetto: bool = False
    link: bool = False
    whole_process: bool = False
    begin: int = 0


def start_trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
                profiler_options: ProfileOptions | None = None) -> None:
    """Start recording this process's trace, to be written under `log_dir` by `stop_trace`."""
    if profiler_options is not None and not isinstance(profiler_options, ProfileOptions):
        raise TypeError(f"profiler_options={profiler_options!r} is not a meshax.profiler.ProfileOptions; pass one "
                        "or None.")
    if _Session.log_dir is not None:
        raise RuntimeError("Profile has already been started. Only one profile may be run at a time.")
    if _Session.whole_process:
        _Session.begin = recorder.now()
    else:
        recorder.start()
    _Session.log_dir = os.fspath(log_dir)
    _Session.perfetto, _Session.link = create_perfetto_trace or create_perfetto_link, create_perfetto_link


def stop_trace() -> None:
    """Stop the trace `start_trace` began and write this process's file (RuntimeError if none was started)."""
    if _Session.log_dir is None:
        raise RuntimeError("No profile started")
    recording = recorder.window(_Session.begin) if _Session.whole_process else recorder.stop()
    log_dir, _Session.log_dir = _Session.log_dir, None
    index, host, devices = _describe_process()
    document = writer.chrome_trace(recording, index, host, devices)
    folder = writer.run_folder(log_dir, recording.begin + recording.epoch_offset)
    name = host if _process_count() == 1 else f"{host}.process_{index}"
    writer.write(document, os.path.join(folder, f"{name}.trace.json.gz"))
    if _Session.perfetto:
        path = writer.write(document, os.path.join(folder, "perfetto_trace.json.gz"))
        if _Session.link:
            print(f"meshax.profiler: open {os.path.abspath(path)} at https://ui.perfetto.dev (Open trace file).",
                  flush=True)


@contextlib.contextmanager
def trace(log_dir: os.PathLike | str, create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
          profiler_options: ProfileOptions | None = None) -> Iterator[None]:
    """Record a trace of the block (start_trace on entry, stop_trace on exit)."""
    start_trace(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A span of the user's own, named `name` (keyword arguments become its event's arguments), on the track of
    the code it runs in; recorded only while a trace is on."""

    category = "annotation"

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name
        self.kwargs = kwargs
        self._begin: list[int] = []

    def __enter__(self) -> "TraceAnnotation":
        if recorder.on:
            self._begin.append(recorder.now())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._begin:
            recorder.add(self.name, self.category, None, self._begin.pop(), recorder.now(),
                         {k: _plain(v) for k, v in self.kwargs.items()} or None)


class StepTraceAnnotation(TraceAnnotation):
    """A training step's span (`step_num=` numbers the step), its event of category "step"."""

    category = "step"


def annotate_function(func: Callable, name: str | None = None, **decorator_kwargs: Any) -> Callable:
    """`func`, each call recorded as a TraceAnnotation named `name` (default: its qualified name)."""
    label = name or getattr(func, "__qualname__", None) or func.__name__

    @functools.wraps(func)
    def annotated(*args: Any, **kwargs: Any) -> Any:
        with TraceAnnotation(label, **decorator_kwargs):
            return func(*args, **kwargs)

    return annotated


def start_server(port: int, requires_backend: bool = True) -> Any:
    """Not available: it serves XLA's profiler to TensorBoard's live capture, and meshax processes have no XLA."""
    raise NotImplementedError(
        f"meshax.profiler.start_server(port={port!r}) is not implemented: meshax runs no XLA profiler server for "
        "TensorBoard to sample. Record a trace to a folder instead: meshax.profiler.trace(log_dir), or "
        "`meshax launch --profile DIR` for a whole job, and open it in TensorBoard or ui.perfetto.dev.")


def stop_server() -> None:
    """Raise as JAX does when no profiler server runs (none ever does in meshax)."""
    raise ValueError("No active profiler server.")


def device_memory_profile(backend: str | None = None) -> bytes:
    """The live Arrays' buffers on this process's devices, as a gzip'd pprof protocol buffer."""
    from meshax._src.arrays.array import live

    buffers = []
    for array in list(live.values()):
        owner = f"Array {array.dtype}{list(array.shape)}"
        seen: set[int] = set()
        for device, buffer in array.local_buffers().items():
            kind = "replica" if id(buffer) in seen else "buffer"  # replicas of one device's block share it
            seen.add(id(buffer))
            buffers.append((owner, str(device), kind, int(buffer.nbytes) if kind == "buffer" else 0))
    return memory_profile(buffers)


def save_device_memory_profile(filename: os.PathLike | str, backend: str | None = None) -> None:
    """Write `device_memory_profile()` to `filename`."""
    profile = device_memory_profile(backend)
    with open(filename, "wb") as file:
        file.write(profile)


def _plain(value: Any) -> Any:
    """An annotation argument as JSON can hold it."""
    return value if isinstance(value, (bool, int, float, str)) or value is None else str(value)


def _process_count() -> int:
    from meshax._src.runtime import devices

    return devices.table().process_count if devices.started() else 1


def _describe_process() -> tuple[int, str, list[int]]:
    """This process's index, host name and devices' ids, without starting a backend that has not started."""
    from meshax._src.runtime import devices

    if devices.started():
        table = devices.table()
        return table.process_index, socket.gethostname(), [d.id for d in table.local]
    return int(os.environ.get("MESHAX_PROCESS_ID", "0")), socket.gethostname(), []


def _write_job_part(profile_dir: str) -> None:
    """At exit of a process of a profiled job: its trace, where `meshax launch --profile` merges it from."""
    if not recorder.on:
        return
    index, host, devices = _describe_process()
    document = writer.chrome_trace(recorder.stop(), index, host, devices)
    writer.write(document, merge.process_file(profile_dir, index))


def trace_whole_process(profile_dir: str) -> None:
    """Record from now until this process exits, its trace then written for `meshax launch --profile` to merge."""
    recorder.start()
    _Session.whole_process = True
    atexit.register(_write_job_part, profile_dir)


def __getattr__(name: str) -> Any:
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.profiler", name)
