# Unchanged JAX code: ZeRO-3 / fully sharded data parallelism (FSDP) of a flax.linen MLP trained with optax.
#
# * Every parameter and every optimizer moment lives sharded over the mesh axis 'data' (its first dimension,
#   where the axis size divides it): each device stores 1/8 of the float32 master weights and of Adam's state.
# * Each layer casts its slice to bfloat16 and gathers the whole weight just before using it
#   (`with_sharding_constraint` to replicated): the all-gather moves half the bytes, and the gathered copy
#   lives only as long as the layer. The gradients of the sharded weights come back sharded (reduce-scatter).
# * Gradient accumulation: the global batch is split into micro-batches, `jax.lax.scan` sums their float32
#   gradients, and optax takes one step on the mean.
# * `jax.checkpoint` with a policy (--remat) chooses what the backward pass keeps; the rest is recomputed
#   (with nothing saved, the weights are gathered again in the backward pass, as FSDP does).
#
#   meshax launch --as-jax -n 2 --cpu-devices 4 examples/parallel_fsdp.py
#
# With real JAX on one machine: JAX_NUM_CPU_DEVICES=8 python examples/parallel_fsdp.py --single-process
# prints the same losses (the global batch and the arithmetic are the same).
import argparse

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

POLICIES = {
    "none": None,  # no jax.checkpoint: the backward pass keeps every intermediate
    "nothing": jax.checkpoint_policies.nothing_saveable,  # keep nothing: recompute (and re-gather) everything
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,  # keep the matmul outputs
    "names": jax.checkpoint_policies.save_only_these_names("hidden"),  # keep what checkpoint_name calls 'hidden'
}
parser = argparse.ArgumentParser(description="FSDP (ZeRO-3) training with gradient accumulation")
parser.add_argument("--single-process", action="store_true", help="one process using all its local devices")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--remat", choices=sorted(POLICIES), default="dots", help="the jax.checkpoint policy")
parser.add_argument("--compute-dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="the dtype of activations and gathered weights (master weights are float32)")
args = parser.parse_args()

GLOBAL_BATCH, MICRO_BATCHES, FEATURES, HIDDEN, DEPTH = 64, 4, 16, 64, 3
COMPUTE = jnp.dtype(args.compute_dtype)  # activations, gathered weights; master weights, optimizer: float32

if not args.single_process:
    jax.distributed.initialize()

mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(AxisType.Auto,))
replicated = NamedSharding(mesh, P())
micro_batch_sharding = NamedSharding(mesh, P(None, "data"))  # [micro-batch, rows, features]: rows split


def fsdp_sharding(leaf) -> NamedSharding:
    """Shard a parameter (or optimizer moment) along its first dimension where the device count divides it."""
    if leaf.ndim and leaf.shape[0] % mesh.shape["data"] == 0:
        return NamedSharding(mesh, P("data"))
    return replicated


class FSDPDense(nn.Module):
    """A dense layer whose float32 weights are stored sharded and gathered, in bfloat16, when used."""

    features: int

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (x.shape[-1], self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.normal(0.1), (self.features,), jnp.float32)
        kernel, bias = (jax.lax.with_sharding_constraint(w.astype(COMPUTE), replicated) for w in (kernel, bias))
        return jnp.dot(x.astype(COMPUTE), kernel) + bias


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(DEPTH):
            x = checkpoint_name(nn.gelu(FSDPDense(HIDDEN)(x)), "hidden")
        return FSDPDense(1)(x).astype(jnp.float32)


def training_set():
    """The training set, the same in every process (a fixed NumPy generator), as [micro-batch, rows, features];
    every step trains on all of it (full batch), so the loss curve shows the optimisation alone."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((MICRO_BATCHES, GLOBAL_BATCH // MICRO_BATCHES, FEATURES)).astype(np.float32)
    y = np.sin(x.sum(axis=-1, keepdims=True)).astype(np.float32)
    return x, y


def local_rows(array):
    """This process's rows of every micro-batch (its devices' block of the 'data' axis)."""
    per_process = array.shape[1] // jax.process_count()
    return array[:, jax.process_index() * per_process:(jax.process_index() + 1) * per_process]


model = MLP()
tx = optax.adamw(3e-3, weight_decay=1e-4)
example = jnp.ones((1, FEATURES), jnp.float32)
# Create the parameters and optimizer state directly sharded: jit with out_shardings from their shapes.
param_shardings = jax.tree.map(fsdp_sharding, jax.eval_shape(model.init, jax.random.key(0), example))
params = jax.jit(model.init, out_shardings=param_shardings)(jax.random.key(0), example)
opt_shardings = jax.tree.map(fsdp_sharding, jax.eval_shape(tx.init, params))
opt_state = jax.jit(tx.init, out_shardings=opt_shardings)(params)


def micro_batch_loss(params, x, y):
    return jnp.mean((model.apply(params, x) - y) ** 2)


if POLICIES[args.remat] is not None:
    micro_batch_loss = jax.checkpoint(micro_batch_loss, policy=POLICIES[args.remat])


def train_step(params, opt_state, xs, ys):
    """Sum the loss and float32 gradients over the micro-batches under scan, then one optimizer step."""
    def accumulate(carry, batch):
        loss_sum, grad_sum = carry
        loss, grads = jax.value_and_grad(micro_batch_loss)(params, *batch)
        return (loss_sum + loss, jax.tree.map(jnp.add, grad_sum, grads)), None

    zeros = (jnp.zeros((), jnp.float32), jax.tree.map(jnp.zeros_like, params))
    (loss_sum, grad_sum), _ = jax.lax.scan(accumulate, zeros, (xs, ys))
    grads = jax.tree.map(lambda g: g / MICRO_BATCHES, grad_sum)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss_sum / MICRO_BATCHES


train_step = jax.jit(train_step,
                     in_shardings=(param_shardings, opt_shardings, micro_batch_sharding, micro_batch_sharding),
                     out_shardings=(param_shardings, opt_shardings, replicated))

xs, ys = (jax.make_array_from_process_local_data(micro_batch_sharding, local_rows(a), a.shape)
          for a in training_set())
for step in range(args.steps):
    params, opt_state, loss = train_step(params, opt_state, xs, ys)
    if jax.process_index() == 0:
        print(f"step {step} loss {float(loss):.7f}")
