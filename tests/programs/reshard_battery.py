"""Reshards between many shardings (meshes of different sizes, device subsets, uneven shapes) and checks
every process's shards against NumPy. Run under the launcher; prints RESHARD-OK n on success."""
import itertools

import numpy as np

import meshax
from meshax.experimental import multihost_utils
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
devices = meshax.devices()
n = len(devices)
rng = np.random.default_rng(0)


def meshes():
    yield meshax.make_mesh((n,), ("x",))
    yield meshax.make_mesh((n // 2, 2), ("a", "b"))
    yield meshax.make_mesh((2, n // 2), ("a", "b"))
    yield meshax.make_mesh((n // 2,), ("x",), devices=devices[: n // 2])
    yield meshax.make_mesh((n // 2,), ("x",), devices=devices[n // 2:])
    yield meshax.make_mesh((3,), ("x",), devices=[devices[1], devices[-1], devices[n // 2]])


def specs(mesh):
    names = mesh.axis_names
    yield P()
    yield P(names[0])
    yield P(None, names[-1])
    if len(names) == 2:
        yield P(names[0], names[1])
        yield P(names[1], names[0])
        yield P((names[0], names[1]))


def check(array, expected):
    for shard in array.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), expected[shard.index])
        assert shard.device in array.sharding.device_set
    held = {s.device for s in array.addressable_shards}
    assert held == {d for d in array.sharding.device_set if d.process_index == meshax.process_index()}


shardings = [NamedSharding(m, s) for m in meshes() for s in specs(m)]
count = 0
for shape in [(8, 12), (7, 5)]:
    value = rng.standard_normal(shape).astype(np.float32)
    for source, target in itertools.product(shardings, shardings):
        x = meshax.device_put(value, source)
        y = meshax.device_put(x, target)
        check(y, value)
        count += 1
    gathered = multihost_utils.process_allgather(meshax.device_put(value, shardings[4]), tiled=True)
    np.testing.assert_array_equal(gathered, value)
print("RESHARD-OK", count, flush=True)
