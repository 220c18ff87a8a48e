# Every code block of seed 003 ("Introduction to Distributed Computing in JAX"), imports changed to meshax.
# Additions, marked "meshax:": initialize() so the same program also runs as several processes
# (meshax launch -n 4 --cpu-devices 2 examples/distributed_basics.py), and lines the seed's text lost
# (e.g. "out =, w_sharded) + b_sharded" is jnp.dot(x_sharded, w_sharded) + b_sharded).
import os

flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in flags and not os.environ.get("MESHAX_NUM_PROCESSES"):
    flags += " --xla_force_host_platform_device_count=8"  # Simulate 8 devices
    os.environ["XLA_FLAGS"] = flags

import functools
from typing import Any, Dict, Tuple

import meshax.nn as nn  # the seed imports flax.linen as nn for nn.tanh
import meshax as jax
import meshax.numpy as jnp
import numpy as np
from meshax.experimental.shard_map import shard_map
from meshax.sharding import Mesh, NamedSharding
from meshax.sharding import PartitionSpec as P

PyTree = Any
Metrics = Dict[str, Tuple[jax.Array, ...]]

jax.distributed.initialize()  # meshax: a no-op for one process; joins the job under a launcher
main = jax.process_index() == 0  # meshax: print once per job


def show(*args):  # meshax: the notebook shows each cell's output once
    if main:
        print(*args)


a = jnp.arange(8)
show("Array", a)
show("Device", a.device())
show("Sharding", a.sharding)

mesh = Mesh(np.array(jax.devices()), ("i",))
show(mesh)
sharding = NamedSharding(mesh, P("i"))
a_sharded = jax.device_put(a, sharding)
show("Sharding", a_sharded.sharding)
if main:
    jax.debug.visualize_array_sharding(a_sharded)
out = nn.tanh(a_sharded)
show("Output array", jax.device_get(out))

mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("i", "j"))
show(mesh)

batch_size = 192
input_dim = 64
output_dim = 128
x = jax.random.normal(jax.random.PRNGKey(0), (batch_size, input_dim))
w = jax.random.normal(jax.random.PRNGKey(1), (input_dim, output_dim))
b = jax.random.normal(jax.random.PRNGKey(2), (output_dim,))

x_sharded = jax.device_put(x, NamedSharding(mesh, P("i", None)))
w_sharded = jax.device_put(w, NamedSharding(mesh, P(None, "j")))
b_sharded = jax.device_put(b, NamedSharding(mesh, P("j")))

out = jnp.dot(x_sharded, w_sharded) + b_sharded
show("Output shape", out.shape)
if main:
    jax.debug.visualize_array_sharding(out)


def matmul_fn(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    show("Local x shape", x.shape)
    show("Local w shape", w.shape)
    show("Local b shape", b.shape)
    return jnp.dot(x, w) + b


matmul_sharded = shard_map(
    matmul_fn, mesh, in_specs=(P("i", None), P(None, "j"), P("j")), out_specs=P("i", "j")
)
y = matmul_sharded(x_sharded, w_sharded, b_sharded)
show("Output shape", y.shape)
if main:
    jax.debug.visualize_array_sharding(y)


@functools.partial(shard_map, mesh=mesh, in_specs=P("i", "j"), out_specs=P("i", "j"))
def parallel_normalize(x: jax.Array) -> jax.Array:
    mean = jax.lax.pmean(x, axis_name="j")
    std = jax.lax.pmean((x - mean) ** 2, axis_name="j") ** 0.5
    return (x - mean) / std


out = parallel_normalize(x)
out = jax.device_get(out)
show("Mean", out.mean())
show("Std", out.std())


@functools.partial(
    shard_map, mesh=mesh, in_specs=(P("i", None), P("i", None)), out_specs=P("i", None)
)
def matmul_with_weight_gather(x: jax.Array, w: jax.Array) -> jax.Array:
    show("Original w shape", w.shape)
    w_gathered = jax.lax.all_gather(w, axis_name="i", axis=0, tiled=True)
    show("Gathered w shape", w_gathered.shape)
    y = jnp.dot(x, w_gathered)
    return y


out = matmul_with_weight_gather(x, w)
out = jax.device_get(out)
np.testing.assert_allclose(out, jnp.dot(x, w), rtol=1e-5, atol=1e-5)  # seed: assert_array_equal


@functools.partial(shard_map, mesh=mesh, in_specs=P("i", None), out_specs=P("i", None))
def scatter_example(x: jax.Array) -> jax.Array:
    x_scatter = jax.lax.psum_scatter(x, axis_name="i", scatter_dimension=1)
    return x_scatter


x_exmp = np.array(
    [
        [3, 1, 4, 1],
        [5, 9, 2, 6],
        [5, 3, 5, 8],
        [9, 7, 1, 2],
    ]
)
out = scatter_example(x_exmp)
show("Output", jax.device_get(out))


@functools.partial(shard_map, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
def ppermute_example(x: jax.Array) -> jax.Array:
    axis_size = mesh.shape["i"]
    x_perm = jax.lax.ppermute(
        x, axis_name="i", perm=[(i, (i + 1) % axis_size) for i in range(axis_size)]
    )
    return x_perm


x_exmp = np.arange(4)
out = ppermute_example(x_exmp)
show("Output", jax.device_get(out))

axis_idx_fn = jax.jit(
    shard_map(
        lambda: jnp.stack(
            [
                jax.lax.axis_index("i"),  # Device index in mesh along the "i" axis
                jax.lax.axis_index("j"),  # Device index in mesh along the "j" axis
            ],
            axis=-1,
        )[None],
        mesh,
        in_specs=P(),
        out_specs=P(
            ("i", "j"),
        ),
    )
)
out = axis_idx_fn()
out = jax.device_get(out)
for i in range(out.shape[0]):
    show(f"Device {i}: i-axis={out[i, 0]}, j-axis={out[i, 1]}")


def fold_rng_over_axis(rng: jax.random.PRNGKey, axis_name: str) -> jax.random.PRNGKey:
    """Folds the random number generator over the given axis."""
    axis_index = jax.lax.axis_index(axis_name)
    return jax.random.fold_in(rng, axis_index)


fold_fn = jax.jit(
    shard_map(
        functools.partial(fold_rng_over_axis, axis_name="i"),
        mesh,
        in_specs=P(),
        out_specs=P(
            ("i", "j"),
        ),
    )
)
rng = jax.random.PRNGKey(0)
out = fold_fn(rng)
out = jax.device_get(out)
for i in range(out.shape[0] // 2):
    show(f"Device {i}: RNG={out[2*i:2*i+2]}")
