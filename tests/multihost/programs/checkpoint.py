"""(d) checkpoint.py save DIR: save a tree sharded over every device of the job (rows over hosts);
checkpoint.py restore DIR: restore it in another layout (columns over this process's devices) and check it."""
import os
import sys

import numpy as np

import meshax as jax
from common import init, report
from meshax.sharding import NamedSharding, PartitionSpec as P

MODE, DIR = sys.argv[1], sys.argv[2]
if MODE == "save":
    init()
n = jax.device_count()
want = {"w": np.arange(16 * 6, dtype=np.float32).reshape(16, 6) / 7, "step": np.int32(3),
        "b": np.arange(8, dtype=np.int64) * 11}
path = os.path.join(DIR, "ckpt")
if MODE == "save":
    mesh = jax.make_mesh((n,), ("d",))
    tree = {"w": jax.device_put(want["w"], NamedSharding(mesh, P("d"))), "step": want["step"],
            "b": jax.device_put(want["b"], NamedSharding(mesh, P("d")))}
    jax.checkpoint.save(path, tree)
    report(check="saved", ok=True)
else:
    mesh = jax.make_mesh((n,), ("c",))
    target = {"w": NamedSharding(mesh, P(None, "c")), "step": NamedSharding(mesh, P()),
              "b": NamedSharding(mesh, P())}
    got = jax.checkpoint.restore(path, target)
    for name in want:
        assert got[name].sharding == target[name], (name, got[name].sharding)
        np.testing.assert_array_equal(np.asarray(got[name]), want[name])
    for shard in got["w"].addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), want["w"][shard.index])
    report(check="restored", ok=True, devices=n)
