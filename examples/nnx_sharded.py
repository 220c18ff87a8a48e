# Unchanged JAX code: a flax NNX MLP whose parameters carry sharding annotations (nnx.with_partitioning), laid out
# over a ('data', 'model') mesh that spans every process's devices: the batch is split over 'data', the hidden
# features over 'model'. nnx.Optimizer (optax's adamw) and an nnx.jit train step; jit inserts the collectives.
#
#   meshax launch --as-jax -n 2 --cpu-devices 4 examples/nnx_sharded.py
#
# With real JAX on one machine: JAX_NUM_CPU_DEVICES=8 python examples/nnx_sharded.py --single-process
# prints the same losses (the global batch and the arithmetic are the same).
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

STEPS, GLOBAL_BATCH, FEATURES, HIDDEN = 8, 64, 8, 32

if "--single-process" not in sys.argv:
    jax.distributed.initialize()

mesh = jax.make_mesh((2, jax.device_count() // 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
batch_sharding = NamedSharding(mesh, P("data", None))


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        kernel, zeros, ones = nnx.initializers.lecun_normal(), nnx.initializers.zeros, nnx.initializers.ones
        self.up = nnx.Linear(FEATURES, HIDDEN, kernel_init=nnx.with_partitioning(kernel, (None, "model")),
                             bias_init=nnx.with_partitioning(zeros, ("model",)), rngs=rngs)
        self.norm = nnx.LayerNorm(HIDDEN, scale_init=nnx.with_partitioning(ones, ("model",)),
                                  bias_init=nnx.with_partitioning(zeros, ("model",)), rngs=rngs)
        self.down = nnx.Linear(HIDDEN, 1, kernel_init=nnx.with_partitioning(kernel, ("model", None)), rngs=rngs)

    def __call__(self, x):
        h = jax.lax.with_sharding_constraint(nnx.relu(self.up(x)), P("data", "model"))
        return self.down(self.norm(h))


@nnx.jit
def create():
    """The model and its optimizer, every parameter (and its adamw moments) laid out as its annotation says."""
    model = MLP(nnx.Rngs(0))
    state = nnx.state(model)
    nnx.update(model, jax.lax.with_sharding_constraint(state, nnx.get_partition_spec(state)))
    return model, nnx.Optimizer(model, optax.adamw(3e-3, weight_decay=1e-4), wrt=nnx.Param)


@nnx.jit
def train_step(model, optimizer, x, y):
    def loss_fn(model):
        return jnp.mean((model(x) - y) ** 2)  # the mean over the global batch

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def global_batch(step):
    """The same global batch in every process (a fixed NumPy generator), of which each takes its rows."""
    rng = np.random.default_rng(step)
    x = rng.standard_normal((GLOBAL_BATCH, FEATURES)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    return x, y


def local_rows(array):
    per_process = GLOBAL_BATCH // jax.process_count()
    return array[jax.process_index() * per_process:(jax.process_index() + 1) * per_process]


with jax.set_mesh(mesh):
    model, optimizer = create()
    for step in range(STEPS):
        x, y = (jax.make_array_from_process_local_data(batch_sharding, local_rows(a)) for a in global_batch(step))
        loss = train_step(model, optimizer, x, y)
        if jax.process_index() == 0:
            print(f"step {step} loss {float(loss):.7f}")

if jax.process_index() == 0:
    print("up.kernel", tuple(model.up.kernel[...].sharding.spec), "down.kernel",
          tuple(model.down.kernel[...].sharding.spec))
