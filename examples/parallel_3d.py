# Unchanged JAX code: 3D parallelism (data x pipeline x tensor) of a flax.linen residual MLP trained with optax,
# on a mesh ('data', 'stage', 'model') = (2, 2, 2) of 8 devices, all inside one `shard_map`:
# * data parallel over 'data': each replica takes half of every micro-batch's rows; the loss is the `pmean`
#   over 'data', so the gradients of the weights (identical across replicas) are summed over it by `jax.grad`.
# * pipeline parallel over 'stage' (GPipe): the stages' weights are stacked along a leading axis split over
#   'stage'; a `jax.lax.scan` over ticks feeds micro-batches into stage 0 and `ppermute` passes activations on.
# * tensor parallel over 'model' (Megatron) inside each stage: a column-parallel layer (a slice of the hidden
#   units on each device) then a row-parallel one, whose partial products are summed with `psum`.
# Mixed precision: float32 master weights and Adam state, bfloat16 compute (flax's dtype=); `jax.checkpoint` with
# a policy (--remat) around each stage chooses what the backward pass keeps.
#
#   meshax launch --as-jax -n 2 --cpu-devices 4 examples/parallel_3d.py
#
# With real JAX on one machine: JAX_NUM_CPU_DEVICES=8 python examples/parallel_3d.py --single-process
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
    "nothing": jax.checkpoint_policies.nothing_saveable,  # keep only each stage's input, recompute the rest
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,  # keep the matmul outputs
    "names": jax.checkpoint_policies.save_only_these_names("hidden"),  # keep what checkpoint_name calls 'hidden'
}
parser = argparse.ArgumentParser(description="data x pipeline x tensor parallel training with shard_map")
parser.add_argument("--single-process", action="store_true", help="one process using all its local devices")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--remat", choices=sorted(POLICIES), default="dots", help="the jax.checkpoint policy")
parser.add_argument("--compute-dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="the dtype of activations and of the weights' compute copies (master weights are float32)")
args = parser.parse_args()

GLOBAL_BATCH, MICRO_BATCHES, FEATURES, HIDDEN = 32, 4, 16, 64
COMPUTE = jnp.dtype(args.compute_dtype)

if not args.single_process:
    jax.distributed.initialize()

mesh = jax.make_mesh((2, 2, 2), ("data", "stage", "model"), axis_types=(AxisType.Auto,) * 3)
STAGES, TP = mesh.shape["stage"], mesh.shape["model"]


class Stage(nn.Module):
    """A pre-LayerNorm residual MLP block: HIDDEN / tp hidden units on each of the 'model' devices."""

    tp: int = 1
    axis: str | None = None  # None: the whole block on one device (to create the parameters)

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(dtype=COMPUTE)(x)
        h = checkpoint_name(nn.gelu(nn.Dense(HIDDEN // self.tp, dtype=COMPUTE, name="up")(h)), "hidden")
        h = nn.Dense(FEATURES, use_bias=False, dtype=COMPUTE, name="down")(h)  # the row-parallel layer
        if self.axis is not None:
            h = jax.lax.psum(h, self.axis)  # the sum of the devices' partial products
        bias = self.param("down_bias", nn.initializers.zeros_init(), (FEATURES,), jnp.float32)
        return x + h + bias.astype(COMPUTE)


# How each (stacked) parameter is split: its stage axis over 'stage', hidden units over 'model'.
SPLIT = {("up", "kernel"): P("stage", None, "model"), ("up", "bias"): P("stage", "model"),
         ("down", "kernel"): P("stage", "model")}


def param_spec(path, _):
    names = tuple(getattr(entry, "key", None) for entry in path)
    return SPLIT.get(names[-2:], P("stage"))


def apply_stage(params, x):
    return Stage(TP, "model").apply(params, x)


if POLICIES[args.remat] is not None:
    apply_stage = jax.checkpoint(apply_stage, policy=POLICIES[args.remat])


def device_loss(stage_params, xs, ys):
    """One device's part: its stage's slice of the weights, its replica's rows of every micro-batch."""
    n = jax.lax.psum(1, "stage")  # the number of stages (a Python int)
    stage = jax.lax.axis_index("stage")
    params = jax.tree.map(lambda p: p[0], stage_params)
    micro_batches = xs.shape[0]
    to_next_stage = [(i, (i + 1) % n) for i in range(n)]

    def tick(carry, t):
        held, outputs = carry
        held = jnp.where(stage == 0, xs[t % micro_batches].astype(COMPUTE), held)
        held = apply_stage(params, held)
        finished = t - (n - 1)
        store = (stage == n - 1) & (finished >= 0)
        outputs = jnp.where(store, outputs.at[finished % micro_batches].set(held), outputs)
        return (jax.lax.ppermute(held, "stage", to_next_stage), outputs), None

    start = jax.lax.pcast((jnp.zeros(xs.shape[1:], COMPUTE), jnp.zeros(xs.shape, COMPUTE)), ("data", "stage"),
                          to="varying")
    (_, outputs), _ = jax.lax.scan(tick, start, jnp.arange(micro_batches + n - 1))
    loss = jnp.mean((outputs.astype(jnp.float32) - ys) ** 2)
    loss = jax.lax.psum(jnp.where(stage == n - 1, loss, 0.0), "stage")
    return jax.lax.pmean(loss, "data")  # the mean over the replicas' rows: the global batch's mean


batch_spec = P(None, "data")  # [micro-batch, rows, features]: rows split over the replicas
keys = jax.random.split(jax.random.key(0), STAGES)
example = jnp.ones((1, FEATURES), jnp.float32)
init_stages = jax.vmap(Stage().init, in_axes=(0, None))
param_specs = jax.tree_util.tree_map_with_path(param_spec, jax.eval_shape(init_stages, keys, example))
params = jax.jit(init_stages, out_shardings=jax.tree.map(lambda s: NamedSharding(mesh, s), param_specs))(
    keys, example)
tx = optax.adam(3e-3)
opt_state = tx.init(params)
loss_fn = jax.shard_map(device_loss, mesh=mesh, in_specs=(param_specs, batch_spec, batch_spec), out_specs=P())


@jax.jit
def train_step(params, opt_state, xs, ys):
    loss, grads = jax.value_and_grad(loss_fn)(params, xs, ys)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def training_set():
    """The training set, the same in every process (a fixed NumPy generator), as [micro-batch, rows, features];
    every step trains on all of it (full batch), so the loss curve shows the optimisation alone."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((MICRO_BATCHES, GLOBAL_BATCH // MICRO_BATCHES, FEATURES)).astype(np.float32)
    return x, np.tanh(np.roll(x, 1, axis=-1) * x).astype(np.float32)


batch_sharding = NamedSharding(mesh, batch_spec)
# Each process fills its own devices' blocks from the global batch (every process can make all of it).
xs, ys = (jax.make_array_from_callback(a.shape, batch_sharding, lambda index, a=a: a[index])
          for a in training_set())
for step in range(args.steps):
    params, opt_state, loss = train_step(params, opt_state, xs, ys)
    if jax.process_index() == 0:
        print(f"step {step} loss {float(loss):.7f}")
