"""A checkpoint is never lost or silently wrong (one process, 8 CPU devices): chunk files moved between positions,
leaves or checkpoints fail naming the file; reads of part of a chunk verify all of it; save(force=True) crashing
at any point leaves the old or the new checkpoint restorable; CheckpointManager refuses steps not above the
latest (as Orbax does) unless told to overwrite; bad paths are clear errors. The multi-process cases (processes
that disagree) are in test_checkpoint_multiprocess.py."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import zarr

import meshax
from meshax._src.checkpoint import commit, zarr_io
from meshax.sharding import NamedSharding, PartitionSpec as P

ckpt = meshax.checkpoint
CORRUPT = (ValueError, FileNotFoundError)


@pytest.fixture(scope="module")
def mesh():
    return meshax.make_mesh((8,), ("d",))


def tree_of(mesh, value: float) -> dict:
    sharding = NamedSharding(mesh, P("d"))
    base = np.arange(64, dtype=np.float32).reshape(16, 4)
    return {"a": meshax.device_put(base + value, sharding), "b": meshax.device_put(base * 2 + value, sharding),
            "n": np.int32(value)}


def values(tree) -> dict:
    return {k: np.asarray(v) for k, v in tree.items()}


def assert_tree(got, want) -> None:
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]), err_msg=key)


def swap(first, second) -> None:
    first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
    first.write_bytes(second_bytes)
    second.write_bytes(first_bytes)


@pytest.mark.parametrize("move", ["swap_in_leaf", "across_leaves", "across_checkpoints"])
def test_chunks_moved_between_positions_fail_naming_the_file(tmp_path, mesh, move):
    tree = tree_of(mesh, 1.0)
    ckpt.save(tmp_path / "c", tree)
    chunk = tmp_path / "c" / "a" / "c" / "2" / "0"
    if move == "swap_in_leaf":
        swap(chunk, tmp_path / "c" / "a" / "c" / "5" / "0")
    elif move == "across_leaves":
        swap(chunk, tmp_path / "c" / "b" / "c" / "2" / "0")
    else:  # the same chunk of another checkpoint (another step's values)
        ckpt.save(tmp_path / "other", tree_of(mesh, 5.0))
        shutil.copyfile(tmp_path / "other" / "a" / "c" / "2" / "0", chunk)
    assert zarr.open_array(str(tmp_path / "c" / "a"), mode="r")[...].shape == (16, 4)  # Zarr's own CRC passes
    for target in (tree, None, {"a": NamedSharding(meshax.make_mesh((2,), ("x",), devices=meshax.devices()[:2]),
                                                   P()), "b": None, "n": 0}):
        with pytest.raises(CORRUPT, match=r"chunk \(2, 0\) of leaf 'a'.*not the chunk saved at that position") as error:
            ckpt.restore(tmp_path / "c", target)
        assert str(chunk) in str(error.value)


def test_missing_checksums_of_a_process_are_an_error(tmp_path, mesh):
    ckpt.save(tmp_path / "c", tree_of(mesh, 1.0))
    os.remove(tmp_path / "c" / "_meshax" / "process_0.json")
    with pytest.raises(CORRUPT, match=r"chunk checksums of process 0 .*process_0.json is missing"):
        ckpt.restore(tmp_path / "c")


def _write(folder, value, chunks):
    zarr_io.write_metadata(str(folder), value.shape, value.dtype, chunks)
    for i in range(-(-value.shape[0] // chunks[0])):
        zarr_io.write_chunk(str(folder), (i, 0), value[i * chunks[0]:(i + 1) * chunks[0]], chunks)
    return zarr_io.ArraySource(str(folder), "w")


def _flip(path, offset) -> None:
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x08
    open(path, "wb").write(bytes(data))


def test_reading_part_of_a_chunk_verifies_all_of_it_once(tmp_path, monkeypatch):
    value = np.arange(48, dtype=np.float32).reshape(12, 4)
    source = _write(tmp_path / "a", value, (6, 4))
    reads = []
    real = zarr_io._crc_of_range
    monkeypatch.setattr(zarr_io, "_crc_of_range", lambda fd, a, b, crc: reads.append(b - a) or real(fd, a, b, crc))
    np.testing.assert_array_equal(source.read_box(((1, 2), (0, 4))), value[1:2])  # part of chunk 0: reads the rest
    assert sum(reads) == 5 * 16
    reads.clear()
    np.testing.assert_array_equal(source.read_box(((2, 4), (1, 3))), value[2:4, 1:3])  # verified before: cached
    assert sum(reads) == 0
    _flip(tmp_path / "a" / "c" / "0" / "0", 5 * 16 + 2)  # row 5, which the next read does not need
    with pytest.raises(zarr_io.CorruptCheckpointError, match=r"chunk \(0, 0\) of leaf 'w' fails its CRC32C") as error:
        source.read_box(((0, 1), (0, 4)))  # the file changed: verified again
    assert str(tmp_path / "a" / "c" / "0" / "0") in str(error.value)
    np.testing.assert_array_equal(source.read_box(((6, 7), (0, 4))), value[6:7])  # chunk 1 is intact


class Crash(Exception):
    pass


def crashing_commit(monkeypatch, at: int, events: list[str]) -> None:
    """Make commit.commit raise Crash at its `at`-th file-system step (rename, rmtree or fsync), after doing part
    of that step for an rmtree (a crash while deleting)."""
    real_rename, real_rmtree, real_sync, real_commit = os.rename, shutil.rmtree, commit.sync_dir, commit.commit
    active = [False]

    def step(name, action):
        if active[0]:
            events.append(name)
            if len(events) == at:
                raise Crash(name)
        return action()

    def rmtree(path, ignore_errors=False):
        if active[0] and len(events) + 1 == at and os.path.isdir(path):
            first = sorted(os.listdir(path))[0]
            real_rmtree(os.path.join(path, first), ignore_errors=True)  # half-deleted
        return step("rmtree", lambda: real_rmtree(path, ignore_errors=ignore_errors))

    def commit_(tmp, path):
        active[0] = True
        try:
            real_commit(tmp, path)
        finally:
            active[0] = False

    monkeypatch.setattr(os, "rename", lambda a, b: step("rename", lambda: real_rename(a, b)))
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    monkeypatch.setattr(commit, "sync_dir", lambda p: step("sync", lambda: real_sync(p)))
    monkeypatch.setattr(commit, "commit", commit_)


def test_force_save_crashing_at_any_point_keeps_old_or_new(tmp_path, mesh, monkeypatch):
    old, new, later = tree_of(mesh, 1.0), tree_of(mesh, 2.0), tree_of(mesh, 3.0)
    at = 1
    while True:
        path = tmp_path / f"c{at}"
        ckpt.save(path, old)
        events: list[str] = []
        with monkeypatch.context() as patch:
            crashing_commit(patch, at, events)
            try:
                ckpt.save(path, new, force=True)
                crashed = False
            except Crash:
                crashed = True
        renamed = events.count("rename") - (crashed and events[-1] == "rename")  # the renames that happened
        committed = renamed == 2  # the second one (the new checkpoint in place) commits it
        got = ckpt.restore(path, old)  # never nothing, never garbage
        assert_tree(got, new if committed else old)
        assert_tree(ckpt.restore(path), values(new if committed else old))
        with pytest.raises(ValueError, match="already exists.*force=True"):
            ckpt.save(path, later)  # the old checkpoint counts as existing
        ckpt.save(path, later, force=True)  # recovers, then replaces
        assert_tree(ckpt.restore(path, later), later)
        assert not [n for n in os.listdir(tmp_path) if n.startswith(path.name + ".")], os.listdir(tmp_path)
        if not crashed:
            break
        at += 1
    assert at >= 6, events  # fsync, rmtree, rename, rename, fsync, rmtree: a crash at each


def test_manager_recovers_a_step_whose_replacement_crashed(tmp_path, mesh, monkeypatch):
    manager = ckpt.CheckpointManager(tmp_path / "run", max_to_keep=3)
    for step in (1, 2):
        assert manager.save(step, tree_of(mesh, step)) is True
    with monkeypatch.context() as patch:
        crashing_commit(patch, 4, [])  # after the old step 2 is renamed aside, before the new one is renamed in
        with pytest.raises(Crash):
            manager.save(2, tree_of(mesh, 20.0), overwrite=True)
    assert "2" not in os.listdir(tmp_path / "run")
    reopened = ckpt.CheckpointManager(tmp_path / "run", max_to_keep=3)
    assert reopened.all_steps() == [1, 2] and reopened.latest_step() == 2
    assert_tree(reopened.restore(None, tree_of(mesh, 0.0)), tree_of(mesh, 2.0))
    assert reopened.save(3, tree_of(mesh, 3.0)) is True  # the next save puts the old step 2 back in place
    assert sorted(os.listdir(tmp_path / "run")) == ["1", "2", "3"]
    assert_tree(reopened.restore(2, tree_of(mesh, 0.0)), tree_of(mesh, 2.0))


def test_manager_refuses_old_steps_unless_told_to_overwrite(tmp_path, mesh):
    manager = ckpt.CheckpointManager(tmp_path / "run", max_to_keep=2)
    for step in (5, 6, 7):
        assert manager.save(step, tree_of(mesh, step)) is True
    assert manager.save(3, tree_of(mesh, 3.0)) is False  # Orbax's CheckpointManager.save answers False too
    assert manager.save(7, tree_of(mesh, 70.0)) is False
    assert manager.all_steps() == [6, 7]
    assert_tree(manager.restore(7, tree_of(mesh, 0.0)), tree_of(mesh, 7.0))
    assert manager.save(7, tree_of(mesh, 70.0), overwrite=True) is True  # replaces step 7
    assert manager.all_steps() == [6, 7]
    assert_tree(manager.restore(7, tree_of(mesh, 0.0)), tree_of(mesh, 70.0))
    handle = manager.save(4, tree_of(mesh, 4.0), asynchronous=True, overwrite=True)  # back to step 4
    handle.wait()
    assert manager.all_steps() == [4] and sorted(os.listdir(tmp_path / "run")) == ["4"]
    assert_tree(manager.restore(None, tree_of(mesh, 0.0)), tree_of(mesh, 4.0))


def test_a_step_directory_renamed_is_refused(tmp_path, mesh):
    manager = ckpt.CheckpointManager(tmp_path / "run")
    manager.save(1, tree_of(mesh, 1.0))
    os.rename(tmp_path / "run" / "1", tmp_path / "run" / "9")
    with pytest.raises(CORRUPT, match="holds step 1, not step 9"):
        manager.restore(9, tree_of(mesh, 0.0))


def test_bad_paths_are_clear_errors(tmp_path, mesh):
    tree = tree_of(mesh, 1.0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"cannot save a checkpoint to .*file/deeper/ckpt: .*file is a file, "
                                                  r"not a directory; choose a path inside a directory"):
        ckpt.save(tmp_path / "file" / "deeper" / "ckpt", tree)
    with pytest.raises(FileExistsError, match=r"cannot save a checkpoint to .*file: it is a file"):
        ckpt.save(tmp_path / "file", tree, force=True)
    os.makedirs(tmp_path / "data")
    (tmp_path / "data" / "notes.txt").write_text("precious")
    with pytest.raises(ValueError, match="exists and is not a checkpoint.*never other data"):
        ckpt.save(tmp_path / "data", tree, force=True)
    assert (tmp_path / "data" / "notes.txt").read_text() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["data", "file"]


def test_unwritable_directory_is_a_clear_error(tmp_path, mesh, monkeypatch):
    os.makedirs(tmp_path / "ro")
    os.chmod(tmp_path / "ro", 0o555)
    if os.geteuid() == 0:  # root may write anywhere: let the permission check see what a user would
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).endswith("ro") else real(p, mode))
    with pytest.raises(PermissionError, match=r"may not create files in .*ro \(read-only or no write permission\); "
                                              "choose a writable directory"):
        ckpt.save(tmp_path / "ro" / "ckpt", tree_of(mesh, 1.0))
    assert os.listdir(tmp_path / "ro") == []


def test_bad_path_error_names_the_users_line(tmp_path):
    """An uncaught error in a meshax job is reported at the user's line, not inside os or meshax."""
    from multiprocess import run_launcher

    (tmp_path / "file").write_text("x")
    program = tmp_path / "prog.py"
    program.write_text("import numpy as np, meshax\nmeshax.distributed.initialize()\n"
                       f"meshax.checkpoint.save({str(tmp_path / 'file' / 'ckpt')!r}, {{'x': np.ones(3)}})\n")
    result = run_launcher(str(program), 2, 1, timeout=120)
    text = result.stdout + result.stderr
    assert result.returncode != 0, text[-3000:]
    assert f"{program}:3" in text and "<frozen os>" not in text, text[-3000:]
    assert "is a file, not a directory; choose a path inside a directory" in text, text[-3000:]
