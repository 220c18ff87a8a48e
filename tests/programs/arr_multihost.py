"""multihost_utils across processes: process_allgather, broadcast_one_to_all, sync_global_devices,
assert_equal, and seed 004's host_local_array_to_global_array / global_array_to_host_local_array."""
import time

import numpy as np

import meshax as jax
from arr_common import check_shards, init, ok, say
from meshax.experimental import multihost_utils
from meshax.experimental.multihost_utils import global_array_to_host_local_array, host_local_array_to_global_array
from meshax.sharding import NamedSharding, PartitionSpec

init()
here, count = jax.process_index(), jax.process_count()
k = jax.local_device_count()

# ---- process_allgather ----------------------------------------------------------------------------
mine = np.arange(3) + 10 * here
stacked = multihost_utils.process_allgather(mine)
assert stacked.dtype == np.int32 and stacked.shape == (count, 3)
np.testing.assert_array_equal(stacked, [np.arange(3) + 10 * p for p in range(count)])
tiled = multihost_utils.process_allgather(mine, tiled=True)
np.testing.assert_array_equal(tiled, np.concatenate([np.arange(3) + 10 * p for p in range(count)]))
tree = multihost_utils.process_allgather({"a": mine, "b": [np.ones((2, 2), np.float32) * here]})
np.testing.assert_array_equal(tree["a"], stacked)
assert tree["b"][0].shape == (count, 2, 2) and (tree["b"][0][count - 1] == count - 1).all()
value = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
mesh = jax.make_mesh((jax.device_count() // 2, 2), ("a", "b"))
sharded = jax.device_put(value, NamedSharding(mesh, PartitionSpec("a", "b")))
# A global array gathers to its global value (tiled=True: with one process it is fully addressable,
# and JAX then stacks it when tiled=False; arr_allgather_local.py checks that case).
np.testing.assert_array_equal(multihost_utils.process_allgather(sharded, tiled=True), value)
if count > 1:
    np.testing.assert_array_equal(multihost_utils.process_allgather(sharded), value)
ok("process_allgather")

# ---- broadcast_one_to_all ---------------------------------------------------------------------------
# (scalars: arr_allgather_local.py)
got = multihost_utils.broadcast_one_to_all({"x": np.arange(4) * (here + 1), "y": [np.full((2,), here + 0.5)]})
np.testing.assert_array_equal(got["x"], np.arange(4))
assert got["x"].dtype == np.int32 and got["y"][0].dtype == np.float32
np.testing.assert_array_equal(got["y"][0], [0.5, 0.5])
from_last = multihost_utils.broadcast_one_to_all(np.full((2, 3), here, np.int32), is_source=here == count - 1)
np.testing.assert_array_equal(from_last, np.full((2, 3), count - 1))
ok("broadcast_one_to_all")

# ---- sync_global_devices: nobody leaves before process 0 arrives ---------------------------------------
if here == 0:
    time.sleep(1.0)
arrived = time.time()
multihost_utils.sync_global_devices("arr_multihost")
left = time.time()
# Process 0's arrival time, broadcast as raw bytes (float64 would be narrowed to float32 without x64).
stamp = multihost_utils.broadcast_one_to_all(np.frombuffer(np.float64(arrived).tobytes(), np.uint8))
zero_arrived = float(np.frombuffer(np.asarray(stamp).tobytes(), np.float64)[0])
assert left >= zero_arrived, (left, zero_arrived)
multihost_utils.sync_global_devices("arr_multihost again")
ok("sync_global_devices")

# ---- assert_equal -----------------------------------------------------------------------------------
multihost_utils.assert_equal({"a": np.arange(5), "b": 3.0})
multihost_utils.assert_equal(jax.device_put(value, NamedSharding(mesh, PartitionSpec())))  # a replicated global array
if count > 1:
    try:
        multihost_utils.assert_equal(np.arange(3) + (here == count - 1), fail_message="inputs differ")
    except AssertionError as error:
        assert "inputs differ" in str(error), str(error)
        assert str(count - 1) in str(error)
    else:
        raise AssertionError("assert_equal accepted values that differ")
ok("assert_equal")

# ---- seed 004: host_local_array_to_global_array over a 1-D mesh --------------------------------------
length = 4 if 4 % k == 0 else k  # seed: "assumes jax.local_device_count() divides 4"; 8 devices need 8
global_mesh = jax.sharding.Mesh(jax.devices(), 'x')
pspecs = jax.sharding.PartitionSpec('x')
host_id = jax.process_index()
arr = host_local_array_to_global_array(np.arange(length) * host_id, global_mesh, pspecs)
expected = np.concatenate([np.arange(length) * p for p in range(count)]).astype(np.int32)
assert arr.shape == (length * count,)
check_shards(arr, expected)
for shard in arr.addressable_shards:  # this host's slice is split over its own devices
    assert here * length <= shard.index[0].start and shard.index[0].stop <= (here + 1) * length
np.testing.assert_array_equal(multihost_utils.process_allgather(arr, tiled=True), expected)
local = global_array_to_host_local_array(arr, global_mesh, pspecs)
assert local.shape == (length,) and local.sharding.mesh == global_mesh.local_mesh
np.testing.assert_array_equal(np.asarray(local), np.arange(length) * host_id)
for device, buffer in local.local_buffers().items():  # no data moved
    assert buffer is arr.local_buffers()[device]
ok("host-local-1d")

# ---- seed 004: the ('host', 'dev') mesh ----------------------------------------------------------------
mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(jax.process_count(), jax.local_device_count()), ['host', 'dev'])
pspecs = jax.sharding.PartitionSpec('host')
host_id = jax.process_index()
arr = host_local_array_to_global_array(np.arange(4) * host_id, mesh, pspecs)
expected = np.concatenate([np.arange(4) * p for p in range(count)]).astype(np.int32)
assert arr.shape == (4 * count,)
check_shards(arr, expected)
shards = arr.addressable_shards
assert all(s.index[0].indices(4 * count)[:2] == (4 * here, 4 * here + 4) for s in shards)  # replicated per host
assert sorted(s.replica_id for s in shards) == list(range(k))
assert len({id(b) for b in arr.local_buffers().values()}) == 1
np.testing.assert_array_equal(multihost_utils.process_allgather(arr, tiled=True), expected)
back = global_array_to_host_local_array(arr, mesh, pspecs)
assert back.shape == (4,)
np.testing.assert_array_equal(np.asarray(back), np.arange(4) * host_id)
ok("host-local-host-dev")

# ---- seed 004: PartitionSpec() replicates over every host and device -----------------------------------
pspecs = jax.sharding.PartitionSpec()
arr = host_local_array_to_global_array(np.arange(4), mesh, pspecs)
assert arr.shape == (4,) and arr.is_fully_replicated
check_shards(arr, np.arange(4, dtype=np.int32))
np.testing.assert_array_equal(np.asarray(arr), np.arange(4))
back = global_array_to_host_local_array(arr, mesh, pspecs)
np.testing.assert_array_equal(np.asarray(back), np.arange(4))
ok("host-local-replicated")

# ---- pytrees of inputs and of pspecs ----------------------------------------------------------------
P = PartitionSpec
inputs = {"rows": np.ones((2, 3), np.float32) * here, "same": np.arange(6).reshape(2, 3)}
globals_ = host_local_array_to_global_array(inputs, mesh, {"rows": P("host", None), "same": P()})
assert globals_["rows"].shape == (2 * count, 3) and globals_["same"].shape == (2, 3)
check_shards(globals_["rows"], np.repeat(np.arange(count, dtype=np.float32), 2)[:, None] * np.ones((1, 3), np.float32))
check_shards(globals_["same"], np.arange(6, dtype=np.int32).reshape(2, 3))
locals_ = global_array_to_host_local_array(globals_, mesh, {"rows": P("host", None), "same": P()})
np.testing.assert_array_equal(np.asarray(locals_["rows"]), inputs["rows"])
np.testing.assert_array_equal(np.asarray(locals_["same"]), inputs["same"])
ok("host-local-pytrees")
say("DONE")
