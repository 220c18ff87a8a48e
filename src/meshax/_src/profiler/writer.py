"""A recorded trace as a Chrome Trace Event file, which Perfetto (ui.perfetto.dev), chrome://tracing and
TensorBoard's profile plugin open.

The file is `{"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}`: one complete event (`"ph": "X"`,
microseconds since the Unix epoch, so that processes' files line up) per event and track, the process as `pid`
(its process index), each device's work on its own `tid` (the device id) beside the process's own track and its MPI
track, and metadata events (`"ph": "M"`) naming the process and every track. `otherData` holds the process index,
its host, its devices and the trace's window.
"""
from __future__ import annotations

import gzip
import json
import os
import time
from typing import Any, Sequence

from .recorder import COLLECTIVES, HOST, Recording

HOST_TID = (1 << 31) - 2  # the process's own track's tid (above every device id: process index << 17 + local index)
COLLECTIVES_TID = HOST_TID + 1
_MIN_DURATION_US = 0.001  # an event shorter than the clock can tell still shows (and nests) as 1 ns


def tid_of(track: int) -> int:
    """The `tid` of a recorder track."""
    return HOST_TID if track == HOST else COLLECTIVES_TID if track == COLLECTIVES else track


def _us(recording: Recording, ns: int) -> float:
    return (ns + recording.epoch_offset) / 1000.0


def chrome_trace(recording: Recording, process_index: int, host: str, devices: Sequence[int]) -> dict[str, Any]:
    """The Chrome Trace Event document of `recording`, made by process `process_index` on `host` whose devices (ids)
    are `devices`: each device gets a track even if nothing ran on it."""
    pid = process_index
    events: list[dict[str, Any]] = _metadata(pid, host, devices)
    for name, category, tracks, begin, end, args in recording.events:
        ts, dur = _us(recording, begin), max((end - begin) / 1000.0, _MIN_DURATION_US)
        for track in tracks:
            event = {"name": name, "cat": category, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid_of(track)}
            if args:
                event["args"] = args
            events.append(event)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"process_index": process_index, "host": host, "devices": list(devices),
                          "trace_begin_us": _us(recording, recording.begin),
                          "trace_end_us": _us(recording, recording.end)}}


def _metadata(pid: int, host: str, devices: Sequence[int]) -> list[dict[str, Any]]:
    """The events naming process `pid` and its tracks, and ordering them: its own track, MPI, then the devices."""
    names = {HOST_TID: f"process {pid} (host)", COLLECTIVES_TID: f"process {pid} MPI"}
    names.update({d: f"cpu:{d} (process {pid})" for d in devices})
    order = {HOST_TID: -2, COLLECTIVES_TID: -1, **{d: d for d in devices}}
    events = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": f"process {pid} on {host}"}},
              {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}]
    for tid, name in names.items():
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"sort_index": order[tid]}})
    return events


def write(document: dict[str, Any], path: str) -> str:
    """Write `document` as JSON to `path` (gzip'd when it ends in .gz), making its folder; returns `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    data = json.dumps(document, separators=(",", ":")).encode()
    if path.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6)
    with open(path + ".partial", "wb") as file:
        file.write(data)
    os.replace(path + ".partial", path)
    return path


def read(path: str) -> dict[str, Any]:
    """A trace file written by `write` (gzip'd or not)."""
    with open(path, "rb") as file:
        data = file.read()
    return json.loads(gzip.decompress(data) if path.endswith(".gz") else data)


def run_folder(log_dir: str, begin_epoch_ns: int) -> str:
    """`log_dir/plugins/profile/<run>`, the run named after the trace's start (UTC, to the second) as TensorBoard's
    plugin expects: the processes of a job started together share it, each writing its own file."""
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(begin_epoch_ns / 1e9))
    return os.path.join(os.fspath(log_dir), "plugins", "profile", stamp)
