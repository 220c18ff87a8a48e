"""Run under the launcher (4 processes x 2 devices). NaN and inf through reductions that cross processes: for a NaN
(or inf) at every position of a process-spanning vector, lax.pmax/pmin/psum in shard_map and jnp.max/min/sum/argmax
must agree with NumPy. Process 0 prints one MISMATCH line per disagreement and NAN-OK when there is none."""
import numpy as np

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax.experimental import multihost_utils
from meshax.sharding import NamedSharding, PartitionSpec as P

meshax.distributed.initialize()
n = meshax.device_count()
mesh = meshax.make_mesh((n,), ("x",))
sharding = NamedSharding(mesh, P("x"))
reduce_map = meshax.shard_map(lambda b: (lax.pmax(b, "x"), lax.pmin(b, "x"), lax.psum(b, "x")),
                              mesh=mesh, in_specs=P("x"), out_specs=(P(), P(), P()))
mismatches = []
for special in (np.nan, np.inf, -np.inf):
    for position in range(n):
        value = np.arange(n, dtype=np.float32)
        value[position] = special
        x = meshax.device_put(value, sharding)
        high, low, total = reduce_map(x)
        got = {
            "pmax": high, "pmin": low, "psum": total,
            "jnp.max": jnp.max(x), "jnp.min": jnp.min(x), "jnp.sum": jnp.sum(x), "jnp.argmax": jnp.argmax(x),
            "jnp.argmin": jnp.argmin(x),
        }
        expected = {
            "pmax": [np.max(value)], "pmin": [np.min(value)], "psum": [np.sum(value)],
            "jnp.max": np.max(value), "jnp.min": np.min(value), "jnp.sum": np.sum(value),
            "jnp.argmax": np.argmax(value), "jnp.argmin": np.argmin(value),
        }
        for name, result in got.items():
            result = np.asarray(multihost_utils.process_allgather(result)) if not result.is_fully_addressable \
                else np.asarray(result)
            if not np.array_equal(result, np.asarray(expected[name]), equal_nan=True):
                mismatches.append(f"MISMATCH {name} of {value.tolist()}: got {result.tolist()}, "
                                  f"NumPy {np.asarray(expected[name]).tolist()}")
if meshax.process_index() == 0:
    for line in mismatches:
        print(line)
    print("NAN-OK" if not mismatches else f"NAN-FAILED {len(mismatches)}", flush=True)
