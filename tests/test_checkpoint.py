"""meshax.checkpoint in one process (8 CPU devices): every dtype, nested trees, the files Orbax expects,
CheckpointManager and async_save, clear errors for wrong targets and damaged or uncommitted checkpoints, and
`meshax.checkpoint` still being jax.checkpoint (remat) when called."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import meshax
import meshax.numpy as jnp
from meshax.sharding import NamedSharding, PartitionSpec as P

ckpt = meshax.checkpoint


@pytest.fixture(scope="module")
def mesh():
    return meshax.make_mesh((8,), ("d",))


def dtypes() -> list[np.dtype]:
    names = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "complex64",
             "bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint4"]
    import ml_dtypes

    return [np.dtype(getattr(ml_dtypes, n, None) or n) for n in names]


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", dtypes(), ids=str)
def test_every_dtype_round_trips_bit_exactly(tmp_path, mesh, dtype):
    rng = np.random.default_rng(0)
    value = (rng.standard_normal((16, 3)) * 4).astype(dtype)
    tree = {"sharded": meshax.device_put(value, NamedSharding(mesh, P("d"))),
            "scalar": meshax.device_put(value[0, 0], NamedSharding(mesh, P()))}
    ckpt.save(tmp_path / "c", tree)
    got = ckpt.restore(tmp_path / "c", tree)
    assert got["sharded"].sharding == tree["sharded"].sharding and got["sharded"].dtype == dtype
    assert same(got["sharded"], value) and same(got["scalar"], value[0, 0])
    host = ckpt.restore(tmp_path / "c")
    assert same(host["sharded"], value)


def test_nested_trees_none_scalars_and_files_orbax_expects(tmp_path, mesh):
    w = np.arange(64 * 6, dtype=np.float32).reshape(64, 6)
    tree = {"layers": [{"w": meshax.device_put(w, NamedSharding(mesh, P("d"))), "b": None},
                       ({"k": meshax.random.PRNGKey(3)}, np.int8(-4))],
            "lr": 0.5, "rep": meshax.device_put(w[:2], NamedSharding(mesh, P()))}
    ckpt.save(tmp_path / "c", tree)
    files = set(os.listdir(tmp_path / "c"))
    assert {"_METADATA", "_CHECKPOINT_METADATA", "layers.0.w", "layers.1.0.k", "layers.1.1", "lr", "rep"} <= files
    assert "layers.0.b" not in files
    meta = json.loads((tmp_path / "c" / "_METADATA").read_text())
    assert meta["use_ocdbt"] is False and meta["use_zarr3"] is True
    entry = meta["tree_metadata"][str(("layers", "0", "w"))]
    assert entry["key_metadata"] == [{"key": "layers", "key_type": 2}, {"key": "0", "key_type": 1},
                                     {"key": "w", "key_type": 2}]
    assert entry["value_metadata"]["write_shape"] == [8, 6]
    assert meta["tree_metadata"][str(("layers", "0", "b"))]["value_metadata"]["value_type"] == "None"
    zarr_json = json.loads((tmp_path / "c" / "layers.0.w" / "zarr.json").read_text())
    assert zarr_json["zarr_format"] == 3 and zarr_json["chunk_grid"]["configuration"]["chunk_shape"] == [8, 6]
    assert sorted(os.listdir(tmp_path / "c" / "layers.0.w" / "c")) == [str(i) for i in range(8)]  # one per shard
    assert len(os.listdir(tmp_path / "c" / "rep" / "c")) == 1  # replicas are written once

    host = ckpt.restore(tmp_path / "c")  # no target: NumPy values, sequences as lists
    assert same(host["layers"][0]["w"], w) and host["layers"][0]["b"] is None and host["lr"] == 0.5
    assert same(host["layers"][1][0]["k"], np.array([0, 3], np.uint32)) and host["layers"][1][1] == -4  # NumPy scalars are Orbax "scalar"s
    target = {"layers": [{"w": NamedSharding(mesh, P(None, "d")), "b": None},
                         ({"k": meshax.ShapeDtypeStruct((2,), np.uint32, sharding=NamedSharding(mesh, P()))},
                          np.int8(0))], "lr": 0.0, "rep": meshax.ShapeDtypeStruct((2, 6), np.float32)}
    got = ckpt.restore(tmp_path / "c", target)
    assert isinstance(got["layers"][1], tuple)  # the target's structure
    assert got["layers"][0]["w"].sharding == NamedSharding(mesh, P(None, "d")) and same(got["layers"][0]["w"], w)
    assert isinstance(got["rep"], np.ndarray) and same(got["rep"], w[:2])  # no sharding: host NumPy
    assert same(got["layers"][1][0]["k"], np.array([0, 3], np.uint32))


def test_target_dtype_is_cast_like_orbax(tmp_path, mesh):
    x = meshax.device_put(np.linspace(0, 1, 16, dtype=np.float32), NamedSharding(mesh, P("d")))
    ckpt.save(tmp_path / "c", {"x": x})
    got = ckpt.restore(tmp_path / "c", {"x": meshax.ShapeDtypeStruct((16,), jnp.bfloat16, sharding=x.sharding)})
    assert got["x"].dtype == jnp.bfloat16 and same(got["x"], np.asarray(x).astype(jnp.bfloat16))


def saved(tmp_path, mesh):
    x = meshax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), NamedSharding(mesh, P("d")))
    ckpt.save(tmp_path / "c", {"a": {"x": x}, "y": np.ones(3, np.int32)})
    return tmp_path / "c", {"a": {"x": x}, "y": np.ones(3, np.int32)}


def test_wrong_tree_and_shape_are_clear_errors(tmp_path, mesh):
    path, tree = saved(tmp_path, mesh)
    with pytest.raises(ValueError, match=r"missing from the checkpoint \['a.z'\].*target lacks \['a.x'\]"):
        ckpt.restore(path, {"a": {"z": tree["a"]["x"]}, "y": tree["y"]})
    with pytest.raises(ValueError, match=r"'a.x' has shape \(8, 4\) but the target asks for \(4, 8\)"):
        ckpt.restore(path, {"a": {"x": meshax.ShapeDtypeStruct((4, 8), np.float32)}, "y": tree["y"]})


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete_chunk", "delete_array", "metadata"])
def test_damaged_checkpoint_is_a_clear_error(tmp_path, mesh, damage):
    path, tree = saved(tmp_path, mesh)
    chunk = path / "a.x" / "c" / "3" / "0"
    if damage == "truncate":
        chunk.write_bytes(chunk.read_bytes()[:-6])
    elif damage == "flip":
        data = bytearray(chunk.read_bytes())
        data[2] ^= 0x10
        chunk.write_bytes(bytes(data))
    elif damage == "delete_chunk":
        chunk.unlink()
    elif damage == "delete_array":
        (path / "a.x" / "zarr.json").unlink()
    else:
        (path / "_METADATA").write_text('{"tree_metadata": ')
    match = "_METADATA" if damage == "metadata" else "a.x"
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        ckpt.restore(path, tree)
    if damage != "metadata":  # other shards are intact: a layout needing only them still restores
        only = NamedSharding(meshax.make_mesh((1,), ("o",), devices=[meshax.devices()[0]]), P())
        with pytest.raises((ValueError, FileNotFoundError), match="a.x"):
            ckpt.restore(path, {"a": {"x": only}, "y": tree["y"]})


def test_uncommitted_and_existing_checkpoints(tmp_path, mesh):
    os.makedirs(tmp_path / "c.meshax-checkpoint-tmp" / "a.x")
    with pytest.raises(FileNotFoundError, match="never committed"):
        ckpt.restore(tmp_path / "c")
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        ckpt.restore(tmp_path / "nothing")
    path, tree = saved(tmp_path, mesh)  # the save replaces the partial directory
    assert sorted(os.listdir(tmp_path)) == ["c"]
    with pytest.raises(ValueError, match="already exists.*force=True"):
        ckpt.save(path, tree)
    ckpt.save(path, {"y": np.zeros(2, np.int8)}, force=True)
    assert same(ckpt.restore(path)["y"], np.zeros(2, np.int8))


def test_ocdbt_without_tensorstore_names_the_extra(tmp_path, mesh, monkeypatch):
    path, tree = saved(tmp_path, mesh)
    meta = json.loads((path / "_METADATA").read_text())
    meta["use_ocdbt"] = True
    (path / "_METADATA").write_text(json.dumps(meta))
    monkeypatch.setitem(sys.modules, "tensorstore", None)
    with pytest.raises(ImportError, match=r"meshax\[tensorstore\]"):
        ckpt.restore(path)


def test_manager_steps_keep_last_n_and_async(tmp_path, mesh):
    manager = ckpt.CheckpointManager(tmp_path / "run", max_to_keep=2)
    assert manager.latest_step() is None and manager.all_steps() == []
    x = meshax.device_put(np.zeros((8, 2), np.float32), NamedSharding(mesh, P("d")))
    for step in range(4):
        manager.save(step, {"x": x + step, "step": step})
    assert manager.all_steps() == [2, 3] and manager.latest_step() == 3
    assert sorted(os.listdir(tmp_path / "run")) == ["2", "3"]
    assert os.path.isfile(tmp_path / "run" / "3" / "default" / "_METADATA")
    got = manager.restore(None, {"x": x, "step": 0})
    assert got["step"] == 3 and got["x"].sharding == x.sharding and same(got["x"], np.full((8, 2), 3, np.float32))
    assert manager.save(3, {"x": x}) is False and manager.save(1, {"x": x}) is False  # Orbax's answer: not saved
    assert manager.all_steps() == [2, 3] and same(manager.restore(3, {"x": x, "step": 0})["x"], got["x"])
    handle = manager.save(4, {"x": x + 4, "step": 4}, asynchronous=True)
    handle.wait()
    assert handle.done() and manager.all_steps() == [3, 4]
    pending = ckpt.async_save(tmp_path / "alone", {"x": x * 2})
    pending.wait()
    assert same(ckpt.restore(tmp_path / "alone", {"x": x})["x"], np.zeros((8, 2), np.float32))


def test_calling_the_module_is_jax_checkpoint():
    def f(x):
        return jnp.sum(jnp.sin(x) @ jnp.cos(x).T)

    x = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)
    expected = meshax.grad(f)(x)
    policy = meshax.checkpoint_policies.dots_saveable
    assert np.allclose(meshax.grad(meshax.checkpoint(f, policy=policy))(x), expected, rtol=1e-6)
    assert np.allclose(meshax.grad(meshax.checkpoint(f))(x), expected, rtol=1e-6)
    decorated = meshax.checkpoint(lambda y: f(y) * 2)
    assert np.allclose(meshax.grad(decorated)(x), 2 * np.asarray(expected), rtol=1e-6)
    assert meshax.remat is not None and callable(meshax.checkpoint)
    from meshax import checkpoint

    assert checkpoint is meshax.checkpoint and checkpoint.CheckpointManager is ckpt.CheckpointManager


def test_remat_use_does_not_import_zarr():
    """`@meshax.checkpoint` (remat) loads no checkpoint I/O library; only saving or restoring does."""
    import subprocess

    code = ("import sys, meshax, meshax.numpy as jnp; f = meshax.checkpoint(lambda x: jnp.sin(x)); "
            "print(float(meshax.grad(f)(0.0)), 'zarr' in sys.modules, 'tensorstore' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "MESHAX_NUM_CPU_DEVICES": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1.0", "False", "False"], out.stdout
