"""The seed's "Making process-spanning arrays from external data": the make_array_from_process_local_data
batch example, the make_array_from_single_device_arrays example and its variant over processes 0 and 1,
written with `import meshax as jax`; plus make_array_from_callback across processes."""
import numpy as np

import meshax as jax
import meshax.experimental.multihost_utils  # noqa: F401  (the seed spells jax.experimental.multihost_utils)
from arr_common import check_shards, init, jnp, ok, say
from meshax.sharding import NamedSharding, PartitionSpec as P

init()
np.random.seed(jax.process_index())

# ---- the seed's batch example (feature dimensions 2048 x 42 shrunk to 16 x 42 to keep the test small)
# target (micro)batch size across the whole cluster
batch_size = 1024
# how many examples each process should load per batch
per_process_batch_size = batch_size // jax.process_count()
# how many examples each device will process per batch
per_device_batch_size = batch_size // jax.device_count()

# make a data-parallel mesh and sharding
mesh = jax.make_mesh((jax.device_count(),), ('batch'))
sharding = NamedSharding(mesh, P('batch'))

# our "data loader". each process loads a different set of "examples".
process_batch = np.random.rand(per_process_batch_size, 16, 42)

# assemble a global array containing the per-process batches from all processes
global_batch = jax.make_array_from_process_local_data(sharding, process_batch)

# sanity check that everything got sharded correctly
assert global_batch.shape[0] == batch_size
assert process_batch.shape[0] == per_process_batch_size
assert global_batch.addressable_shards[0].data.shape[0] == per_device_batch_size
# ---- end ----------------------------------------------------------------------------------------

assert global_batch.shape == (batch_size, 16, 42) and global_batch.dtype == np.float32
everyone = jax.experimental.multihost_utils.process_allgather(process_batch, tiled=True)
assert everyone.shape == (batch_size, 16, 42) and everyone.dtype == np.float32
np.testing.assert_array_equal(everyone[jax.process_index() * per_process_batch_size:][:per_process_batch_size],
                              process_batch.astype(np.float32))
check_shards(global_batch, everyone)
np.testing.assert_array_equal(jax.experimental.multihost_utils.process_allgather(global_batch, tiled=True), everyone)
ok("process-local-batch")

# ---- the seed's make_array_from_single_device_arrays example ---------------------------------
shape = (jax.process_count(), jax.local_device_count())
mesh = jax.make_mesh(shape, ('i', 'j'))
sharding = NamedSharding(mesh, P('i', 'j'))

# manually create per-device data equivalent to np.arange(jax.device_count())
# i.e. each device will get a single scalar value from 0..N
local_arrays = [
    jax.device_put(
        jnp.array([[jax.process_index() * jax.local_device_count() + i]]),
        device)
    for i, device in enumerate(jax.local_devices())
]

# assemble a global array from the local_arrays across all processes
global_array = jax.make_array_from_single_device_arrays(
    shape=shape,
    sharding=sharding,
    arrays=local_arrays)

# sanity check
assert (np.all(
    jax.experimental.multihost_utils.process_allgather(global_array) ==
    np.arange(jax.device_count()).reshape(global_array.shape)))
# ---- end ----------------------------------------------------------------------------------------

check_shards(global_array, np.arange(jax.device_count(), dtype=np.int32).reshape(shape))
for shard, local in zip(global_array.addressable_shards, local_arrays):
    assert shard.device == next(iter(local.devices()))
    assert np.shares_memory(global_array.local_buffers()[shard.device], local.local_buffers()[shard.device])
ok("single-device-arrays")

# ---- the seed's variant over processes 0 and 1 -------------------------------------------------
if jax.process_count() < 2:
    say("SKIP subset: one process")
else:
    num_participating_processes = 2
    shape = (num_participating_processes, jax.local_device_count())
    devices = (jax.local_devices(process_index=0) +
               jax.local_devices(process_index=1))
    mesh = jax.make_mesh(shape, ('i', 'j'),
                         axis_types=(jax.sharding.AxisType.Explicit,) * 2,
                         devices=devices)
    sharding = NamedSharding(mesh, P('i', 'j'))

    # manually create per-device data in processes 0 and 1.
    if jax.process_index() in (0, 1):
      local_arrays = [
          jax.device_put(
              jnp.array([[jax.process_index() * jax.local_device_count() + i]]),
              device)
          for i, device in enumerate(jax.local_devices())
      ]
    else:
      local_arrays = []

    # assemble an array from the local_arrays across processes 0 and 1
    array = jax.make_array_from_single_device_arrays(
        shape=shape,
        sharding=sharding,
        arrays=local_arrays,
        dtype=jnp.int32)

    # sanity check
    if jax.process_index() in (0, 1):
      for shard in array.addressable_shards:
        assert shard.data.size == 1
    else:
      # (the seed's text stops at `else:`) the other processes hold no shard
      assert array.addressable_shards == []
    # ---- end ------------------------------------------------------------------------------------

    expected = np.arange(2 * jax.local_device_count(), dtype=np.int32).reshape(shape)
    assert array.shape == shape and array.dtype == np.int32
    check_shards(array, expected)
    np.testing.assert_array_equal(jax.experimental.multihost_utils.process_allgather(array, tiled=True), expected)
    ok("single-device-arrays-subset")

# ---- make_array_from_callback: each process is asked only for its own shards -------------------
value = np.arange(12 * 10, dtype=np.float32).reshape(12, 10)
grid = NamedSharding(jax.make_mesh((jax.device_count() // 2, 2), ('a', 'b')), P('a', 'b'))
asked = []
made = jax.make_array_from_callback(value.shape, grid, lambda index: asked.append(index) or value[index])
check_shards(made, value)
assert sorted(map(str, asked)) == sorted(str(i) for i in grid.addressable_devices_indices_map(value.shape).values())
np.testing.assert_array_equal(jax.experimental.multihost_utils.process_allgather(made, tiled=True), value)
ok("callback")
say("DONE")
