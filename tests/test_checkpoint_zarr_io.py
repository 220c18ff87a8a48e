"""The Zarr 3 chunk files of meshax checkpoints: byte-range reads, edge padding, checksums, zarr-python agreement."""
import os

import numpy as np
import pytest
import zarr

from meshax._src.checkpoint import zarr_io
from meshax._src.core.dtypes import bfloat16


def _write(folder, value, chunks):
    """Write `value` as meshax does: metadata, then one chunk file per grid cell."""
    zarr_io.write_metadata(str(folder), value.shape, value.dtype, chunks)
    grid = [range(-(-n // c)) for n, c in zip(value.shape, chunks)]
    for index in np.ndindex(*[len(r) for r in grid]) if value.shape else [()]:
        box = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(index, chunks, value.shape))
        zarr_io.write_chunk(str(folder), tuple(index), value[box], chunks)
    return zarr_io.ArraySource(str(folder), "leaf")


@pytest.mark.parametrize("shape,chunks", [((10, 6), (3, 6)), ((10, 6), (3, 4)), ((7, 5, 3), (2, 2, 3)), ((5,), (5,))])
def test_any_box_reads_as_numpy_and_zarr_python(tmp_path, shape, chunks):
    value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 0.5
    source = _write(tmp_path / "a", value, chunks)
    rng = np.random.default_rng(0)
    for _ in range(20):
        box = []
        for n in shape:
            a, b = sorted(rng.integers(0, n + 1, size=2))
            box.append((int(a), int(b)))
        box = tuple(box)
        np.testing.assert_array_equal(source.read_box(box), value[tuple(slice(a, b) for a, b in box)])
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a"), mode="r")[...], value)


def test_scalars_bfloat16_and_integers_round_trip(tmp_path):
    for i, value in enumerate([np.array(3.5, np.float32), np.arange(6, dtype=np.int8).reshape(2, 3),
                               np.array([1.5, -2.0, 7.25], bfloat16), np.array([[1, 2]], np.uint32)]):
        chunks = tuple(max(1, n) for n in value.shape)
        source = _write(tmp_path / str(i), value, chunks)
        assert source.dtype == value.dtype
        box = tuple((0, n) for n in value.shape)
        np.testing.assert_array_equal(source.read_box(box), value)
        np.testing.assert_array_equal(np.asarray(zarr.open_array(str(tmp_path / str(i)), mode="r")[...]), value)


def test_edge_chunks_are_padded_to_the_chunk_shape(tmp_path):
    value = np.ones((5, 3), np.float64)
    _write(tmp_path / "a", value, (2, 2))
    # The chunk at the corner holds one valid element, padded to 2x2, plus a 4-byte CRC32C.
    assert os.path.getsize(tmp_path / "a" / "c" / "2" / "1") == 2 * 2 * 8 + 4


def _corrupt_source(tmp_path, damage):
    value = np.arange(40, dtype=np.float32).reshape(8, 5)
    _write(tmp_path / "a", value, (4, 5))
    damage(str(tmp_path / "a" / "c" / "1" / "0"))
    return zarr_io.ArraySource(str(tmp_path / "a"), "params.w")


def _flip_byte(path):
    with open(path, "r+b") as f:
        f.seek(7)
        byte = f.read(1)
        f.seek(7)
        f.write(bytes([byte[0] ^ 0x40]))


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(30)


@pytest.mark.parametrize("damage,message", [(_flip_byte, "fails its CRC32C check"),
                                            (_truncate, "has 30 bytes where 84 were written"),
                                            (os.remove, "is missing")])
def test_damaged_chunks_raise_naming_the_leaf_and_chunk(tmp_path, damage, message):
    source = _corrupt_source(tmp_path, damage)
    with pytest.raises(zarr_io.CorruptCheckpointError, match=message) as error:
        source.read_box(((0, 8), (0, 5)))
    assert "'params.w'" in str(error.value) and "(1, 0)" in str(error.value)
    np.testing.assert_array_equal(source.read_box(((0, 4), (0, 5))), np.arange(20, dtype=np.float32).reshape(4, 5))


def test_missing_array_metadata_is_reported(tmp_path):
    with pytest.raises(zarr_io.CorruptCheckpointError, match="neither zarr.json nor .zarray"):
        zarr_io.ArraySource(str(tmp_path / "nothing"), "opt.mu")


def test_whole_chunks_read_into_strided_buffers_are_checked_too(tmp_path):
    value = np.arange(80, dtype=np.float32).reshape(8, 10)
    _write(tmp_path / "a", value, (4, 5))  # a box of whole rows of the array spans two chunks per row
    source = zarr_io.ArraySource(str(tmp_path / "a"), "w")
    np.testing.assert_array_equal(source.read_box(((0, 8), (0, 10))), value)
    _flip_byte(str(tmp_path / "a" / "c" / "1" / "1"))
    with pytest.raises(zarr_io.CorruptCheckpointError, match=r"chunk \(1, 1\) of leaf 'w' fails its CRC32C"):
        source.read_box(((0, 8), (0, 10)))


@pytest.mark.parametrize("name", sorted(zarr_io.EXTENDED_DTYPES))
def test_extended_dtypes_round_trip_through_our_reader_and_zarr_python(tmp_path, name):
    dtype = zarr_io.EXTENDED_DTYPES[name]
    bits = np.random.default_rng(1).integers(0, 256, size=(6, 4), dtype=np.uint8)
    if dtype.itemsize == 2:
        bits = np.random.default_rng(1).integers(0, 1 << 16, size=(6, 4), dtype=np.uint16)
    value = np.asarray(bits.astype(np.float32) % 3, dtype) if name.startswith(("int", "uint")) else bits.view(dtype)
    source = _write(tmp_path / name, value, (3, 4))
    assert source.dtype == dtype
    same = source.read_box(((0, 6), (0, 4)))
    np.testing.assert_array_equal(same.view(np.uint8), value.view(np.uint8))
    other = np.asarray(zarr.open_array(str(tmp_path / name), mode="r")[...])
    assert other.dtype == dtype
    np.testing.assert_array_equal(other.view(np.uint8), value.view(np.uint8))


def test_boxes_sharing_chunks_are_read_together(tmp_path):
    value = np.arange(9 * 8, dtype=np.float32).reshape(9, 8)
    source = _write(tmp_path / "a", value, (4, 8))  # chunks of 4 whole rows, the last one padded
    boxes = [((0, 5), (0, 4)), ((0, 5), (4, 8)), ((5, 9), (0, 3)), ((5, 9), (3, 8)), ((2, 3), (1, 2))]
    for box, got in source.read_boxes(boxes).items():
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, value[tuple(slice(a, b) for a, b in box)])
    _flip_byte(str(tmp_path / "a" / "c" / "2" / "0"))
    with pytest.raises(zarr_io.CorruptCheckpointError, match=r"chunk \(2, 0\) of leaf 'leaf' fails its CRC32C"):
        source.read_boxes(boxes)



def test_boxes_read_from_any_starting_chunk_match(tmp_path):
    value = np.arange(12 * 16, dtype=np.float32).reshape(12, 16)
    source = _write(tmp_path / "a", value, (3, 16))  # rows saved, columns wanted
    boxes = [((0, 12), (0, 3)), ((0, 12), (3, 6)), ((0, 12), (8, 10)), ((2, 7), (12, 13)), ((0, 5), (2, 4))]
    for start in (0.0, 0.5, 0.99):
        for box, got in source.read_boxes(boxes, start).items():
            np.testing.assert_array_equal(got, value[tuple(slice(a, b) for a, b in box)])
