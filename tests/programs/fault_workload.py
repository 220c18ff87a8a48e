"""Args: address id n mode [arg]. A busy workload for fault tests: reshards between shardings, meshax.numpy ops
on sharded arrays and shard_map collectives (psum, all_gather, ppermute), printing "PROGRESS k" after each
step, forever (the test kills one process and expects the others to exit naming it).

mode=loop: just the loop.
mode=raise K: process K raises ValueError('fault injected in process K') after its step 3 while the
others go on into the next step's collectives (where they wait for it)."""
import sys
import time

import numpy as np

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax.sharding import NamedSharding, PartitionSpec as P

address, me, count, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
raiser = int(sys.argv[5]) if mode == "raise" else -1
# Long watchdog and heartbeat: the failures under test must be reported by the death/abort path, not by them.
meshax.distributed.initialize(address, count, me, heartbeat_timeout_seconds=60, collective_timeout_seconds=60)

n = meshax.device_count()
mesh1 = meshax.make_mesh((n,), ("x",))
mesh2 = meshax.make_mesh((n // 2, 2), ("a", "b"))
shardings = [
    NamedSharding(mesh1, P("x")),
    NamedSharding(mesh1, P(None, "x")),
    NamedSharding(mesh1, P()),
    NamedSharding(mesh2, P("a", "b")),
    NamedSharding(mesh2, P("b", "a")),
    NamedSharding(mesh2, P(("a", "b"))),
]
rng = np.random.default_rng(1234)  # the same sequence on every process
value = rng.standard_normal((16, 24)).astype(np.float32)
x = meshax.device_put(value, shardings[0])


def collectives(block):
    total = lax.psum(block, "x")
    gathered = lax.all_gather(block, "x", tiled=True)
    shifted = lax.ppermute(block, "x", [(i, (i + 1) % n) for i in range(n)])
    return total, gathered, shifted


mapped = meshax.shard_map(collectives, mesh=mesh1, in_specs=P("x"), out_specs=(P(), P(), P("x")),
                          check_vma=False)  # JAX 0.10 types all_gather results as varying

from meshax._src.runtime import mpi  # noqa: E402  (the test checks that a failed job leaves no segment)

print("READY", " ".join(sorted(mpi._job_segments)), flush=True)
step = 0
while True:
    step += 1
    target = shardings[step % len(shardings)]
    x = meshax.device_put(x, target)                        # reshard
    y = jnp.tanh(x) * 2.0 + jnp.sum(x, axis=0, keepdims=True) / 16.0
    z = y @ jnp.transpose(y)                                # matmul on sharded arrays
    x = meshax.device_put(jnp.tanh(y), shardings[0])
    total, gathered, shifted = mapped(x)
    checksum = float(jnp.sum(z)) + float(jnp.sum(total)) + float(jnp.sum(gathered)) + float(jnp.sum(shifted))
    print(f"PROGRESS {step} {checksum:.3f}", flush=True)
    if me == raiser and step == 3:
        raise ValueError(f"fault injected in process {me}")
    time.sleep(0.01)
