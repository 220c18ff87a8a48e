"""meshax's own chunk checksums, bound to each chunk's position: leaf name, chunk index, step and save.

The CRC32C that Zarr keeps at the end of a chunk file covers only its bytes, so chunk files moved
between positions (or between checkpoints) still pass it. Beside the Orbax files, in `_meshax/`,
each process records for every chunk it wrote the CRC32C of `"<leaf>|<chunk key>|<step>|<save id>|"`
followed by the chunk's own CRC32C (so a chunk whose bytes or position differ fails), and process 0
records the save (`checkpoint.json`: its id, step and process count). Restores check every chunk
they read against it; checkpoints without `_meshax/` (Orbax's) have only Zarr's checksums.
"""
from __future__ import annotations

import json
import os
from typing import Any

import crc32c

FOLDER = "_meshax"
SAVE_FILE = "checkpoint.json"
FORMAT = 1


class CorruptCheckpointError(ValueError):
    """A chunk file is missing, truncated or fails its checksum."""


def chunk_key(index: tuple[int, ...]) -> str:
    """The chunk's file name inside its array, as Zarr 3's default key encoding writes it (`c/0/1`)."""
    return "/".join(("c", *map(str, index)))


def bound_checksum(name: str, key: str, step: int | None, save_id: str, data_crc: int) -> int:
    """The CRC32C of the chunk's position (leaf, chunk, step, save) and of its bytes' own CRC32C."""
    tag = f"{name}|{key}|{step}|{save_id}|".encode()
    return crc32c.crc32c(data_crc.to_bytes(4, "little"), crc32c.crc32c(tag))


def process_file(folder: str, process: int) -> str:
    return os.path.join(folder, FOLDER, f"process_{process}.json")


def write_process_file(folder: str, process: int, step: int | None, save_id: str,
                       chunks: dict[str, dict[str, int]]) -> str:
    """Record this process's chunks ({leaf: {chunk key: data crc}}) bound to their positions; returns the file
    (not yet durable: the save fsyncs it with its chunks)."""
    bound = {name: {key: bound_checksum(name, key, step, save_id, crc) for key, crc in keys.items()}
             for name, keys in chunks.items()}
    path = process_file(folder, process)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"format": FORMAT, "process": process, "step": step, "save_id": save_id, "chunks": bound}, f)
    return path


def write_save_file(folder: str, step: int | None, save_id: str, processes: list[int]) -> str:
    """`_meshax/checkpoint.json`: which save this is and which processes wrote a file (process 0; all of a job's
    but those a job that survives losses lost); returns the file (not yet durable: the save fsyncs it with its
    chunks)."""
    path = os.path.join(folder, FOLDER, SAVE_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"format": FORMAT, "step": step, "save_id": save_id, "processes": processes}, f)
    return path


def _read(path: str, what: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise CorruptCheckpointError(
            f"{what} {path} is missing: the checkpoint is incomplete or damaged; restore an earlier one.") from None
    except (ValueError, OSError) as error:
        raise CorruptCheckpointError(
            f"{what} {path} is unreadable ({error}): the checkpoint is damaged; restore an earlier one.") from None


class ChunkChecksums:
    """The position-bound checksums of one meshax checkpoint (read once per restore)."""

    def __init__(self, folder: str, expected_step: int | None = None) -> None:
        self.folder = os.path.join(folder, FOLDER)
        save = _read(os.path.join(self.folder, SAVE_FILE), "the checkpoint's save record")
        try:
            self.step, self.save_id, processes = save["step"], str(save["save_id"]), save["processes"]
            processes = range(processes) if isinstance(processes, int) else [int(p) for p in processes]
        except (KeyError, TypeError, ValueError):
            raise CorruptCheckpointError(
                f"the save record {os.path.join(self.folder, SAVE_FILE)} is damaged; restore an earlier one.") from None
        if expected_step is not None and self.step != expected_step:
            raise CorruptCheckpointError(
                f"{folder} holds step {self.step}, not step {expected_step}: the step directory was renamed or "
                "copied; restore it as the step it was saved as.")
        self.table: dict[str, dict[str, tuple[int, str]]] = {}
        for process in processes:
            path = process_file(folder, process)
            record = _read(path, f"the chunk checksums of process {process}")
            if record.get("save_id") != self.save_id or record.get("step") != self.step:
                raise CorruptCheckpointError(
                    f"the chunk checksums {path} belong to another save (step {record.get('step')}) than the "
                    f"checkpoint (step {self.step}): files were mixed between checkpoints; restore an earlier one.")
            for name, keys in record.get("chunks", {}).items():
                self.table.setdefault(name, {}).update({key: (int(crc), path) for key, crc in keys.items()})

    def verify(self, name: str, index: tuple[int, ...], data_crc: int, chunk_file: str) -> None:
        """Raise unless the chunk at `index` of leaf `name`, whose bytes have `data_crc`, is the one saved there."""
        key = chunk_key(index)
        entry = self.table.get(name, {}).get(key)
        if entry is None:
            raise CorruptCheckpointError(
                f"chunk {index} of leaf {name!r} ({chunk_file}) was not written by the save that made this checkpoint "
                f"(no process recorded it in {self.folder}): "
                "the checkpoint is incomplete or its files were mixed; restore an earlier one.")
        if bound_checksum(name, key, self.step, self.save_id, data_crc) != entry[0]:
            raise CorruptCheckpointError(
                f"chunk {index} of leaf {name!r} ({chunk_file}) is not the chunk saved at that position (its checksum "
                f"over leaf, chunk index, step and bytes differs from {entry[1]}): the file was moved, replaced or "
                "damaged; restore an earlier checkpoint.")


def load(folder: str, expected_step: int | None = None) -> ChunkChecksums | None:
    """The checksums of the checkpoint in `folder`, or None when it has none (written by Orbax)."""
    if not os.path.isdir(os.path.join(folder, FOLDER)):
        return None
    return ChunkChecksums(folder, expected_step)
