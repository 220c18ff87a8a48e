# Unchanged JAX code: Megatron-style tensor parallelism of a flax.linen transformer trained with optax.
#
# Inside `shard_map` over the mesh axis 'model', every block (self-attention, then an MLP) splits its work:
# * column-parallel layers (the q/k/v projection, the MLP's first layer) hold a slice of the output features
#   (whole attention heads, a slice of the hidden units), so each device computes its part with no communication;
# * row-parallel layers (the attention output, the MLP's second layer) hold the matching slice of the input
#   features; their partial products are summed over devices.
# Three variants (--variant) of where the activations live and how the sums travel:
# * tp:      activations replicated; `psum` after each row-parallel layer.
# * sp:      sequence parallel: activations between blocks split along the sequence (LayerNorm and residuals
#            work on 1/n of the tokens); `all_gather` before each column-parallel layer, `psum_scatter` after
#            each row-parallel one.
# * overlap: sp with collective matmuls: the all-gather and the reduce-scatter are rings of `ppermute`, each
#            step's transfer overlapping the matmul on the sequence chunk at hand.
# Mixed precision: float32 master weights and Adam state, bfloat16 compute (flax's dtype=); `jax.checkpoint` with
# a policy (--remat) around each block chooses what the backward pass keeps.
#
#   meshax launch --as-jax -n 2 --cpu-devices 4 examples/parallel_tensor.py --variant overlap
#
# With real JAX on one machine: JAX_NUM_CPU_DEVICES=8 python examples/parallel_tensor.py --single-process
# prints the same losses (the data and the arithmetic are the same).
import argparse
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

