"""Resharding between meshes of different device counts that span processes: chains of device_puts
through meshes of 8, 3, 6, 2, 1 and 8 devices (uneven shapes included), checking every process's
shards at each step, and a transfer called only by the processes that take part in it."""
import numpy as np

import meshax
from arr_common import check_shards, init, ok, say
from meshax.sharding import Mesh, NamedSharding, PartitionSpec as P

init()
devices = meshax.devices()
n = len(devices)
here = meshax.process_index()
rng = np.random.default_rng(1)

everything = meshax.make_mesh((n,), ("x",))
three = meshax.make_mesh((3,), ("x",), devices=[devices[1], devices[n // 2], devices[-1]])
six = Mesh(np.array(devices[1:7][::-1], dtype=object).reshape(3, 2), ("a", "b"))
two = meshax.make_mesh((2,), ("p",), devices=[devices[-1], devices[0]])
grid = meshax.make_mesh((2, n // 2), ("a", "b"))

CHAIN = [
    NamedSharding(everything, P("x")),
    NamedSharding(three, P(None, "x")),
    NamedSharding(six, P("a", "b")),
    NamedSharding(six, P(("b", "a"))),
    NamedSharding(two, P()),
    NamedSharding(two, P("p")),
    devices[n - 2],
    NamedSharding(grid, P(("b", "a"), None)),
    NamedSharding(grid, P(None, "a")),
    NamedSharding(everything, P()),
]

for shape, dtype in [((16, 12), np.float32), ((7, 5, 3), np.int32), ((5, 9), np.bool_), ((11, 1), np.complex64)]:
    value = (rng.standard_normal(shape) * 10).astype(dtype)
    x = meshax.device_put(value, CHAIN[0])
    check_shards(x, value)
    for step, target in enumerate(CHAIN[1:], 1):
        x = meshax.device_put(x, target)
        check_shards(x, value)
        if isinstance(target, NamedSharding):
            assert x.sharding == target
        held = [d for d in x.sharding.device_set if d.process_index == here]
        assert bool(x.local_buffers()) == bool(held)
        if step % 3 == 0:  # every process can read it once it is replicated everywhere
            np.testing.assert_array_equal(np.asarray(meshax.device_put(x, NamedSharding(everything, P()))), value)
    np.testing.assert_array_equal(np.asarray(x), value)  # the last step replicates on all devices
    ok(f"chain {shape}")

# A transfer only between the first and the last process's devices: other processes need not call it.
first, last = meshax.local_devices(process_index=0), meshax.local_devices(process_index=meshax.process_count() - 1)
source = NamedSharding(meshax.make_mesh((len(first),), ("s",), devices=first), P("s"))
target = NamedSharding(meshax.make_mesh((len(last),), ("t",), devices=last[::-1]), P(None, "t"))
value = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
if here in (0, meshax.process_count() - 1):
    moved = meshax.device_put(meshax.device_put(value, source), target)
    check_shards(moved, value)
    if here == meshax.process_count() - 1:
        np.testing.assert_array_equal(np.asarray(moved), value)
ok("only-participants")

# Host values put straight onto meshes of different sizes agree with the chained results.
for sharding in (NamedSharding(three, P("x", None)), NamedSharding(six, P(None, ("a", "b")))):
    value = rng.standard_normal((9, 13)).astype(np.float32)
    direct = meshax.device_put(value, sharding)
    check_shards(direct, value)
    via = meshax.device_put(meshax.device_put(value, NamedSharding(grid, P("b", "a"))), sharding)
    check_shards(via, value)
ok("direct-vs-chained")
say("DONE")
