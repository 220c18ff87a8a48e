"""(a) a psum across hosts, (b) multihost_utils, (f) what listens where. Prints RESULT lines."""
import time

import numpy as np

import meshax as jax
import meshax.numpy as jnp
from common import init, listening_sockets, report
from meshax.experimental import multihost_utils
from meshax.sharding import NamedSharding, PartitionSpec as P

init()
here, count = jax.process_index(), jax.process_count()
devices = jax.device_count()
mesh = jax.make_mesh((devices,), ("i",))

# ---- (a) a psum of 1 Mi float32 per device (4 MiB) across every device -------------------------------
rows = 1 << 20
value = np.arange(devices * rows, dtype=np.float32).reshape(devices, rows) % 1000
x = jax.make_array_from_callback(value.shape, NamedSharding(mesh, P("i")), lambda index: value[index])
total = jax.jit(jax.shard_map(lambda b: jax.lax.psum(b, "i"), mesh=mesh, in_specs=P("i"), out_specs=P("i")))(x)
want = value.sum(axis=0)
for shard in total.addressable_shards:
    np.testing.assert_array_equal(np.asarray(shard.data)[0], want)
summed = jnp.sum(x, axis=0)
got = multihost_utils.process_allgather(summed, tiled=True)
np.testing.assert_allclose(got, want, rtol=1e-6)
report(check="psum", payload_bytes=rows * 4, ok=True)

# ---- (b) multihost_utils across hosts ----------------------------------------------------------------
got = multihost_utils.broadcast_one_to_all({"x": np.arange(4) * (here + 1), "y": np.full((3,), here + 0.5)})
np.testing.assert_array_equal(got["x"], np.arange(4))
np.testing.assert_array_equal(got["y"], np.full((3,), 0.5))
stacked = multihost_utils.process_allgather(np.arange(3) + 10 * here)
np.testing.assert_array_equal(stacked, [np.arange(3) + 10 * p for p in range(count)])
time.sleep(0.2 * here)  # arrive at different times: the barrier must still hold everyone
before = time.time()
multihost_utils.sync_global_devices("multihost tier")
report(check="multihost_utils", ok=True, left_barrier=time.time(), arrived=before)

# ---- (f) what listens, and where (while the job runs) -------------------------------------------------
report(check="listening", sockets=listening_sockets())
multihost_utils.sync_global_devices("done")
