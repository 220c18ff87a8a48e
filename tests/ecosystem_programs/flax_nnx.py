"""flax NNX + optax: a two-layer transformer language model (Embed, causal MultiHeadAttention, LayerNorm, RMSNorm,
Dropout) whose layers are made with nnx.vmap and run with nnx.scan, their MLPs under nnx.remat; trained with
nnx.Optimizer in an nnx.jit step; BatchNorm statistics, split/merge/state/update and a vmapped ensemble."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

VOCAB, DIM, HEADS, LAYERS, SEQ = 16, 16, 2, 2, 8


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.up = nnx.Linear(DIM, 2 * DIM, rngs=rngs)
        self.down = nnx.Linear(2 * DIM, DIM, rngs=rngs)

    def __call__(self, x):
        return self.down(nnx.gelu(self.up(x)))


class Block(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(DIM, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=HEADS, in_features=DIM, decode=False, rngs=rngs)
        self.norm2 = nnx.RMSNorm(DIM, rngs=rngs)
        self.mlp = MLP(rngs)
        self.drop = nnx.Dropout(0.1, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.norm1(x), mask=mask)
        return x + self.drop(nnx.remat(MLP.__call__)(self.mlp, self.norm2(x)))  # recomputed in the backward pass


class LM(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.embed = nnx.Embed(VOCAB, DIM, rngs=rngs)

        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_blocks(rngs):
            return Block(rngs)

        self.blocks = make_blocks(rngs)
        self.norm = nnx.LayerNorm(DIM, rngs=rngs)

    def __call__(self, tokens):
        mask = nnx.make_causal_mask(tokens)

        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def run(x, block):
            return block(x, mask)

        x = run(self.embed(tokens), self.blocks)
        return self.embed.attend(self.norm(x))


rng = np.random.default_rng(0)
tokens = jnp.asarray(rng.integers(0, VOCAB, (4, SEQ + 1)))
inputs, targets = tokens[:, :-1], tokens[:, 1:]
model = LM(nnx.Rngs(0, dropout=1))
optimizer = nnx.Optimizer(model, optax.adamw(3e-2, weight_decay=1e-4), wrt=nnx.Param)


@nnx.jit
def train_step(model, optimizer, inputs, targets):
    def loss_fn(model):
        logits = model(inputs)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


for i in range(5):
    print("step", i, "loss", f"{float(train_step(model, optimizer, inputs, targets)):.6f}")
model.eval()
print("eval", f"{float(jnp.abs(model(inputs)).sum()):.4f}")
print("params", sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))
print("opt step", int(optimizer.step[...]))

# split / merge / state / update: the merged model holds the split model's Variables, so both change
graphdef, params, rest = nnx.split(model, nnx.Param, ...)
twin = nnx.merge(graphdef, params, rest)
nnx.update(twin, jax.tree.map(lambda p: p * 0.5, nnx.state(twin, nnx.Param)))
print("twin", f"{float(jnp.abs(twin(inputs)).sum()):.4f}", f"{float(jnp.abs(model(inputs)).sum()):.4f}")

# BatchNorm's running statistics under nnx.jit, and a vmapped ensemble of linear layers
bn = nnx.BatchNorm(DIM, momentum=0.9, rngs=nnx.Rngs(1))
features = model.embed(inputs)
for _ in range(2):
    nnx.jit(lambda bn, x: bn(x))(bn, features)
print("bn mean", f"{float(jnp.abs(bn.mean[...]).sum()):.6f}", "var", f"{float(bn.var[...].sum()):.6f}")


@nnx.vmap(in_axes=0, out_axes=0)
def make_ensemble(key):
    return nnx.Linear(DIM, 1, rngs=nnx.Rngs(key))


ensemble = make_ensemble(jax.random.split(jax.random.key(2), 3))
scores = nnx.vmap(lambda member, x: member(x), in_axes=(0, None))(ensemble, features[:, -1])
print("ensemble", scores.shape, f"{float(scores.sum()):.6f}")
grads = nnx.grad(lambda e: jnp.mean(nnx.vmap(lambda m, x: m(x), in_axes=(0, None))(e, features[:, -1]) ** 2))(ensemble)
print("ensemble grad", f"{float(jnp.abs(grads['kernel'][...]).sum()):.6f}")
