"""The seed's "Running on a subset of devices" (examples/subset_of_devices.py, run as is): device_put
onto a mesh over the second half of the devices, then a reduction of it. Processes holding no device of
the mesh hold nothing. The example's output comes first, then END-OF-SEED-OUTPUT and the checks."""
import numpy as np

import meshax as jax
from arr_common import ok, run_example, say
from meshax.sharding import NamedSharding, PartitionSpec as P

example = run_example("subset_of_devices.py")
data, x, result, num_devices = example["data"], example["x"], example["result"], example["num_devices"]

say("END-OF-SEED-OUTPUT")
here = jax.process_index()
mine = [d for d in jax.devices()[num_devices:] if d.process_index == here]
assert x.sharding == example["sharding"]
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
# The example's jnp.sum(jnp.sin(x)): a scalar on the mesh's devices, readable where any of them is local.
assert result.shape == () and result.dtype == np.float32
assert result.sharding.device_set == set(jax.devices()[num_devices:])
if mine:
    np.testing.assert_allclose(np.asarray(result), np.sin(data.astype(np.float32)).sum(), rtol=1e-5)
else:
    assert result.addressable_shards == []
    assert str(result) == "Array(shape=(), dtype=float32)", str(result)
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
