# Unchanged JAX code: an equinox MLP trained with optax, the batch sharded over a ('data',) mesh that spans
# every process's devices, the model replicated; eqx.filter_jit inserts the gradient all-reduce.
#
#   meshax launch --as-jax -n 2 --cpu-devices 4 examples/equinox_data_parallel.py
#
# With real JAX on one machine: JAX_NUM_CPU_DEVICES=8 python examples/equinox_data_parallel.py --single-process
# prints the same losses (the global batch and the arithmetic are the same).
import sys

import equinox as eqx
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


def global_batch(step):
    """The same global batch in every process (a fixed NumPy generator), of which each takes its rows."""
    rng = np.random.default_rng(step)
    x = rng.standard_normal((GLOBAL_BATCH, FEATURES)).astype(np.float32)
    y = np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)
    return x, y


def local_rows(array):
    per_process = GLOBAL_BATCH // jax.process_count()
    return array[jax.process_index() * per_process:(jax.process_index() + 1) * per_process]


model = eqx.nn.MLP(FEATURES, 1, width_size=32, depth=2, activation=jax.nn.tanh, key=jax.random.PRNGKey(0))
model = eqx.filter_shard(model, replicated)
tx = optax.adam(3e-3)
opt_state = tx.init(eqx.filter(model, eqx.is_array))


@eqx.filter_jit
def train_step(model, opt_state, x, y):
    def loss_fn(m):
        return jnp.mean((jax.vmap(m)(x) - y) ** 2)  # the mean over the global batch

    loss, grads = eqx.filter_value_and_grad(loss_fn)(model)
    updates, opt_state = tx.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, loss


for step in range(STEPS):
    x, y = (jax.make_array_from_process_local_data(batch_sharding, local_rows(a)) for a in global_batch(step))
    model, opt_state, loss = train_step(model, opt_state, x, y)
    if jax.process_index() == 0:
        print(f"step {step} loss {float(loss):.7f}")
