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

__all__ = ["ProfileData", "ProfileEvent", "ProfileLine", "ProfileOptions", "ProfilePlane", "ProfileSession",
           "StepTraceAnnotation", "TraceAnnotation", "annotate_function", "device_memory_profile",
           "export_profile_data", "register_subprocess", "save_device_memory_profile", "start_server", "start_trace",
           "stop_server", "stop_trace", "trace"]

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
    log_dir, _Session.log_dir = _Session.log_dir, None
    _write_trace(_stop_recording(), log_dir, _Session.perfetto, _Session.link)


def _stop_recording() -> dict[str, Any]:
    """The Chrome Trace document of the recording that ends now."""
    recording = recorder.window(_Session.begin) if _Session.whole_process else recorder.stop()
    index, host, devices = _describe_process()
    return writer.chrome_trace(recording, index, host, devices)


def _write_trace(document: dict[str, Any], log_dir: str, perfetto: bool, link: bool,
                 session_id: str | None = None) -> None:
    """This process's trace file under `log_dir/plugins/profile/<run or session_id>` (and Perfetto's copy)."""
    index, host, _ = _describe_process()
    begin_ns = int(document.get("otherData", {}).get("trace_begin_us", 0) * 1000)
    folder = writer.run_folder(log_dir, begin_ns)
    if session_id:
        folder = os.path.join(os.path.dirname(folder), session_id)
    name = host if _process_count() == 1 else f"{host}.process_{index}"
    writer.write(document, os.path.join(folder, f"{name}.trace.json.gz"))
    if perfetto:
        path = writer.write(document, os.path.join(folder, "perfetto_trace.json.gz"))
        if link:
            print(f"meshax.profiler: open {os.path.abspath(path)} at https://ui.perfetto.dev (Open trace file).",
                  flush=True)


@contextlib.contextmanager
def trace(log_dir: os.PathLike | str | None = None, create_perfetto_link: bool = False,
          create_perfetto_trace: bool = False, profiler_options: ProfileOptions | None = None
          ) -> Iterator["ProfileSession"]:
    """Record a trace of the block; yields its ProfileSession, whose `profile_data` holds the trace afterwards
    (written under `log_dir` too when one is given, as stop_trace writes it)."""
    with ProfileSession(log_dir, create_perfetto_link, create_perfetto_trace, profiler_options) as session:
        yield session


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
    from meshax._src.arrays.array import live_arrays

    buffers = []
    for array in live_arrays():
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


# ---- profile data in memory (ProfileSession, ProfileData) --------------------------------------------------------


class ProfileEvent:
    """One recorded event: its name, start and end (ns since the Unix epoch) and its arguments as stats."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.name = event["name"]
        self.start_ns = float(event["ts"]) * 1000.0
        self.duration_ns = float(event.get("dur", 0)) * 1000.0
        self.end_ns = self.start_ns + self.duration_ns
        self._args = dict(event.get("args", {}))

    @property
    def stats(self) -> Iterator[tuple[str, Any]]:
        """The event's (name, value) pairs."""
        return iter(self._args.items())

    def __repr__(self) -> str:
        return f"ProfileEvent(name={self.name!r}, start_ns={self.start_ns}, duration_ns={self.duration_ns})"


class ProfileLine:
    """One track of a process (its host work, its MPI calls, or a device's work) and its events."""

    def __init__(self, name: str, events: list[ProfileEvent]) -> None:
        self.name, self._events = name, events

    @property
    def events(self) -> Iterator[ProfileEvent]:
        return iter(self._events)


class ProfilePlane:
    """One process's recording: a line per track."""

    def __init__(self, name: str, lines: list[ProfileLine], stats: dict[str, Any]) -> None:
        self.name, self._lines, self._stats = name, lines, stats

    @property
    def lines(self) -> Iterator[ProfileLine]:
        return iter(self._lines)

    @property
    def stats(self) -> Iterator[tuple[str, Any]]:
        return iter(self._stats.items())


