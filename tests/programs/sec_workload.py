"""Args: STOPFILE [ADDRESS ID N]. A job that computes with collectives while tests attack its coordinator.

Initialises (from the arguments, or from `meshax launch`'s environment), prints READY, then
runs rounds of shard_map collectives (psum, all_gather, ppermute) and a sharded matmul,
checking every value against NumPy, until STOPFILE exists (process 0 looks, and tells the
others). Prints `result <checksum of round 1> rounds-ok` at the end: the same in every run.
Gives up after 90 s (the test failed to stop it).
"""
import os
import sys
import time

import numpy as np

import meshax
import meshax.numpy as jnp
from meshax import lax
from meshax.experimental import multihost_utils
from meshax.sharding import NamedSharding, PartitionSpec as P

stop_file = sys.argv[1]
if len(sys.argv) > 2:
    meshax.distributed.initialize(sys.argv[2], int(sys.argv[4]), int(sys.argv[3]), initialization_timeout=60)
else:
    meshax.distributed.initialize(initialization_timeout=60)

n = meshax.device_count()
mesh = meshax.make_mesh((n,), ("x",))
base = np.arange(n * 6, dtype=np.float32).reshape(n, 6) / 7.0


def collectives(block):
    return (lax.psum(block, "x"), lax.all_gather(block, "x", tiled=True),
            lax.ppermute(block, "x", [(i, (i + 1) % n) for i in range(n)]))


mapped = meshax.jit(meshax.shard_map(collectives, mesh=mesh, in_specs=P("x"), out_specs=(P(), P(), P("x")),
                                     check_vma=False))


def one_round(scale: float) -> float:
    value = base * scale
    x = meshax.device_put(value, NamedSharding(mesh, P("x")))
    total, gathered, shifted = mapped(x)
    product = jnp.dot(x, jnp.transpose(x))
    got = [multihost_utils.process_allgather(a, tiled=True) for a in (total, gathered, shifted, product)]
    want = [value.sum(axis=0, keepdims=True), value, np.roll(value, 1, axis=0), value @ value.T]
    for name, g, w in zip(("psum", "all_gather", "ppermute", "matmul"), got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, err_msg=f"{name} at scale {scale}")
    return float(sum(np.asarray(g, np.float64).sum() for g in got))


print("READY", flush=True)
checksum = one_round(1.0)
started, rounds = time.monotonic(), 1
while True:
    rounds += 1
    one_round(float(rounds))
    here = meshax.process_index() == 0 and os.path.exists(stop_file)
    if multihost_utils.broadcast_one_to_all(np.array(here)):
        break
    if time.monotonic() - started > 90:
        raise SystemExit(f"process {meshax.process_index()}: nobody created {stop_file} within 90 s")
print(f"result {checksum:.6f} rounds-ok", flush=True)
