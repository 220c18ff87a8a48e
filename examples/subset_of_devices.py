# The seed's "Running on a subset of devices": an array on the second half of the devices.
# Run: meshax launch -n 4 --cpu-devices 2 examples/subset_of_devices.py
import meshax as jax
import meshax.numpy as jnp
from meshax.sharding import NamedSharding, PartitionSpec as P
import numpy as np

jax.distributed.initialize()

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

result = jnp.sum(jnp.sin(x))
print(f"process={jax.process_index()} got result: {result}")
