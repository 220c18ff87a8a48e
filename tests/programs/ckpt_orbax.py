"""The Orbax side of tests/test_checkpoint_orbax.py, under real JAX (one process, 8 CPU devices).

ckpt_orbax.py read DIR STEP      restore DIR/ckpt (written by meshax) with Orbax onto JAX shardings; check values
ckpt_orbax.py write DIR STEP FMT save expected(STEP) with Orbax as FMT: zarr2 (use_ocdbt=False), zarr3
                                 (use_ocdbt=False, use_zarr3=True) or ocdbt (Orbax's default)
ckpt_orbax.py manager DIR STEP   Orbax's CheckpointManager finds meshax CheckpointManager's steps in DIR and
                                 restores the latest, STEP: {"w": float32 (8, 4) full of STEP, "n": STEP}
ckpt_orbax.py refusals DIR 0     what Orbax's CheckpointManager(max_to_keep=2).save answers for the steps
                                 REFUSAL_STEPS in turn, and the steps it keeps
"""
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from ckpt_common import check_shards, expected, leaves_with_names, assert_same, say  # noqa: E402

MODE, DIR, STEP = sys.argv[1], sys.argv[2], int(sys.argv[3])
PATH = os.path.join(DIR, "ckpt")
mesh = jax.make_mesh((4, 2), ("a", "b"))
SPECS = {"params.0.w": P("a", "b"), "params.0.b": P("b"), "params.1.w": P("b", None), "params.1.b": P("b"),
         "opt.count": P(), "opt.mu.0": P(None, "a"), "key": P()}


def as_jax(want: dict, abstract: bool) -> dict:
    """`want` with jax.Arrays (or ShapeDtypeStructs) on SPECS' shardings; host leaves unchanged."""
    def leaf(path, value):
        name = ".".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
        if name not in SPECS:
            return value
        sharding = NamedSharding(mesh, SPECS[name])
        value = np.asarray(value)
        if abstract:
            return jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding)
        return jax.device_put(value, sharding)

    return jax.tree_util.tree_map_with_path(leaf, want, is_leaf=lambda x: x is None)


want = expected(STEP)
if MODE == "read":
    got = ocp.StandardCheckpointer().restore(PATH, as_jax(want, abstract=True))
    for (name, g), (_, w) in zip(leaves_with_names(got), leaves_with_names(want)):
        if name in SPECS:
            check_shards(name, g, np.asarray(w), NamedSharding(mesh, SPECS[name]))
        elif w is None:
            assert g is None, (name, g)
        else:
            assert_same(name, np.asarray(g), np.asarray(w))
    say("CHECK orbax read")
elif MODE == "write":
    fmt = sys.argv[4]
    tree = as_jax(want, abstract=False)
    tree["typed_key"] = jax.random.key(STEP)  # a typed key: meshax restores its uint32 data
    if fmt == "ocdbt":
        checkpointer = ocp.StandardCheckpointer()
    else:
        checkpointer = ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3=fmt == "zarr3"))
    checkpointer.save(PATH, tree)
    if hasattr(checkpointer, "wait_until_finished"):
        checkpointer.wait_until_finished()
    say(f"CHECK orbax wrote {fmt}")
elif MODE == "manager":
    manager = ocp.CheckpointManager(DIR)
    assert manager.latest_step() == STEP, manager.all_steps()
    target = {"w": jax.ShapeDtypeStruct((8, 4), np.float32, sharding=NamedSharding(mesh, P("b", "a"))), "n": 0}
    got = manager.restore(STEP, args=ocp.args.StandardRestore(target))
    check_shards("w", got["w"], np.full((8, 4), STEP, np.float32), target["w"].sharding)
    assert got["n"] == STEP, got
    say(f"CHECK orbax manager steps {manager.all_steps()}")
elif MODE == "refusals":
    from ckpt_common import REFUSAL_STEPS

    manager = ocp.CheckpointManager(DIR, options=ocp.CheckpointManagerOptions(max_to_keep=2))
    answers = []
    for step in REFUSAL_STEPS:
        answers.append(bool(manager.save(step, args=ocp.args.StandardSave({"n": np.full(3, step, np.int32)}))))
        manager.wait_until_finished()
    say(f"CHECK orbax refusals {answers} steps {manager.all_steps()}")
else:
    raise SystemExit(f"unknown mode {MODE}")