class ProfileData:
    """A recorded trace in memory: one plane per process, from a ProfileSession or a meshax trace file."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        events = document.get("traceEvents", [])
        processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
        tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                  if e.get("ph") == "M" and e["name"] == "thread_name"}
        planes: dict[Any, dict[Any, list[ProfileEvent]]] = {}
        for e in events:
            if e.get("ph") == "M" and e["name"] == "thread_name":
                planes.setdefault(e["pid"], {}).setdefault(e["tid"], [])
            elif e.get("ph") == "X":
                planes.setdefault(e["pid"], {}).setdefault(e["tid"], []).append(ProfileEvent(e))
        self._planes = [ProfilePlane(processes.get(pid, f"process {pid}"),
                                     [ProfileLine(tracks.get((pid, tid), str(tid)), line) for tid, line in lines.items()],
                                     dict(document.get("otherData", {})))
                        for pid, lines in planes.items()]

    @property
    def planes(self) -> Iterator[ProfilePlane]:
        return iter(self._planes)

    def find_plane_with_name(self, name: str) -> ProfilePlane | None:
        """The plane called `name`, or None."""
        return next((plane for plane in self._planes if plane.name == name), None)

    @classmethod
    def from_file(cls, proto_file_path: str) -> "ProfileData":
        """The profile in a meshax trace file (`*.trace.json.gz`; meshax writes no XSpace protos)."""
        return cls(writer.read(os.fspath(proto_file_path)))

    @classmethod
    def from_serialized_xspace(cls, serialized_xspace: bytes) -> "ProfileData":
        raise NotImplementedError("meshax records Chrome traces, not XSpace protos: use ProfileData.from_file on a "
                                  "*.trace.json.gz file, or a ProfileSession's profile_data.")


class ProfileSession:
    """A profile being recorded: `start()` / `stop()` (or `with ProfileSession(...)`); `stop` returns its
    ProfileData and, with `log_dir`, writes the trace there as stop_trace does."""

    def __init__(self, log_dir: os.PathLike | str | None = None, create_perfetto_link: bool = False,
                 create_perfetto_trace: bool = False, profiler_options: ProfileOptions | None = None) -> None:
        self.log_dir = None if log_dir is None else str(log_dir)
        self.create_perfetto_link = create_perfetto_link
        self.create_perfetto_trace = create_perfetto_trace or create_perfetto_link
        self.profiler_options = profiler_options
        self.profile_data: ProfileData | None = None
        self.is_running = False

    def start(self) -> "ProfileSession":
        if self.is_running or _Session.log_dir is not None:
            raise RuntimeError("Profile has already been started. Only one profile may be run at a time.")
        start_trace(self.log_dir or os.getcwd(), profiler_options=self.profiler_options)
        self.is_running = True
        return self

    def stop(self) -> ProfileData:
        if not self.is_running:
            raise RuntimeError("No profile started")
        _Session.log_dir, self.is_running = None, False
        self.profile_data = ProfileData(_stop_recording())
        if self.log_dir is not None:
            export_profile_data(self.profile_data, self.log_dir, self.create_perfetto_link,
                                self.create_perfetto_trace)
        return self.profile_data

    def __enter__(self) -> "ProfileSession":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def export_profile_data(profile_data: ProfileData | ProfileSession, log_dir: os.PathLike | str,
                        create_perfetto_link: bool = False, create_perfetto_trace: bool = False,
                        session_id: str | None = None) -> None:
    """Write captured profile data under `log_dir` (as stop_trace writes a trace)."""
    if isinstance(profile_data, ProfileSession):
        if profile_data.is_running:
            raise RuntimeError("Cannot export a ProfileSession while it is running. Call stop() first.")
        if profile_data.profile_data is None:
            raise RuntimeError("No profile data to export. Ensure the session has completed.")
        profile_data = profile_data.profile_data
    _write_trace(profile_data.document, os.fspath(log_dir), create_perfetto_trace or create_perfetto_link,
                 create_perfetto_link, session_id)


def register_subprocess(pid: int, port: int) -> Callable[[], None]:
    """Profile a subprocess's profiler server with this process: meshax runs no profiler servers, so registering
    fails (RuntimeError, as JAX's when it cannot connect); trace the subprocess itself with start_trace."""
    raise RuntimeError(f"cannot register subprocess {pid} (port {port}): meshax processes run no profiler server; "
                       "call meshax.profiler.start_trace in the subprocess instead.")


def __getattr__(name: str) -> Any:
    from meshax._src.compat.missing_names import missing_attribute

    missing_attribute("jax.profiler", name)
