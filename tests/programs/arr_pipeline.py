"""The seed's "Transferring data across processes with jax.device_put": from the first half of the
devices to the second half, then the microbatched pipeline loop, without jit (f and g are plain
Python stand-ins: meshax has no jit here)."""
import numpy as np

import meshax as jax
from arr_common import check_shards, init, ok, say
from meshax.sharding import NamedSharding, PartitionSpec as P

init()

# ---- the seed's code (jax.jit dropped) -----------------------------------------------------------
# Create a sharding that contains half of the global devices for the first
# stage of the pipeline.
num_devices = jax.device_count() // 2
mesh_first_half = jax.make_mesh((num_devices,), ('a',),
                                devices=jax.devices()[:num_devices],
                                axis_types=(jax.sharding.AxisType.Explicit,))
sharding_first_half = NamedSharding(mesh_first_half, P('a'))

# Create a sharding that contains the other half of the devices.
mesh_second_half = jax.make_mesh((num_devices,), ('a',),
                                 devices=jax.devices()[num_devices:],
                                 axis_types=(jax.sharding.AxisType.Explicit,))
sharding_second_half = NamedSharding(mesh_second_half, P('a'))

# Place the input data on the first mesh.
data = np.arange(64).reshape((8, 8))
x = jax.device_put(data, sharding_first_half)

# `f` is the first stage of the pipeline.
def f(x):
  # Arbitrary JAX computation.
  return x

# `g` is the second stage of the pipeline
def g(x):
  # More JAX operations.
  return x

# Run the first stage on the first set of devices.
y = f(x)

# Transfer the data to the second set of devices.
z = jax.device_put(y, sharding_second_half)

# Run the second stage on the second set of devices.
result = g(z)
# ---- end ----------------------------------------------------------------------------------------

expected = data.astype(np.int32)
check_shards(x, expected)
check_shards(result, expected)
assert result.sharding == sharding_second_half
here = jax.process_index()
assert bool(x.addressable_shards) == any(d.process_index == here for d in jax.devices()[:num_devices])
assert bool(z.addressable_shards) == any(d.process_index == here for d in jax.devices()[num_devices:])
ok("first-to-second-half")

# And back, to a different layout over the first half (columns), then to the second half replicated.
w = jax.device_put(z, NamedSharding(mesh_first_half, P(None, 'a')))
check_shards(w, expected)
v = jax.device_put(w, NamedSharding(mesh_second_half, P()))
check_shards(v, expected)
ok("back-and-forth")

# ---- the seed's microbatched pipeline (12 microbatches, stages on 4 devices) --------------------
pipeline_stages = [f, g, f, g]
devices = jax.devices()[:4]

microbatches = [np.arange(512**2).reshape((512, 512)) for _ in range(12)]

results = []
for mb in microbatches:
  for d, s in zip(devices, pipeline_stages):
    mb = jax.device_put(mb, d)
    mb = s(mb)
  results.append(mb)
# ---- end ----------------------------------------------------------------------------------------

last = devices[-1]
for mb in results:
    assert mb.devices() == {last}
    if last.process_index == here:
        np.testing.assert_array_equal(np.asarray(mb), np.arange(512**2, dtype=np.int32).reshape(512, 512))
    else:
        assert mb.addressable_shards == []
ok("microbatches")
say("DONE")
