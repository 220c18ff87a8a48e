# Unchanged JAX code: a flax.linen MLP trained with optax, the batch sharded over a ('data',) mesh that spans
# every process's devices, the parameters replicated; jax.jit inserts the gradient all-reduce.
#
#   meshax launch --as-jax -n 2 --cpu-devices 4 examples/flax_data_parallel.py
#
# With real JAX on one machine: JAX_NUM_CPU_DEVICES=8 python examples/flax_data_parallel.py --single-process
# prints the same losses (the global batch and the arithmetic are the same).
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec as P

STEPS, GLOBAL_BATCH, FEATURES = 8, 64, 8

if "--single-process" not in sys.argv:
    jax.distributed.initialize()

mesh = jax.make_mesh((jax.device_count(),), ("data",))
batch_sharding = NamedSharding(mesh, P("data"))
replicated = NamedSharding(mesh, P())


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(32)(x))
        x = nn.LayerNorm()(x)
        return nn.Dense(1)(x)


def global_batch(step):
    """The same global batch in every process (a fixed NumPy generator), of which each takes its rows."""
    rng = np.random.default_rng(step)
    x = rng.standard_normal((GLOBAL_BATCH, FEATURES)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    return x, y


def local_rows(array):
    per_process = GLOBAL_BATCH // jax.process_count()
    return array[jax.process_index() * per_process:(jax.process_index() + 1) * per_process]


model = MLP()
tx = optax.adamw(3e-3, weight_decay=1e-4)
params = jax.device_put(model.init(jax.random.PRNGKey(0), jnp.ones((1, FEATURES))), replicated)
opt_state = jax.device_put(tx.init(params), replicated)


@jax.jit
def train_step(params, opt_state, x, y):
    def loss_fn(p):
        return jnp.mean((model.apply(p, x) - y) ** 2)  # the mean over the global batch

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


for step in range(STEPS):
    x, y = (jax.make_array_from_process_local_data(batch_sharding, local_rows(a)) for a in global_batch(step))
    params, opt_state, loss = train_step(params, opt_state, x, y)
    if jax.process_index() == 0:
        print(f"step {step} loss {float(loss):.7f}")
