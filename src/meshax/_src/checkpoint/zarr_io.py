"""Zarr arrays of a checkpoint: metadata through zarr-python, chunk bytes read and written directly.

meshax writes each leaf as a Zarr 3 array with a regular chunk grid (one chunk per shard) and the
codecs ``bytes`` (little endian) + ``crc32c``: a chunk file is the shard's C-order bytes followed by
their CRC32C. Such chunks are written with one `write` per block and read straight into the
destination buffer (runs of whole rows with `preadv`; other regions, and chunks that several
boxes need, through one staging buffer of large reads, each needed row read once). Every chunk read
is verified whole: its CRC32C, and meshax's checksum of its position (checksums.py); a read of part
of a chunk also reads the rest for that, once per unchanged file (a cache of verified files).
Arrays with any other layout or codecs (Orbax's ``sharding_indexed`` + zstd, Zarr 2) are read
through zarr-python.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import crc32c
import numpy as np

from ..core.dtypes import _NARROW_FLOATS, _SUBBYTE_INTS, bfloat16
from .checksums import ChunkChecksums, CorruptCheckpointError

Box = tuple[tuple[int, int], ...]
BLOCK_BYTES = 16 << 20  # the size of one write, and of the zeros padding edge chunks
SYNC_THREADS = 8  # fsyncs in flight at once
VERIFIED_CACHE = 1 << 16  # chunk files remembered as verified, so that partial re-reads skip the rest


# ml_dtypes' types by the names TensorStore (and so Orbax) gives them in Zarr metadata.
EXTENDED_DTYPES = {name: dt for name, dt in (("bfloat16", bfloat16), *_NARROW_FLOATS.items(), *_SUBBYTE_INTS.items())
                   if dt is not None}


@functools.lru_cache(maxsize=None)
def _zarr() -> Any:
    """zarr-python (imported on first use), taught the extended data types (bfloat16, float8_*, int4, ...)."""
    import zarr
    from zarr.core.dtype import data_type_registry
    from zarr.core.dtype.npy.float import BaseFloat
    from zarr.core.dtype.npy.int import Int8

    for name, native in EXTENDED_DTYPES.items():
        base = BaseFloat if name.startswith(("bfloat", "float")) else Int8
        data_type_registry.register(name, _zarr_type(name, native, base))
    return zarr


def _zarr_type(name: str, native: np.dtype, base: type) -> type:
    """A zarr-python data type class for the NumPy (ml_dtypes) type `native`, stored under `name`."""
    from zarr.core.dtype.common import DataTypeValidationError

    def from_native_dtype(cls: type, dtype: Any) -> Any:
        if np.dtype(dtype) != native:
            raise DataTypeValidationError(f"not {name}: {dtype}")
        return cls()

    namespace = {"dtype_cls": type(native), "_zarr_v3_name": name, "_zarr_v2_names": (name,),
                 "from_native_dtype": classmethod(from_native_dtype), "to_native_dtype": lambda self: native,
                 "item_size": property(lambda self: native.itemsize)}
    return dataclasses.dataclass(frozen=True, kw_only=True)(type(f"Zarr_{name}", (base,), namespace))


def chunk_shape_of(shape: tuple[int, ...], shard: tuple[int, ...]) -> tuple[int, ...]:
    """The chunk grid for shards of shape `shard` (meshax's shards form a regular grid; Zarr wants >= 1)."""
    return tuple(max(1, n) for n in shard)


def write_metadata(directory: str, shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...]) -> None:
    """Create the Zarr 3 array `directory` (its zarr.json, as zarr-python makes it); no chunks are written.

    zarr-python renders the document into an in-memory store on an event loop of this thread, and the file is
    written here: zarr's own I/O starts its loop and pool threads on first use, which an async save's thread
    cannot do once the program's main thread has ended on early Python 3.12 releases (3.12.1 raises "can't
    create new thread at interpreter shutdown" there; 3.10, 3.11 and 3.13 do not), and its save would then
    never reach the others' barriers."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "zarr.json"), "wb") as file:
        file.write(_zarr_json(shape, dtype, chunks))


def _zarr_json(shape: tuple[int, ...], dtype: np.dtype, chunks: tuple[int, ...]) -> bytes:
    """The zarr.json of a meshax array, made by zarr-python without starting a thread."""
    import asyncio

    _zarr()  # the extended data types
    from zarr.api.asynchronous import create_array
    from zarr.codecs import Crc32cCodec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.storage import MemoryStore

    async def render() -> bytes:
        store = MemoryStore()
        await create_array(store=store, shape=shape, chunks=chunks, dtype=dtype, fill_value=0,
                           compressors=[Crc32cCodec()], zarr_format=3, overwrite=True)
        document = await store.get("zarr.json", prototype=default_buffer_prototype())
        assert document is not None
        return document.to_bytes()

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no loop runs on this thread, so a loop of its own does (no thread)
        loop = asyncio.new_event_loop()  # not set as the thread's loop: the program's own stays as it was
        try:
            return loop.run_until_complete(render())
        finally:
            loop.close()
    from zarr.core.sync import sync

    return sync(render())  # called from inside a running loop: zarr's loop thread renders it


def chunk_path(directory: str, index: tuple[int, ...]) -> str:
    return os.path.join(directory, "c", *map(str, index))


def _bytes_of(array: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        data = data[os.write(fd, data):]


def write_chunk(directory: str, index: tuple[int, ...], data: np.ndarray, chunk: tuple[int, ...]) -> tuple[str, int]:
    """Write one chunk file (padded to the chunk shape at the array's edges) with its CRC32C; returns its path
    and that CRC32C.

    The file is not yet durable: `sync` the paths of a save together once all are written."""
    data = np.asarray(data)
    if data.dtype.byteorder == ">":
        data = data.astype(data.dtype.newbyteorder("<"))
    if data.shape[1:] != chunk[1:]:  # clipped in an inner dimension: pad a copy
        padded = np.zeros(chunk, data.dtype)
        padded[tuple(slice(0, n) for n in data.shape)] = data
        data = padded
    path = chunk_path(directory, index)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        raw = _bytes_of(data)
        crc = 0
        for start in range(0, len(raw), BLOCK_BYTES):
            block = raw[start:start + BLOCK_BYTES]
            crc = crc32c.crc32c(block, crc)
            _write_all(fd, block)
        missing = (math.prod(chunk) - data.size) * data.dtype.itemsize  # rows past the array's end
        zeros = memoryview(bytes(min(missing, BLOCK_BYTES)))
        while missing:
            block = zeros[:min(missing, BLOCK_BYTES)]
            crc = crc32c.crc32c(block, crc)
            _write_all(fd, block)
            missing -= len(block)
        _write_all(fd, memoryview(crc.to_bytes(4, "little")))
    finally:
        os.close(fd)
    return path, crc


def sync(paths: list[str], root: str) -> None:
    """fsync the files, then every directory between them and `root`, many at a time (the disk overlaps them)."""
    folders = {root}
    for path in paths:
        folder = os.path.dirname(path)
        while folder.startswith(root) and folder not in folders:
            folders.add(folder)
            folder = os.path.dirname(folder)
    _each(sync_dir, paths)
    _each(sync_dir, sorted(folders))


def _each(function: Any, items: list[str]) -> None:
    """`function` of every item, several at a time on threads, or one after another where no thread can start:
    an async save's thread once the program has ended, on early Python 3.12 releases (see write_metadata)."""
    try:
        with ThreadPoolExecutor(SYNC_THREADS) as pool:
            list(pool.map(function, items))
    except RuntimeError as error:  # "can't create new thread at interpreter shutdown" / "... after ... shutdown"
        if "shutdown" not in str(error):
            raise
        for item in items:  # again from the start: an fsync done twice is harmless
            function(item)


def read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class ArraySource:
    """One stored array: its shape and dtype, and reading any box of it into a buffer.

    `checksums`: the checkpoint's position-bound checksums (meshax's checkpoints), checked for every chunk read."""

    def __init__(self, directory: str, name: str, checksums: ChunkChecksums | None = None) -> None:
        self.directory, self.name, self._checksums = directory, name, checksums
        v3 = os.path.join(directory, "zarr.json")
        if os.path.exists(v3):
            meta = read_json(v3)
            self.shape = tuple(meta["shape"])
            self._raw = _raw_layout(meta)
        elif os.path.exists(os.path.join(directory, ".zarray")):
            meta = read_json(os.path.join(directory, ".zarray"))
            self.shape, self._raw = tuple(meta["shape"]), None
        else:
            raise CorruptCheckpointError(
                f"leaf {name!r} has no Zarr array at {directory} (neither zarr.json nor .zarray): the checkpoint "
                "is incomplete or damaged; restore an earlier one.")
        self._zarr = None
        if self._raw is not None:
            self.dtype, self.chunk, self._crc = self._raw
        else:
            if checksums is not None:
                raise CorruptCheckpointError(
                    f"leaf {name!r} of a meshax checkpoint has a chunk layout meshax never writes ({v3}): the file "
                    "was replaced or damaged; restore an earlier checkpoint.")
            self._zarr = _open_zarr(directory)
            self.dtype = np.dtype(self._zarr.dtype)
        self._verify = self._raw is not None and (self._crc or checksums is not None)

    def read_box(self, box: Box) -> np.ndarray:
        """The values in `box`, as a new C-contiguous array of the stored dtype."""
        return self.read_boxes([box])[box]

    def read_boxes(self, boxes: list[Box], start: float = 0.0) -> dict[Box, np.ndarray]:
        """The values of each box (new C-contiguous arrays); a chunk that several boxes need is read once.

        The chunks are read in order beginning at the fraction `start` of the list: processes of one machine
        that need the same chunks start at different ones, and find the others in the shared page cache."""
        outs = {box: np.empty(tuple(b - a for a, b in box), self.dtype) for box in boxes}
        if self._zarr is not None:
            for box, out in outs.items():
                out[...] = self._zarr[tuple(slice(a, b) for a, b in box)]
            return outs
        parts: dict[tuple[int, ...], list[tuple[Box, np.ndarray]]] = {}
        for box, out in outs.items():
            for index, local, dest in self._pieces(box, out):
                parts.setdefault(index, []).append((local, dest))
        ordered = sorted(parts.items())
        first = int(start * len(ordered)) % max(1, len(ordered))
        for index, group in ordered[first:] + ordered[:first]:
            self._read_chunk(index, group)
        return outs

    def _pieces(self, box: Box, out: np.ndarray) -> Iterator[tuple[tuple[int, ...], Box, np.ndarray]]:
        """(chunk index, region in the chunk, view of `out`) for each chunk that `box` overlaps."""
        if not box:  # a scalar: one chunk of one element
            yield (), ((0, 1),), out.reshape(1)
            return
        grid = [range(a // c, -(-b // c)) if b > a else range(0) for (a, b), c in zip(box, self.chunk)]
        for position in np.ndindex(*[len(r) for r in grid]):
            index = tuple(r[i] for r, i in zip(grid, position))
            origin = [i * c for i, c in zip(index, self.chunk)]
            region = tuple((max(a, o), min(b, o + c)) for (a, b), o, c in zip(box, origin, self.chunk))
            dest = out[tuple(slice(s - a, e - a) for (s, e), (a, _) in zip(region, box))]
            yield index, tuple((s - o, e - o) for (s, e), o in zip(region, origin)), dest

    def _read_chunk(self, index: tuple[int, ...], parts: list[tuple[Box, np.ndarray]]) -> None:
        """Fill each (region, destination) of `parts` from chunk `index`, checking size and checksums."""
        path = chunk_path(self.directory, index)
        chunk = self.chunk if self.chunk else (1,)
        row = math.prod(chunk[1:]) * self.dtype.itemsize
        expected = chunk[0] * row + (4 if self._crc else 0)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise CorruptCheckpointError(
                f"chunk {index} of leaf {self.name!r} is missing ({path}): the checkpoint is incomplete or "
                "damaged; restore an earlier one.") from None
        try:
            stat = os.fstat(fd)
            if stat.st_size != expected:
                raise CorruptCheckpointError(
                    f"chunk {index} of leaf {self.name!r} has {stat.st_size} bytes where {expected} were written "
                    f"({path}): the file is truncated or damaged; restore an earlier one.")
            first = min(local[0][0] for local, _ in parts)
            last = max(local[0][1] for local, _ in parts)
            valid = min(chunk[0], self.shape[0] - index[0] * chunk[0]) if self.shape else 1  # rows before padding
            identity = (path, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            verify = self._verify and (identity not in _verified or (first, last) == (0, valid))
            (local, dest), = parts if len(parts) == 1 else [(None, None)]
            full_rows = local is not None and all(loc == (0, c) for loc, c in zip(local[1:], chunk[1:]))
            crc = _crc_of_range(fd, 0, first * row, 0) if verify else None
            if full_rows and dest.flags.c_contiguous:
                target = _bytes_of(dest) if dest.size else memoryview(b"")
                _pread_into(fd, target, first * row)
                crc = None if crc is None else crc32c.crc32c(target, crc)
            else:
                crc = self._read_rows(fd, parts, chunk, first, last, row, crc)
            if crc is not None:
                self._check(index, path, _crc_of_range(fd, last * row, chunk[0] * row, crc), fd, chunk[0] * row)
                _remember(identity)
        finally:
            os.close(fd)

    def _check(self, index: tuple[int, ...], path: str, crc: int, fd: int, end: int) -> None:
        """Raise unless `crc`, the whole chunk's, matches its Zarr CRC32C and meshax's checksum of its position."""
        if self._crc and crc != int.from_bytes(os.pread(fd, 4, end), "little"):
            raise CorruptCheckpointError(
                f"chunk {index} of leaf {self.name!r} fails its CRC32C check ({path}): the file is "
                "damaged; restore an earlier checkpoint.")
        if self._checksums is not None:
            self._checksums.verify(self.name, index, crc, path)

    def _read_rows(self, fd: int, parts: list[tuple[Box, np.ndarray]], chunk: tuple[int, ...], first: int,
                   last: int, row: int, crc: int | None) -> int | None:
        """Read rows first..last in large blocks through one staging buffer and copy each part out; returns `crc`
        (when given) continued over those rows."""
        step = max(1, BLOCK_BYTES // max(row, 1))
        staging = np.empty((min(step, last - first), *chunk[1:]), self.dtype)
        for start in range(first, last, step):
            block = staging[:min(last, start + step) - start]
            _pread_into(fd, _bytes_of(block), start * row)
            if crc is not None:
                crc = crc32c.crc32c(_bytes_of(block), crc)
            for local, dest in parts:
                lo, hi = max(start, local[0][0]), min(start + len(block), local[0][1])
                if lo < hi:
                    inner = tuple(slice(a, b) for a, b in local[1:])
                    dest[lo - local[0][0]:hi - local[0][0]] = block[(slice(lo - start, hi - start), *inner)]
        return crc


_verified: dict[tuple[Any, ...], None] = {}  # chunk files verified whole, by identity (path, inode, size, times)


def _remember(identity: tuple[Any, ...]) -> None:
    if len(_verified) >= VERIFIED_CACHE:
        del _verified[next(iter(_verified))]
    _verified[identity] = None


def _pread_into(fd: int, target: memoryview, offset: int) -> None:
    while target:
        n = os.preadv(fd, [target], offset)
        if n == 0:
            raise CorruptCheckpointError(f"unexpected end of a chunk file at byte {offset}.")
        target, offset = target[n:], offset + n


def _crc_of_range(fd: int, start: int, stop: int, crc: int) -> int:
    while start < stop:
        block = os.pread(fd, min(BLOCK_BYTES, stop - start), start)
        crc = crc32c.crc32c(block, crc)
        start += len(block)
    return crc


def _raw_layout(meta: dict[str, Any]) -> tuple[np.dtype, tuple[int, ...], bool] | None:
    """(dtype, chunk shape, has crc32c) when the array's chunks are plain little-endian bytes, else None."""
    codecs = meta.get("codecs", [])
    names = [c.get("name") for c in codecs]
    if names not in (["bytes"], ["bytes", "crc32c"]) or meta.get("storage_transformers"):
        return None
    if (codecs[0].get("configuration") or {}).get("endian", "little") != "little":
        return None
    grid, keys = meta.get("chunk_grid", {}), meta.get("chunk_key_encoding", {})
    if grid.get("name") != "regular" or keys.get("name") != "default":
        return None
    if (keys.get("configuration") or {}).get("separator", "/") != "/":
        return None
    try:
        dtype = EXTENDED_DTYPES.get(meta["data_type"]) or np.dtype(meta["data_type"])
    except TypeError:
        return None
    return dtype.newbyteorder("<"), tuple(grid["configuration"]["chunk_shape"]), names[-1] == "crc32c"


def _open_zarr(directory: str) -> Any:
    return _zarr().open_array(store=directory, mode="r")


def sync_dir(path: str) -> None:
    """fsync a file, or a directory so that the names created in it survive a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
