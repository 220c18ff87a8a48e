"""Every process's trace file of one job as one file: one `pid` per process (its process index), events in time
order, metadata first; `otherData.processes` holds each process's own `otherData`."""
from __future__ import annotations

import glob
import os
from typing import Any, Sequence

from .writer import read, write

PROCESS_FILES = "processes"  # the folder of a profiled job's per-process files, under its profile folder


def process_file(profile_dir: str, process_index: int) -> str:
    """Where process `process_index` of a job profiled into `profile_dir` writes its trace."""
    return os.path.join(profile_dir, PROCESS_FILES, f"process_{process_index}.trace.json.gz")


def process_files(profile_dir: str) -> list[str]:
    """The per-process trace files under `profile_dir`."""
    return sorted(glob.glob(os.path.join(profile_dir, PROCESS_FILES, "process_*.trace.json.gz")))


def merged(documents: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The documents' events in one document."""
    metadata = [e for d in documents for e in d["traceEvents"] if e.get("ph") == "M"]
    timed = sorted((e for d in documents for e in d["traceEvents"] if e.get("ph") != "M"), key=lambda e: e["ts"])
    others = sorted((d.get("otherData", {}) for d in documents), key=lambda o: o.get("process_index", 0))
    return {"traceEvents": metadata + timed, "displayTimeUnit": "ns", "otherData": {"processes": others}}


def merge_job(profile_dir: str) -> str | None:
    """Merge the per-process files under `profile_dir` into `profile_dir/trace.json.gz`; returns its path, or None
    when no process wrote one."""
    paths = process_files(profile_dir)
    if not paths:
        return None
    return write(merged([read(p) for p in paths]), os.path.join(profile_dir, "trace.json.gz"))
