"""The seed's "Running on a subset of devices": device_put onto a mesh over the second half of the
devices, written with `import meshax as jax`. Processes holding no device of the mesh hold nothing."""
import numpy as np

import meshax as jax
from arr_common import init, ok, say
from meshax.sharding import NamedSharding, PartitionSpec as P

init()

# ---- the seed's code ----------------------------------------------------------------------------
num_devices = jax.device_count() // 2
mesh = jax.make_mesh((num_devices,), ('a',),
                     devices=jax.devices()[num_devices:],
                     axis_types=(jax.sharding.AxisType.Explicit,))
sharding = NamedSharding(mesh, P('a'))

data = np.arange(64).reshape((8, 8))
x = jax.device_put(data, sharding)

# inspect the sharding of the result
if jax.process_index() == 0:
  jax.debug.visualize_array_sharding(x)
  print()
  print(x.sharding)

# inspect the data local to each host
print(f"Devices attached to process {jax.process_index()}: {jax.local_devices()}")
print(f"Addressable data for process {jax.process_index()}:")
for shard in x.addressable_shards:
  print(f"device {shard.device} has local data {shard.data}")
# ---- end of the seed's code ---------------------------------------------------------------------

say("END-OF-SEED-OUTPUT")
here = jax.process_index()
mine = [d for d in jax.devices()[num_devices:] if d.process_index == here]
assert [s.device for s in x.addressable_shards] == mine
rows = 8 // num_devices
for shard in x.addressable_shards:
    k = jax.devices()[num_devices:].index(shard.device)
    assert shard.index == (slice(k * rows, (k + 1) * rows), slice(None))
    assert shard.replica_id == 0
    np.testing.assert_array_equal(np.asarray(shard.data), data[k * rows:(k + 1) * rows])
ok("shards")

if not mine:
    assert x.addressable_shards == [] and x.local_buffers() == {}
    assert str(x) == repr(x) == "Array(shape=(8, 8), dtype=int32)", repr(x)
if len(mine) == num_devices:
    np.testing.assert_array_equal(np.asarray(x), data)
else:
    try:
        np.asarray(x)
    except RuntimeError as error:
        assert "spans non-addressable (non process local) devices" in str(error)
    else:
        raise AssertionError("reading a value this process does not hold did not raise")
ok("reading")

assert x.sharding.mesh.size == num_devices and not x.is_fully_replicated
assert x.is_fully_addressable == (len(mine) == num_devices and jax.process_count() == 1 or
                                  all(d.process_index == here for d in jax.devices()[num_devices:]))
# Every process can also take it back to the first half and replicate it everywhere.
back = jax.device_put(x, NamedSharding(jax.make_mesh((num_devices,), ('a',), devices=jax.devices()[:num_devices]),
                                       P(None, 'a')))
everywhere = jax.device_put(back, NamedSharding(jax.make_mesh((jax.device_count(),), ('a',)), P()))
np.testing.assert_array_equal(np.asarray(everywhere), data)
ok("moved-back")
say("DONE")
