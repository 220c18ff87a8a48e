"""The seed's "Transferring data across processes with jax.device_put" (examples/pipeline.py, run as is:
stage f on the first half of the devices, device_put to the second half, stage g there), checked from
the example's globals; then reshards back and forth and the seed's microbatched pipeline loop."""
import numpy as np

import meshax as jax
from arr_common import check_shards, ok, run_example, say
from meshax.sharding import NamedSharding, PartitionSpec as P

example = run_example("pipeline.py")
data, x, z, result = example["data"], example["x"], example["z"], example["result"]
f, g = example["f"], example["g"]
num_devices = example["num_devices"]
mesh_first_half, mesh_second_half = example["mesh_first_half"], example["mesh_second_half"]
sharding_second_half = example["sharding_second_half"]

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