POLICIES = {
    "none": None,  # no jax.checkpoint: the backward pass keeps every intermediate
    "nothing": jax.checkpoint_policies.nothing_saveable,  # keep each block's input, recompute the rest
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,  # keep the weight matmuls' outputs
    "names": jax.checkpoint_policies.save_only_these_names("attention", "hidden"),  # keep the named values
}
parser = argparse.ArgumentParser(description="Megatron tensor-parallel transformer training with shard_map")
parser.add_argument("--single-process", action="store_true", help="one process using all its local devices")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--variant", choices=["tp", "sp", "overlap"], default="sp")
parser.add_argument("--remat", choices=sorted(POLICIES), default="names", help="the jax.checkpoint policy")
parser.add_argument("--compute-dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="the dtype of activations and of the weights' compute copies (master weights are float32)")
args = parser.parse_args()

BATCH, SEQ, DIM, HEADS, HIDDEN, LAYERS = 4, 16, 32, 8, 64, 2
HEAD_DIM = DIM // HEADS
COMPUTE = jnp.dtype(args.compute_dtype)

if not args.single_process:
    jax.distributed.initialize()

mesh = jax.make_mesh((jax.device_count(),), ("model",), axis_types=(AxisType.Auto,))
TP = mesh.shape["model"]  # heads and hidden units are split TP ways
SEQUENCE_SPLIT = args.variant != "tp"  # activations between layers: [batch, SEQ / TP, DIM] on each device


# ---- the collectives around the parallel matmuls (`axis` None: the whole model on one device, for init) --------

def ring_gather_matmul(x, kernel):
    """all_gather(x, sequence) @ kernel as a ring: at each of TP steps, start passing the sequence chunk at
    hand to the previous device and multiply it meanwhile; the chunk from device j fills rows j of the result."""
    here, chunk = jax.lax.axis_index("model"), x.shape[1]
    out = jnp.zeros((x.shape[0], chunk * TP, kernel.shape[1]), COMPUTE)
    for step in range(TP):
        incoming = jax.lax.ppermute(x, "model", [(j, (j - 1) % TP) for j in range(TP)]) if step < TP - 1 else x
        out = jax.lax.dynamic_update_slice_in_dim(out, x @ kernel, ((here + step) % TP) * chunk, axis=1)
        x = incoming
    return out


def ring_matmul_scatter(h, kernel):
    """psum_scatter(h @ kernel, sequence) as a ring: a running sum for one sequence chunk travels to the
    previous device at each step, which adds its own product for that chunk; after TP steps each device holds
    the full sum for its own chunk."""
    here, chunk = jax.lax.axis_index("model"), h.shape[1] // TP
    total = None
    for step in range(TP):
        rows = jax.lax.dynamic_slice_in_dim(h, ((here + step + 1) % TP) * chunk, chunk, axis=1)
        total = rows @ kernel if total is None else total + rows @ kernel
        if step < TP - 1:
            total = jax.lax.ppermute(total, "model", [(j, (j - 1) % TP) for j in range(TP)])
    return total


def column_matmul(x, kernel, axis):
    """x @ kernel for a column-parallel kernel [DIM, local features]: the whole sequence on every device."""
    if axis is None or args.variant == "tp":
        return x @ kernel
    if args.variant == "sp":
        return jax.lax.all_gather(x, axis, axis=1, tiled=True) @ kernel
    return ring_gather_matmul(x, kernel)


def row_matmul(h, kernel, axis):
    """h @ kernel for a row-parallel kernel [local features, DIM], summed over devices (and scattered along the
    sequence when activations are split)."""
    if axis is None:
        return h @ kernel
    if args.variant == "tp":
        return jax.lax.psum(h @ kernel, axis)
    if args.variant == "sp":
        return jax.lax.psum_scatter(h @ kernel, axis, scatter_dimension=1, tiled=True)
    return ring_matmul_scatter(h, kernel)


# ---- the model: each module creates parameters of its local shape (the whole shape when tp=1) ----------------

class ColumnParallel(nn.Module):
    """kernel [DIM, *features] split along its sharded feature dimension; the bias likewise."""

    features: tuple
    axis: str | None

    @nn.compact
    def __call__(self, x):
        init = nn.initializers.lecun_normal(in_axis=0, out_axis=tuple(range(1, 1 + len(self.features))))
        kernel = self.param("kernel", init, (x.shape[-1], *self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), self.features, jnp.float32)
        y = column_matmul(x.astype(COMPUTE), kernel.reshape(x.shape[-1], -1).astype(COMPUTE), self.axis)
        return y.reshape(*y.shape[:-1], *self.features) + bias.astype(COMPUTE)


class RowParallel(nn.Module):
    """kernel [*features, DIM] split along its first dimension; the bias (replicated) added after the sum."""

    axis: str | None

    @nn.compact
    def __call__(self, h, inner):  # inner: how many trailing dimensions of h the kernel contracts
        shape = h.shape[-inner:]
        init = nn.initializers.lecun_normal(in_axis=tuple(range(inner)), out_axis=inner)
        kernel = self.param("kernel", init, (*shape, DIM), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (DIM,), jnp.float32)
        flat = h.reshape(*h.shape[:-inner], -1).astype(COMPUTE)
        return row_matmul(flat, kernel.reshape(flat.shape[-1], DIM).astype(COMPUTE), self.axis) + bias.astype(COMPUTE)


class Block(nn.Module):
    """Pre-LayerNorm attention and MLP, each device computing HEADS / tp heads and HIDDEN / tp hidden units."""

    tp: int
    axis: str | None

    @nn.compact
    def __call__(self, x):
        heads = HEADS // self.tp
        qkv = ColumnParallel((3, heads, HEAD_DIM), self.axis, name="qkv")(nn.LayerNorm(dtype=COMPUTE)(x))
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / np.sqrt(HEAD_DIM)
        weights = jax.nn.softmax(scores, axis=-1).astype(COMPUTE)
        attention = checkpoint_name(jnp.einsum("bhqk,bkhd->bqhd", weights, v), "attention")
        x = x + RowParallel(self.axis, name="out")(attention, 2)
        h = ColumnParallel((HIDDEN // self.tp,), self.axis, name="up")(nn.LayerNorm(dtype=COMPUTE)(x))
        h = checkpoint_name(nn.gelu(h), "hidden")
        return x + RowParallel(self.axis, name="down")(h, 1)


class Transformer(nn.Module):
    tp: int = 1
    axis: str | None = None

    @nn.compact
    def __call__(self, x):
        block = Block if POLICIES[args.remat] is None else nn.remat(Block, policy=POLICIES[args.remat])
        for i in range(LAYERS):
            x = block(self.tp, self.axis, name=f"block_{i}")(x)
        return nn.LayerNorm(dtype=COMPUTE)(x).astype(jnp.float32)


# How each parameter of the whole model is split over 'model' (by its module's name); the rest is replicated.
SPLIT = {("qkv", "kernel"): P(None, None, "model"), ("qkv", "bias"): P(None, "model"),
         ("up", "kernel"): P(None, "model"), ("up", "bias"): P("model"),
         ("out", "kernel"): P("model"), ("down", "kernel"): P("model")}


def param_spec(path, _):
    names = tuple(getattr(entry, "key", None) for entry in path)
    return SPLIT.get(names[-2:], P())


def device_loss(params, x, y):
    """One device's loss, with its slices of the parameters (and of the sequence, when split)."""
    out = Transformer(TP, "model").apply(params, x)
    loss = jnp.mean((out - y) ** 2)
    return jax.lax.pmean(loss, "model") if SEQUENCE_SPLIT else loss


model = Transformer()  # the whole model, to create the parameters
example = jnp.ones((1, SEQ, DIM), jnp.float32)
param_specs = jax.tree_util.tree_map_with_path(param_spec, jax.eval_shape(model.init, jax.random.key(0), example))
params = jax.jit(model.init, out_shardings=jax.tree.map(lambda s: NamedSharding(mesh, s), param_specs))(
    jax.random.key(0), example)
tx = optax.adamw(3e-3, weight_decay=1e-4)
opt_state = tx.init(params)
data_spec = P(None, "model") if SEQUENCE_SPLIT else P()
loss_fn = jax.shard_map(device_loss, mesh=mesh, in_specs=(param_specs, data_spec, data_spec), out_specs=P())


@functools.partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def training_set():
    """The training set, the same in every process (a fixed NumPy generator): learn to mix each token with the
    next one. Every step trains on all of it (full batch), so the loss curve shows the optimisation alone."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SEQ, DIM)).astype(np.float32)
    return x, np.tanh(x + np.roll(x, -1, axis=1)).astype(np.float32)


replicated = NamedSharding(mesh, P())
# Each process passes the whole batch for its devices' replicas; shard_map's in_specs take the slices.
x, y = (jax.make_array_from_process_local_data(replicated, a) for a in training_set())
for step in range(args.steps):
    params, opt_state, loss = train_step(params, opt_state, x, y)
    if jax.process_index() == 0:
        print(f"step {step} loss {float(loss):.7f}")
