"""psum/pmax/pmin/pmean of 2 MiB per device, large enough for the shared-memory Allreduce, against NumPy.

Groups: all 8 devices, and (on a (2, 4) mesh) the 4 groups along 'a', whose two members sit on
different processes in 2x4 and 4x2. Float data holds NaN and inf, which must propagate as in NumPy;
bool data goes through pmax/pmin (any/all). Prints `[p] large reductions ok: N cases`.
"""
import numpy as np

import meshax as jax
from meshax import lax
from meshax.sharding import NamedSharding, PartitionSpec as P

jax.distributed.initialize()
N = 1 << 19  # float32 elements per device: 2 MiB
rng = np.random.default_rng(5)
REDUCTIONS = {"psum": (lax.psum, np.sum), "pmax": (lax.pmax, np.max), "pmin": (lax.pmin, np.min),
              "pmean": (lax.pmean, np.mean)}


def check(mesh, axes, data, name):
    collective, reference = REDUCTIONS[name]
    spec = P(*mesh.axis_names)
    f = jax.jit(jax.shard_map(lambda a: collective(a, axes), mesh=mesh, in_specs=spec, out_specs=spec))
    result = f(jax.device_put(data, NamedSharding(mesh, spec)))
    reduced_dims = tuple(mesh.axis_names.index(a) for a in axes)
    expected = reference(data, axis=reduced_dims, keepdims=True)
    for shard in result.addressable_shards:
        block = np.asarray(shard.data)
        want = np.broadcast_to(expected, data.shape)[shard.index]
        if not np.array_equal(block, want.astype(block.dtype), equal_nan=block.dtype.kind == "f") and \
                not (name == "pmean" and np.allclose(block, want, rtol=1e-6, equal_nan=True)):
            raise AssertionError(f"{name} over {axes} on mesh {dict(mesh.shape)} {data.dtype}: wrong on {shard.device}")


cases = 0
for shape, names, axes in [((8,), ("i",), ("i",)), ((2, 4), ("a", "b"), ("a",))]:
    mesh = jax.make_mesh(shape, names)
    floats = rng.integers(-50, 50, shape + (N,)).astype(np.float32)
    floats.reshape(-1)[rng.choice(floats.size, 64, replace=False)] = np.nan
    floats.reshape(-1)[rng.choice(floats.size, 64, replace=False)] = np.inf
    for name in REDUCTIONS:
        check(mesh, axes, floats, name)
        cases += 1
    bools = rng.random(shape + (4 * N,)) < 0.001
    for name in ("pmax", "pmin"):
        check(mesh, axes, bools, name)
        cases += 1
print(f"[{jax.process_index()}] large reductions ok: {cases} cases")
