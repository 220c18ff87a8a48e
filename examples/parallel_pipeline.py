# Unchanged JAX code: GPipe-style pipeline parallelism of a flax.linen residual MLP trained with optax.
#
# * One stage per device on the mesh axis 'stage'; the stages' parameters are stacked (a leading axis of
#   length n, sharded over 'stage'), so each device holds only its own stage's weights and Adam moments.
# * Inside `shard_map`, a `jax.lax.scan` runs the schedule: at tick t stage 0 reads micro-batch t, every stage
#   applies its layer to what it holds, the last stage stores the micro-batch it finished, and `ppermute`
#   passes each activation on to the next stage. n - 1 extra ticks fill and drain the pipeline (the bubble).
# * `jax.grad` of the whole schedule is the backward pipeline: ppermute's transpose sends the gradients
#   back along the ring.
# * Mixed precision: float32 master weights and optimizer state, bfloat16 compute and activations in flight;
#   `jax.checkpoint` with a policy (--remat) around each stage chooses what the backward pass keeps.
#
#   meshax launch --as-jax -n 2 --cpu-devices 4 examples/parallel_pipeline.py
#
# With real JAX on one machine: JAX_NUM_CPU_DEVICES=8 python examples/parallel_pipeline.py --single-process
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
parser = argparse.ArgumentParser(description="GPipe pipeline-parallel training with shard_map and ppermute")
parser.add_argument("--single-process", action="store_true", help="one process using all its local devices")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--remat", choices=sorted(POLICIES), default="nothing", help="the jax.checkpoint policy")
parser.add_argument("--compute-dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="the dtype of activations and of the weights' compute copies (master weights are float32)")
args = parser.parse_args()

GLOBAL_BATCH, MICRO_BATCHES, FEATURES, HIDDEN = 32, 4, 16, 32
COMPUTE = jnp.dtype(args.compute_dtype)

if not args.single_process:
    jax.distributed.initialize()

mesh = jax.make_mesh((jax.device_count(),), ("stage",), axis_types=(AxisType.Auto,))
replicated = NamedSharding(mesh, P())
stacked = NamedSharding(mesh, P("stage"))  # the leading (stage) axis of every parameter split over devices


class Stage(nn.Module):
    """One pipeline stage: a pre-LayerNorm residual MLP block, computing in COMPUTE with float32 parameters."""

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(dtype=COMPUTE)(x)
        h = checkpoint_name(nn.gelu(nn.Dense(HIDDEN, dtype=COMPUTE)(h)), "hidden")
        return x + nn.Dense(FEATURES, dtype=COMPUTE)(h)


def apply_stage(params, x):
    return Stage().apply(params, x)


if POLICIES[args.remat] is not None:
    apply_stage = jax.checkpoint(apply_stage, policy=POLICIES[args.remat])


def pipeline_loss(stage_params, xs, ys):
    """One device's part of the GPipe schedule; returns the mean loss over all micro-batches (on every stage).
    stage_params: this stage's parameters (leading axis of length 1); xs, ys: [micro-batch, rows, features]."""
    n = jax.lax.psum(1, "stage")  # the number of stages (a Python int)
    stage = jax.lax.axis_index("stage")
    params = jax.tree.map(lambda p: p[0], stage_params)
    micro_batches = xs.shape[0]
    to_next_stage = [(i, (i + 1) % n) for i in range(n)]

    def tick(carry, t):
        held, outputs = carry
        held = jnp.where(stage == 0, xs[t % micro_batches].astype(COMPUTE), held)  # stage 0 reads the input
        held = apply_stage(params, held)
        finished = t - (n - 1)  # the micro-batch that the last stage completes at this tick
        store = (stage == n - 1) & (finished >= 0)
        outputs = jnp.where(store, outputs.at[finished % micro_batches].set(held), outputs)
        return (jax.lax.ppermute(held, "stage", to_next_stage), outputs), None

    # The carry differs from stage to stage: mark the zeros it starts from as varying over 'stage'.
    start = jax.lax.pcast((jnp.zeros(xs.shape[1:], COMPUTE), jnp.zeros(xs.shape, COMPUTE)), "stage", to="varying")
    (_, outputs), _ = jax.lax.scan(tick, start, jnp.arange(micro_batches + n - 1))
    loss = jnp.mean((outputs.astype(jnp.float32) - ys) ** 2)
    return jax.lax.psum(jnp.where(stage == n - 1, loss, 0.0), "stage")  # only the last stage's is real


loss_fn = jax.shard_map(pipeline_loss, mesh=mesh, in_specs=(P("stage"), P(), P()), out_specs=P())
tx = optax.adam(3e-3)


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


# Each stage's parameters from its own key, stacked along a new leading axis that is split over 'stage'.
keys = jax.random.split(jax.random.key(0), mesh.shape["stage"])
init_stages = jax.vmap(Stage().init, in_axes=(0, None))
params = jax.jit(init_stages, out_shardings=stacked)(keys, jnp.ones((1, FEATURES), jnp.float32))
opt_state = tx.init(params)

# Every stage sees the whole (small) batch: each process passes all of it for its devices' replicas.
xs, ys = (jax.make_array_from_process_local_data(replicated, a) for a in training_set())
for step in range(args.steps):
    params, opt_state, loss = train_step(params, opt_state, xs, ys)
    if jax.process_index() == 0:
        print(f"step {step} loss {float(loss):.7f}")
