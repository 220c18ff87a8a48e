"""psum/pmax/pmin of small blocks in every dtype that carries the in-band desync check, against NumPy.

Blocks of 1 to 1040 elements per device, 1-d and 2-d: those up to 4 KiB travel with their check in the one
buffer of the checked size, larger ones with the check after their data; float32/64, int32/64 and
complex64/128 (no pmax/pmin of complex, as in JAX), with x64 on. Float data holds NaN and inf, which must
propagate as in NumPy. Prints `[p] small reductions ok: N cases`.
"""
import numpy as np

import meshax as jax
from meshax import lax
from meshax.sharding import NamedSharding, PartitionSpec as P

jax.config.update("jax_enable_x64", True)
jax.distributed.initialize()
rng = np.random.default_rng(11)
REDUCTIONS = {"psum": (lax.psum, np.sum), "pmax": (lax.pmax, np.max), "pmin": (lax.pmin, np.min)}
DTYPES = ["float32", "float64", "int32", "int64", "complex64", "complex128"]
BLOCKS = [(1,), (3, 5), (1023,), (1024,), (16, 64), (1040,)]


def data(shape, dtype):
    values = rng.integers(-50, 50, shape)
    if dtype.startswith("complex"):
        values = values + 1j * rng.integers(-50, 50, shape)
    values = values.astype(dtype)
    if dtype.startswith("float") and values.size > 16:
        values.reshape(-1)[rng.choice(values.size, 2, replace=False)] = [np.nan, np.inf]
    return values


cases = 0
mesh = jax.make_mesh((jax.device_count(),), ("i",))
for dtype in DTYPES:
    for block in BLOCKS:
        value = data((jax.device_count(),) + block, dtype)
        for name, (collective, reference) in REDUCTIONS.items():
            if name != "psum" and dtype.startswith("complex"):
                continue
            f = jax.jit(jax.shard_map(lambda a: collective(a, "i"), mesh=mesh, in_specs=P("i"), out_specs=P()))
            result = np.asarray(f(jax.device_put(value, NamedSharding(mesh, P("i")))))
            want = reference(value, axis=0, keepdims=True).astype(dtype)
            if result.dtype != want.dtype or not np.array_equal(result, want, equal_nan=dtype.startswith("float")):
                raise AssertionError(f"{name} of {dtype} blocks {block}: got {result.reshape(-1)[:4]}..., expected "
                                     f"{want.reshape(-1)[:4]}...")
            cases += 1
print(f"[{jax.process_index()}] small reductions ok: {cases} cases")
